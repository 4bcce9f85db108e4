// The average pool in two stages with signed 16-bit partial sums (ops/pooling16.cpp,
// docs/chip_ops.md 3.6) on a small hand-made map, the results worked out by plain loops: 3 rows x
// 5 positions x 96 channels (a group of 64 and a partial last group of 32), as gen2020 DeepLab
// averages its 33 x 33 x 160 map.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"
#include "ops_test_util.h"

namespace tinycoral::chip {
namespace {

using ops_test::loops;
using ops_test::ttu;
constexpr int kRows = 3, kPositions = 5, kChannels = 96;
constexpr int64_t kMapUnit = 4096, kSumsUnit = 8192;
constexpr int64_t kOnes = 1000, kRowSums = 2048, kMeans = 4096;

// Dark enough that many row sums minus 131 per position, plus 227, are negative.
uint8_t value(int y, int x, int c) {
  return static_cast<uint8_t>((y * 71 + x * 13 + c * 29) % 160);
}

OpInstr pool_op(uint8_t cfg2, uint8_t cfg3, uint8_t nlu) {
  OpInstr op = ops_test::unit_op(1, 4, 0x127, 0b11);
  op.cfg2 = cfg2;
  op.cfg3 = cfg3;
  op.nlu_mode = nlu;
  op.out_ch = 63;
  op.out_ch_last = 31;
  op.out_last_mode = 3;
  return op;
}

int16_t half_at(const Tile& tile, int64_t byte) {
  int16_t v;
  std::memcpy(&v, &tile.narrow[static_cast<size_t>(byte)], 2);
  return v;
}

TEST(OpsPooling16, RowSumsThenTheirSumGiveTheMean) {
  Tile tile;
  // The map as a transposing narrowToWide lays it out: unit = position + 8 row + 24 group, lane
  // (unit % 4) = the position's byte in every column, one channel per column.
  for (int g = 0; g < 2; ++g)
    for (int y = 0; y < kRows; ++y)
      for (int x = 0; x < kPositions; ++x)
        for (int c = 0; c < (g == 0 ? 64 : 32); ++c) {
          const int64_t unit = kMapUnit + x + 8 * y + 24 * g;
          tile.wide[static_cast<size_t>((unit & ~3) * 64 + 4 * c + (unit & 3))] =
              value(y, x, 64 * g + c);
        }
  tile.narrow[kOnes] = 1;  // the word of ones both stages read through `in`

  // Stage 1: per row and group, the sum over the positions as signed 16 bits + out_zp 227; rows of
  // 96 channels x 2 bytes, the last group's 16 words followed by 16 skipped ones in every row.
  OpInstr sums = pool_op(0xE, 6, 4);
  loops(sums, {kPositions, 1, 1, kRows, 2});
  sums.in = ttu(kOnes, {{0, kPositions}, {0, kRows}, {0, 2}});
  sums.par = ttu(kMapUnit, {{1, kPositions}, {8, kRows}, {24, 2}});
  sums.out = ttu(kRowSums, {{4, 32}, {2 * kChannels, kRows}, {128, 2}});
  sums.w_zp = 131;
  sums.out_zp = 227;
  sums.out_last_cnt = 15;
  sums.out_last_skip = 16;
  ops_test::run_class(sums, tile);
  int negative = 0;
  for (int y = 0; y < kRows; ++y)
    for (int c = 0; c < kChannels; ++c) {
      int sum = 227;
      for (int x = 0; x < kPositions; ++x) sum += value(y, x, c) - 131;
      negative += sum < 0;
      EXPECT_EQ(half_at(tile, kRowSums + 2 * (kChannels * y + c)), sum) << y << " " << c;
    }
  EXPECT_GT(negative, 0);

  // Stage 2: the row sums as a 16-bit transposing narrowToWide leaves them (column c: channel c
  // of row y in bytes 0-1), one row per step, minus w_zp 227, then the mean to bytes.
  for (int g = 0; g < 2; ++g)
    for (int y = 0; y < kRows; ++y)
      for (int c = 0; c < (g == 0 ? 64 : 32); ++c)
        std::memcpy(&tile.wide[static_cast<size_t>((kSumsUnit + 4 * (y + kRows * g)) * 64 + 4 * c)],
                    &tile.narrow[static_cast<size_t>(kRowSums + 2 * (kChannels * y + 64 * g + c))],
                    2);
  OpInstr mean = pool_op(0x1E, 0, 0);
  loops(mean, {1, kRows, 1, 1, 2});
  mean.in = ttu(kOnes, {{0, kRows}, {0, 2}});
  mean.par = ttu(kSumsUnit, {{4, kRows}, {4 * kRows, 2}});
  mean.out = ttu(kMeans, {{4, 16}, {64, 2}});
  mean.w_zp = 227;
  mean.out_zp = 131;
  mean.mult = 1.0f / (kRows * kPositions);
  mean.out_last_cnt = 7;
  mean.out_last_skip = 8;
  ops_test::run_class(mean, tile);
  for (int c = 0; c < kChannels; ++c) {
    int sum = 0;
    for (int y = 0; y < kRows; ++y)
      for (int x = 0; x < kPositions; ++x) sum += value(y, x, c) - 131;
    const float scaled = static_cast<float>(sum) * mean.mult;
    const int want = std::clamp(static_cast<int>(std::nearbyint(scaled)) + 131, 0, 255);
    EXPECT_EQ(tile.narrow[static_cast<size_t>(kMeans + c)], want) << c;
  }
}

}  // namespace
}  // namespace tinycoral::chip
