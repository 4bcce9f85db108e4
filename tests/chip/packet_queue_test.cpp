// PacketQueue: reading packets through a Reader and dropping them at once gives the same packets,
// in the same order, as front() and pop_front() one by one, across runs of different packet sizes
// and a short last packet per run.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "chip/machine.h"

namespace tinycoral::chip {
namespace {

std::shared_ptr<const uint8_t[]> block_of(size_t bytes, uint8_t first) {
  auto block = std::make_shared<uint8_t[]>(bytes);
  std::iota(block.get(), block.get() + bytes, first);
  return block;
}

TEST(PacketQueue, ReaderAndDropTakeWhatPopFrontTakes) {
  std::mt19937 rng(5);
  PacketQueue by_reader, by_pop;
  for (int round = 0; round < 200; ++round) {
    // A few runs: 256-byte rows, 16-byte depthwise entries, odd sizes with a short last packet.
    for (int k = rng() % 3; k >= 0; --k) {
      const size_t packet = std::vector<size_t>{256, 16, 24, 100}[rng() % 4];
      const size_t bytes = 1 + rng() % 900, begin = rng() % 40;
      const auto block = block_of(begin + bytes, static_cast<uint8_t>(rng()));
      by_reader.push(block, begin, begin + bytes, packet);
      by_pop.push(block, begin, begin + bytes, packet);
    }
    ASSERT_EQ(by_reader.size(), by_pop.size());
    const uint64_t n = by_reader.size() == 0 ? 0 : 1 + rng() % by_reader.size();
    PacketQueue::Reader reader = by_reader.reader();
    for (uint64_t i = 0; i < n; ++i) {
      const std::span<const uint8_t> got = reader.next(), want = by_pop.front();
      ASSERT_EQ(got.size(), want.size()) << "round " << round << " packet " << i;
      ASSERT_EQ(got.data(), want.data()) << "round " << round << " packet " << i;
      by_pop.pop_front();
    }
    by_reader.drop(n);
    ASSERT_EQ(by_reader.size(), by_pop.size());
    if (!by_pop.empty()) {
      ASSERT_EQ(by_reader.front().data(), by_pop.front().data());
    }
  }
}

}  // namespace
}  // namespace tinycoral::chip
