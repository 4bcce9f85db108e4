// The word-times-row kernels: every SIMD level equals a plain int64 sum wrapped to 32 bits, over
// random rows, zero points, column counts (full 8-column blocks and tails) and accumulators near
// the int32 edges.
#include "chip/ops/mac_kernels.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

namespace tinycoral::chip::ops {
namespace {

std::array<int32_t, 64> reference(std::array<int32_t, 64> acc, const uint8_t* x, const uint8_t* row,
                                  uint32_t columns, int32_t in_zp, int32_t w_zp) {
  for (uint32_t c = 0; c < columns; ++c) {
    int64_t sum = acc[c];
    for (int b = 0; b < 4; ++b) sum += int64_t{x[b] - in_zp} * (row[4 * c + b] - w_zp);
    acc[c] = static_cast<int32_t>(static_cast<uint32_t>(sum));
  }
  return acc;
}

TEST(MacKernels, EveryLevelMatchesTheWrappedSum) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int32_t> start(INT32_MIN, INT32_MAX);
  std::vector<WordTimesRowKernel> kernels{word_times_row_portable(), word_times_row_kernel()};
  if (auto avx2 = word_times_row_avx2()) kernels.push_back(avx2);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::array<uint8_t, 256> row;
    for (auto& b : row) b = static_cast<uint8_t>(byte(rng));
    const std::array<uint8_t, 4> x{static_cast<uint8_t>(byte(rng)), static_cast<uint8_t>(byte(rng)),
                                   static_cast<uint8_t>(byte(rng)),
                                   static_cast<uint8_t>(byte(rng))};
    std::array<int32_t, 64> acc;
    for (auto& a : acc) a = trial % 3 == 0 ? INT32_MAX - byte(rng) : start(rng);
    const auto columns = static_cast<uint32_t>(trial % 65);
    const int32_t in_zp = byte(rng), w_zp = trial % 5 == 0 ? 0 : byte(rng);
    const auto expected = reference(acc, x.data(), row.data(), columns, in_zp, w_zp);
    for (WordTimesRowKernel kernel : kernels) {
      auto got = acc;
      kernel(got.data(), x.data(), row.data(), columns, in_zp, w_zp);
      ASSERT_EQ(got, expected) << "trial " << trial << " columns " << columns;
      ++checked;
    }
  }
  EXPECT_GE(checked, 600);
}

}  // namespace
}  // namespace tinycoral::chip::ops
