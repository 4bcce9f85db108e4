// FillQueue: a queue keeping prefix fills (a depthwise stream's 16-byte entries over one shared
// rest) holds exactly the rows a queue of whole rows would, through any mix of prefix pushes,
// whole-row pushes, pops, copies and clears.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <random>

#include "chip/tile.h"

namespace tinycoral::chip {
namespace {

using Row = FillQueue::Row;

Row random_row(std::mt19937& rng) {
  Row r;
  for (auto& b : r) b = static_cast<uint8_t>(rng());
  return r;
}

void expect_same(const FillQueue& q, const std::deque<Row>& want, int op) {
  ASSERT_EQ(q.size(), want.size()) << "after operation " << op;
  // Read in a scrambled order: a prefix fill is put together in a scratch row on each read.
  for (size_t k = 0; k < want.size(); ++k) {
    const size_t i = (k * 7) % want.size();
    ASSERT_EQ(0, std::memcmp(q.row(i), want[i].data(), kWideRowBytes))
        << "fill " << i << " of " << want.size() << " after operation " << op;
  }
}

TEST(FillQueue, PrefixFillsReadAsTheWholeRowsTheyStandFor) {
  std::mt19937 rng(7);
  FillQueue q;
  std::deque<Row> want;
  const size_t length = 16;
  for (int op = 0; op < 4000; ++op) {
    const unsigned pick = rng() % 10;
    if (pick < 5) {  // a short packet, as the ring consumer queues it
      Row packet = random_row(rng);
      Row latest = want.empty() ? random_row(rng) : want.back();
      if (q.empty()) {
        q.start_prefixes(length, latest.data());
      } else if (!q.holds_prefixes(length)) {  // whole rows queued: the consumer copies
        uint8_t* fill = q.push_uninitialized();
        std::memcpy(fill, latest.data(), kWideRowBytes);
        std::memcpy(fill, packet.data(), length);
        std::memcpy(latest.data(), packet.data(), length);
        want.push_back(latest);
        expect_same(q, want, op);
        continue;
      }
      q.push_prefix(packet.data());
      std::memcpy(latest.data(), packet.data(), length);
      want.push_back(latest);
    } else if (pick < 7) {  // a whole row: the prefixes become rows first
      const Row row = random_row(rng);
      q.push_back(row);
      want.push_back(row);
    } else if (pick < 9 && !want.empty()) {
      q.pop_front();
      want.pop_front();
    } else if (rng() % 50 == 0) {
      q.clear();
      want.clear();
    } else {
      const FillQueue copy(q);
      expect_same(copy, want, op);
    }
    expect_same(q, want, op);
    ASSERT_EQ(q.empty(), want.empty());
  }
}

TEST(FillQueue, FrontAndBackOfPrefixFills) {
  Row base{};
  for (size_t i = 0; i < base.size(); ++i) base[i] = static_cast<uint8_t>(i);
  FillQueue q;
  q.start_prefixes(16, base.data());
  const std::array<uint8_t, 16> a{1, 1, 1, 1}, b{2, 2, 2, 2};
  q.push_prefix(a.data());
  q.push_prefix(b.data());
  EXPECT_TRUE(q.holds_prefixes(16));
  EXPECT_FALSE(q.holds_prefixes(32));
  EXPECT_EQ(q.front()[0], 1);
  EXPECT_EQ(q.back()[0], 2);
  EXPECT_EQ(q.back()[16], 16);  // the shared rest
  EXPECT_EQ(q.back()[255], 255);
  q.pop_front();
  q.pop_front();
  EXPECT_TRUE(q.empty());
  EXPECT_FALSE(q.holds_prefixes(16));  // an emptied queue takes whole rows again
}

TEST(FillQueue, PrefixesNeedAnEmptyQueueAndAShortLength) {
  const Row row{};
  FillQueue q;
  EXPECT_THROW(q.start_prefixes(0, row.data()), Error);
  EXPECT_THROW(q.start_prefixes(kWideRowBytes, row.data()), Error);
  q.push_back(row);
  EXPECT_THROW(q.start_prefixes(16, row.data()), Error);
}

}  // namespace
}  // namespace tinycoral::chip
