// The on-tile softmax classes (src/chip/ops/softmax.cpp, docs/chip_ops.md 6.1-6.2) on small
// hand-made instructions whose results are worked out here from the class rules, independently of
// the step loop: the maximum with a partial last round, the 16-bit subtraction with its bias, the
// sum with the reciprocal square root's range reduction, and the probabilities.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <limits>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"
#include "ops_test_util.h"

namespace tinycoral::chip {
namespace {

using ops_test::loops;
using ops_test::put_i32;
using ops_test::run_class;
using ops_test::ttu;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr int64_t kRow0 = 0x2060;  // a FIFO row's unit address

// The softmax tests' ops: four output columns.
OpInstr base_op(uint8_t opcode, uint8_t dp, uint32_t cfg0, uint8_t reduce) {
  OpInstr op = ops_test::unit_op(opcode, dp, cfg0, reduce);
  op.out_ch = op.out_ch_last = 3;
  return op;
}

// Queues a fill of FIFO row `unit` whose column 0 holds `word` (the one-word-per-step feed).
void push_word_fill(Tile& tile, int64_t unit, uint32_t word) {
  std::array<uint8_t, kWideRowBytes> row{};
  std::memcpy(row.data(), &word, 4);
  auto& r = tile.fifo_rows[static_cast<uint32_t>(unit / 4)];
  r.fills.push_back(row.data());
  ++r.written;
}

// Queues a fill of FIFO row `unit` as the one-word transposing gather writes it: byte j of the word
// at byte 0 of column j.
void push_transposed_fill(Tile& tile, int64_t unit, uint8_t b) {
  std::array<uint8_t, kWideRowBytes> row{};
  for (int j = 0; j < 4; ++j) row[4 * j] = b;
  auto& r = tile.fifo_rows[static_cast<uint32_t>(unit / 4)];
  r.fills.push_back(row.data());
  ++r.written;
}

// 4 FIFO rows x 3 rounds, the last round only 2 rows (loop_last: enable bit 14, count - 1 = 1):
// 10 bytes take part; a larger byte in the round's missing rows must not.
TEST(SoftmaxOps, MaximumStopsAtThePartialLastRound) {
  Tile tile;
  uint8_t v = 10;
  for (int round = 0; round < 3; ++round)
    for (int r = 0; r < 4; ++r) {
      const bool taken = round < 2 || r < 2;
      const uint8_t b = taken ? v++ : 250;
      push_transposed_fill(tile, kRow0 + 4 * r, b);
    }
  OpInstr op = base_op(2, 1, 0x60, 0b11);
  loops(op, {4, 3});
  op.rsv174 = 0x4000 | 1;
  op.par = ttu(kRow0, {{4, 4}, {0, 3}});
  op.par_fifo = 4;
  op.out = ttu(100, {{4, 1}});
  op.clamp_min = 0;
  op.clamp_max = 255;
  run_class(op, tile);
  for (int c = 0; c < 4; ++c) EXPECT_EQ(tile.narrow[100 + c], v - 1) << c;  // 19, not 250
}

// Two bytes per step times 16-bit weight pairs minus w_zp 1 (the rows the programs build), plus
// the bias -m: clamp(x - m, -255, 0) + 255.
TEST(SoftmaxOps, SubtractionCopiesBytesAndAddsTheBias) {
  Tile tile;
  const std::array<uint8_t, 8> x = {200, 3, 255, 17, 90, 254, 0, 128};
  std::memcpy(&tile.narrow[0], x.data(), x.size());
  const uint32_t w0[4] = {0x00010002, 0x00020001, 0x00010001, 0x00010001};
  const uint32_t w1[4] = {0x00010001, 0x00010001, 0x00010002, 0x00020001};
  std::memcpy(&tile.wide[0x2078 * 64], w0, 16);
  std::memcpy(&tile.wide[0x207c * 64], w1, 16);
  const int32_t m = 250;
  for (int c = 0; c < 4; ++c) put_i32(tile.bias_store, ops::kBiasStoreBase + 4 * c, -m);
  OpInstr op = base_op(1, 1, 0x07, 0b1);
  op.cfg2 = 0x16;
  loops(op, {2, 2});
  op.in = ttu(0, {{2, 2}, {4, 2}});
  op.par = ttu(0x2078, {{4, 2}, {0, 2}});
  op.out = ttu(64, {{4, 2}});
  op.w_zp = 1;
  op.cfg4 = 1;
  op.clamp_min = -255;
  op.clamp_max = 0;
  op.out_zp = 255;
  run_class(op, tile);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(tile.narrow[64 + i], std::min(x[i] - m, 0) + 255) << i;  // 255 for x >= m
}

// The sum of both 16-bit halves of every fill, v = S 2^-16, v = m' 4^e with m' in [1, 4), r =
// spline(m') 2^-e: with the spline 1000 m', S = 8 x 65536 gives v = 8 = 2 x 4, r = 1000.
TEST(SoftmaxOps, SumTakesTheRangeReducedReciprocalSquareRoot) {
  Tile tile;
  tile.nlu.loaded = true;
  for (int s = 0; s < 8; ++s) tile.nlu.coefficients[5 * s + 1] = 1000.0f;  // 1000 m'
  tile.nlu.breakpoints = {kInf, kInf, kInf, kInf, kInf, kInf, kInf};
  // 8 fills (2 rounds of 4 rows), each word (32768, 32768): S = 8 x 65536.
  for (int round = 0; round < 2; ++round)
    for (int r = 0; r < 4; ++r) push_word_fill(tile, kRow0 + 4 * r, 0x80008000u);
  OpInstr op = base_op(3, 1, 0x60, 0b11);
  op.cfg2 = 0x16;
  op.nlu_mode = 7;
  loops(op, {4, 2});
  op.par = ttu(kRow0, {{4, 4}, {0, 2}});
  op.par_fifo = 4;
  op.out = ttu(200, {{4, 2}});
  op.mult = 1.0f / 65536.0f;
  run_class(op, tile);
  for (int c = 0; c < 4; ++c) {
    uint16_t r;
    std::memcpy(&r, &tile.narrow[200 + 2 * c], 2);
    EXPECT_EQ(r, 1000) << c;
  }
}

// e_c q x 2^-23 rounded half to even, from a FIFO row of 16-bit exponentials (lane 0 = the low
// halves, lane 2 = the high halves) and a word holding q in both halves.
TEST(SoftmaxOps, ProbabilitiesScaleEachExponential) {
  Tile tile;
  const uint16_t q = 32768;
  const uint32_t qq = uint32_t{q} * 0x10001u;
  std::memcpy(&tile.narrow[0], &qq, 4);
  const std::array<uint16_t, 8> e = {65535, 0, 1200, 162, 60, 22, 3, 32768};
  std::array<uint8_t, kWideRowBytes> row{};
  std::memcpy(row.data(), e.data(), 16);  // column c = (e[2c], e[2c + 1])
  auto& fifo = tile.fifo_rows[static_cast<uint32_t>(kRow0 / 4)];
  fifo.fills.push_back(row.data());
  OpInstr op = base_op(1, 1, 0x60, 0);
  op.cfg2 = 0x1e;
  loops(op, {2});
  op.in = ttu(0, {{0, 2}});
  op.par = ttu(kRow0, {{2, 2}});
  op.par_fifo = 1;
  op.out = ttu(40, {{4, 2}});
  op.mult = 1.0f / 8388608.0f;
  op.clamp_min = 0;
  op.clamp_max = 255;
  run_class(op, tile);
  for (int h = 0; h < 2; ++h)
    for (int c = 0; c < 4; ++c) {
      const double p = static_cast<double>(e[2 * c + h]) * q / 8388608.0;
      EXPECT_EQ(tile.narrow[40 + 4 * h + c], std::min(255.0, std::nearbyint(p))) << h << " " << c;
    }
}

}  // namespace
}  // namespace tinycoral::chip
