// The word-times-rows kernels: every SIMD level equals a plain int64 sum wrapped to 32 bits, over
// random runs of rows, zero points, column counts (full 8-column blocks, tails and the 4-column
// depthwise case) and accumulators near the int32 edges.
#include "chip/ops/mac_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <random>
#include <vector>

namespace tinycoral::chip::ops {
namespace {

std::array<int32_t, 64> reference(std::array<int32_t, 64> acc, const std::vector<const uint8_t*>& x,
                                  const std::vector<const uint8_t*>& rows, uint32_t columns,
                                  int32_t in_zp, int32_t w_zp) {
  for (uint32_t c = 0; c < columns; ++c) {
    int64_t sum = acc[c];
    for (size_t i = 0; i < x.size(); ++i)
      for (int b = 0; b < 4; ++b) sum += int64_t{x[i][b] - in_zp} * (rows[i][4 * c + b] - w_zp);
    acc[c] = static_cast<int32_t>(static_cast<uint32_t>(sum));
  }
  return acc;
}

TEST(MacKernels, EveryLevelMatchesTheWrappedSum) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int32_t> start(INT32_MIN, INT32_MAX);
  std::vector<WordTimesRowsKernel> kernels{word_times_rows_portable(), word_times_rows_kernel()};
  if (auto avx2 = word_times_rows_avx2()) kernels.push_back(avx2);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const size_t steps = 1 + static_cast<size_t>(trial % 11);
    std::vector<std::array<uint8_t, 256>> row_bytes(steps);
    std::vector<std::array<uint8_t, 4>> x_bytes(steps);
    std::vector<const uint8_t*> rows, x;
    for (size_t i = 0; i < steps; ++i) {
      for (auto& b : row_bytes[i]) b = static_cast<uint8_t>(byte(rng));
      for (auto& b : x_bytes[i]) b = static_cast<uint8_t>(byte(rng));
      rows.push_back(row_bytes[i].data());
      x.push_back(x_bytes[i].data());
    }
    std::array<int32_t, 64> acc;
    for (auto& a : acc) a = trial % 3 == 0 ? INT32_MAX - byte(rng) : start(rng);
    const auto columns = static_cast<uint32_t>(trial % 7 == 0 ? 4 : trial % 65);
    const int32_t in_zp = byte(rng), w_zp = trial % 5 == 0 ? 0 : byte(rng);
    const auto expected = reference(acc, x, rows, columns, in_zp, w_zp);
    for (WordTimesRowsKernel kernel : kernels) {
      auto got = acc;
      kernel(got.data(), x.data(), rows.data(), static_cast<uint32_t>(steps), columns, in_zp, w_zp);
      ASSERT_EQ(got, expected) << "trial " << trial << " columns " << columns << " steps " << steps;
      ++checked;
    }
  }
  EXPECT_GE(checked, 600);
}

TEST(MacKernels, FourColumnsBatchEqualsOneRunAtATime) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int32_t> start(INT32_MIN, INT32_MAX);
  std::vector<FourColumnsBatchKernel> kernels{four_columns_batch_portable(),
                                              four_columns_batch_kernel()};
  if (auto avx2 = four_columns_batch_avx2()) kernels.push_back(avx2);
  int checked = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Periods around the depthwise 9 taps, odd and even, and past the widened-rows limit (32).
    const uint32_t period =
        trial % 10 == 0 ? 33 + trial % 3 : 1 + static_cast<uint32_t>(trial % 12);
    const uint32_t runs = 1 + static_cast<uint32_t>(rng() % 9), stride = 4 * (1 + trial % 3);
    std::vector<std::array<uint8_t, 256>> row_bytes(period);
    std::vector<std::array<uint8_t, 4>> x_bytes(size_t{runs} * period);
    std::vector<const uint8_t*> rows, x;
    for (auto& r : row_bytes) {
      for (auto& b : r) b = static_cast<uint8_t>(byte(rng));
      rows.push_back(r.data());
    }
    for (auto& w : x_bytes) {
      for (auto& b : w) b = static_cast<uint8_t>(byte(rng));
      x.push_back(w.data());
    }
    std::vector<int32_t> acc(size_t{runs} * stride);
    for (auto& a : acc) a = trial % 3 == 0 ? INT32_MIN + byte(rng) : start(rng);
    const int32_t in_zp = byte(rng), w_zp = trial % 5 == 0 ? 0 : byte(rng);
    std::vector<int32_t> expected = acc;
    for (uint32_t r = 0; r < runs; ++r) {
      std::array<int32_t, 64> one{};
      std::copy_n(acc.begin() + r * stride, 4, one.begin());
      const std::vector<const uint8_t*> xr(x.begin() + r * period, x.begin() + (r + 1) * period);
      one = reference(one, xr, rows, 4, in_zp, w_zp);
      std::copy_n(one.begin(), 4, expected.begin() + r * stride);
    }
    for (FourColumnsBatchKernel kernel : kernels) {
      auto got = acc;
      kernel(got.data(), stride, x.data(), rows.data(), runs, period, in_zp, w_zp);
      ASSERT_EQ(got, expected) << "trial " << trial << " period " << period << " runs " << runs;
      ++checked;
    }
  }
  EXPECT_GE(checked, 400);
}

}  // namespace
}  // namespace tinycoral::chip::ops
