// The psum rows (docs/chip_ops.md "Partial sums in wide memory"): a K-chunked conv keeps each
// position's partial sums in wide memory at the row its `psum` walk gives, from one chunk to the
// next, so the rows hold them after the op, and a walk or a layout that shares those rows with
// other data changes the output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "chip/tile.h"
#include "common/error.h"
#include "ops_test_util.h"
#include "support/error_of.h"

namespace tinycoral::chip {
namespace {

using ops_test::loops;
using ops_test::run_class;
using ops_test::ttu;

// 1x1 conv, K = 24 input channels in 3 chunks of 2 words through a 2-row FIFO at unit 8000, 3
// positions, 4 outputs; the psum walk one row (4 units) a position from `psum_unit`, or the same
// row for all of them when `psum_stride` is 0.
constexpr int K = 24, P = 3, N = 4, kChunks = 3, kChunkWords = 2;
constexpr int64_t kFifoUnit = 8000, kOut = 2000;
uint8_t xv(int p, int k) { return static_cast<uint8_t>((p * 31 + k * 7) % 256); }
uint8_t wv(int n, int k) { return static_cast<uint8_t>((n * 19 + k * 5 + 3) % 256); }
int32_t product(int p, int n, int k) { return (xv(p, k) - 1) * (wv(n, k) - 2); }
// Sums of 24 products to the middle of the output range, not its bounds.
constexpr float kScale = 1.0f / 4096;

// The N outputs' zero points, scale and clamps.
OpInstr with_output_stage(OpInstr op) {
  op.out_ch = op.out_ch_last = N - 1;
  op.in_zp = 1;
  op.w_zp = 2;
  op.mult = kScale;
  op.clamp_min = 0;
  op.clamp_max = 255;
  return op;
}

OpInstr chunked_op(int64_t psum_unit, int64_t psum_stride = 4) {
  OpInstr op = ops_test::unit_op(1, 4, 0xE5, 0b1011);
  loops(op, {kChunkWords, 1, P, kChunks, 1});
  op.in = ttu(0, {{4, kChunkWords}, {8, 1}, {K, P}, {8, kChunks}, {0, 1}});
  op.par = ttu(kFifoUnit, {{4, kChunkWords}, {8, 1}, {0, P}, {0, kChunks}, {0, 1}});
  op.par_fifo = kChunkWords;
  op.psum = ttu(psum_unit, {{0, kChunkWords}, {0, 1}, {psum_stride, P}, {0, kChunks}, {0, 1}});
  op.out = ttu(kOut, {{4, 1}, {4, P}});
  return with_output_stage(op);
}

// The op's inputs and FIFO fills (fill f row r: input word 2f + r).
void load_chunked(Tile& tile) {
  for (int p = 0; p < P; ++p)
    for (int k = 0; k < K; ++k) tile.narrow[p * K + k] = xv(p, k);
  for (int r = 0; r < kChunkWords; ++r) {
    FifoRow& row = tile.fifo_rows[static_cast<uint32_t>((kFifoUnit + 4 * r) / 4)];
    for (int f = 0; f < kChunks; ++f) {
      std::array<uint8_t, kWideRowBytes> bytes{};
      for (int n = 0; n < N; ++n)
        for (int b = 0; b < 4; ++b) bytes[4 * n + b] = wv(n, 4 * (kChunkWords * f + r) + b);
      row.fills.push_back(bytes);
    }
  }
}

// The CPU reference of output (p, n): the whole reduction, the op's output stage.
int expected(int p, int n) {
  int64_t acc = 0;
  for (int k = 0; k < K; ++k) acc += product(p, n, k);
  const float y = std::fmin(std::fmax(static_cast<float>(acc) * kScale, 0.0f), 255.0f);
  return static_cast<int>(std::nearbyint(y));
}

int32_t wide_i32(const Tile& tile, int64_t unit, int column) {
  int32_t v;
  std::memcpy(&v, &tile.wide[unit * kWideUnitBytes + 4 * column], 4);
  return v;
}

TEST(PsumRows, HoldEachPositionsPartialSumsAfterTheOp) {
  Tile tile;
  load_chunked(tile);
  constexpr int64_t kPsum = 400;
  run_class(chunked_op(kPsum), tile);
  int inside = 0;  // outputs the clamps did not decide
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n) inside += expected(p, n) > 0 && expected(p, n) < 255;
  EXPECT_GE(inside, P * N / 2);
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n) {
      EXPECT_EQ(tile.narrow[kOut + 4 * p + n], expected(p, n)) << p << "," << n;
      // The last chunk's sums go to the output stage; the row keeps those of chunks 0 and 1,
      // which the second chunk read back from it and added to.
      int32_t kept = 0;
      for (int k = 0; k < 4 * kChunkWords * (kChunks - 1); ++k) kept += product(p, n, k);
      EXPECT_EQ(wide_i32(tile, kPsum + 4 * p, n), kept) << p << "," << n;
    }
  // Nothing beyond the 4 columns' sums, nor outside the 3 rows.
  for (int p = 0; p < P; ++p)
    for (int c = N; c < 64; ++c) EXPECT_EQ(wide_i32(tile, kPsum + 4 * p, c), 0) << p << "," << c;
  EXPECT_EQ(wide_i32(tile, kPsum + 4 * P, 0), 0);
  EXPECT_EQ(wide_i32(tile, kPsum - 4, 0), 0);
}

TEST(PsumRows, AWalkThatGivesEveryPositionOneRowGivesOtherOutputs) {
  Tile tile;
  load_chunked(tile);
  run_class(chunked_op(400, 0), tile);
  int differ = 0;
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n) differ += tile.narrow[kOut + 4 * p + n] != expected(p, n);
  EXPECT_GT(differ, 0);
  // Exactly what one shared row gives: chunk 0 leaves the last position's sums, chunk 1 adds
  // every position's onto them in turn, and the last chunk adds its own to that.
  auto chunk_sum = [](int p, int n, int chunk) {
    int32_t sum = 0;
    for (int k = 4 * kChunkWords * chunk; k < 4 * kChunkWords * (chunk + 1); ++k)
      sum += product(p, n, k);
    return sum;
  };
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n) {
      int32_t acc = chunk_sum(P - 1, n, 0) + chunk_sum(p, n, 2);
      for (int q = 0; q < P; ++q) acc += chunk_sum(q, n, 1);
      const float y = std::fmin(std::fmax(static_cast<float>(acc) * kScale, 0.0f), 255.0f);
      EXPECT_EQ(tile.narrow[kOut + 4 * p + n], static_cast<int>(std::nearbyint(y)))
          << p << "," << n;
    }
}

// A resident FULLY_CONNECTED after the conv on the same tile, its 4 weight rows at `rows_unit`: 4
// outputs of 16 inputs (words at narrow 3000), out at narrow 3100.
OpInstr resident_fc(int64_t rows_unit) {
  OpInstr op = ops_test::unit_op(1, 3, 0xA5, 0b101);
  loops(op, {4, 1, 1, 1});
  op.in = ttu(3000, {{4, 4}, {0, 1}, {0, 1}, {0, 1}});
  op.par = ttu(rows_unit, {{4, 4}, {0, 1}, {0, 1}, {0, 1}});
  op.psum = ttu(0, {{0, 4}, {0, 1}, {0, 1}, {0, 1}});
  op.out = ttu(3100, {{4, 1}});
  op.out_ch = op.out_ch_last = 3;
  op.mult = 1.0f / 128;
  op.clamp_min = 0;
  op.clamp_max = 255;
  return op;
}
uint8_t fc_x(int k) { return static_cast<uint8_t>(k * 13 % 97); }
uint8_t fc_w(int n, int k) { return static_cast<uint8_t>((n * 7 + k * 3) % 23); }
int fc_expected(int n) {
  int64_t acc = 0;
  for (int k = 0; k < 16; ++k) acc += fc_x(k) * fc_w(n, k);
  return static_cast<int>(std::nearbyint(std::fmin(static_cast<float>(acc) / 128, 255.0f)));
}
std::vector<uint8_t> conv_then_fc(int64_t psum_unit, int64_t fc_rows_unit) {
  Tile tile;
  load_chunked(tile);
  for (int k = 0; k < 16; ++k) tile.narrow[3000 + k] = fc_x(k);
  for (int r = 0; r < 4; ++r)
    for (int n = 0; n < 4; ++n)
      for (int b = 0; b < 4; ++b)
        tile.wide[(fc_rows_unit + 4 * r) * kWideUnitBytes + 4 * n + b] = fc_w(n, 4 * r + b);
  run_class(chunked_op(psum_unit), tile);
  run_class(resident_fc(fc_rows_unit), tile);
  std::vector<uint8_t> out(tile.narrow.begin() + 3100, tile.narrow.begin() + 3104);
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n)
      EXPECT_EQ(tile.narrow[kOut + 4 * p + n], expected(p, n)) << "conv " << p << "," << n;
  return out;
}

TEST(PsumRows, OverTheWeightsOfALaterOpChangeItsOutput) {
  // Psum rows after the FC's weights: the FC equals its reference.
  const std::vector<uint8_t> apart = conv_then_fc(600, 400);
  for (int n = 0; n < 4; ++n) EXPECT_EQ(apart[n], fc_expected(n)) << n;
  // The conv's psum rows on the FC's weight rows 1..3: the FC reads partial sums as weights.
  const std::vector<uint8_t> over = conv_then_fc(404, 400);
  int differ = 0;
  for (int n = 0; n < 4; ++n) differ += over[n] != fc_expected(n);
  EXPECT_GT(differ, 0);
}

// Position 0 alone through the same chunks and FIFO fills, as gen2021's one-position K-chunked 1x1
// (cfg0 0x63, reduce 0b11, loops (a, chunks): every chunk moves the FIFO to its next fill) with
// psum_tflags `tflags`; its psum walk stays on the row at `psum_unit`.
OpInstr one_position_op(int64_t psum_unit, uint32_t tflags) {
  OpInstr op = ops_test::unit_op(1, 2, 0x63, 0b11);
  loops(op, {kChunkWords, kChunks});
  op.in = ttu(0, {{4, kChunkWords}, {8, kChunks}});
  op.par = ttu(kFifoUnit, {{4, kChunkWords}, {0, kChunks}});
  op.par_fifo = kChunkWords;
  op.psum = ttu(psum_unit, {{0, kChunkWords}, {0, kChunks}});
  op.psum.tflags = tflags;
  op.out = ttu(kOut, {{4, 1}});
  return with_output_stage(op);
}

// The one-position op over a psum row that holds live bytes (bright_64x64's two-loop FC walks row
// 0, which the program reads later); returns the tile after it.
Tile one_position_over_live_row(uint32_t tflags, int64_t psum_unit, uint8_t live) {
  Tile tile;
  load_chunked(tile);
  std::fill_n(&tile.wide[psum_unit * kWideUnitBytes], kWideRowBytes, live);
  run_class(one_position_op(psum_unit, tflags), tile);
  for (int n = 0; n < N; ++n) EXPECT_EQ(tile.narrow[kOut + n], expected(0, n)) << n;
  return tile;
}

TEST(PsumRows, AOnePositionOpWritesItsRowOnlyWithPsumTflagsBit7) {
  constexpr int64_t kPsum = 400;
  constexpr uint8_t kLive = 0x5a;
  // Without the flag (bright_64x64 has psum_tflags 0) the op sums in place: the row keeps every
  // live byte.
  const Tile plain = one_position_over_live_row(0, kPsum, kLive);
  for (uint32_t b = 0; b < kWideRowBytes; ++b)
    EXPECT_EQ(plain.wide[kPsum * kWideUnitBytes + b], kLive) << "byte " << b;
  // With it (gen2021's 0x880) the row holds chunks 0 and 1's sums after the op, 0 beyond the
  // op's 4 columns.
  const Tile flagged = one_position_over_live_row(0x880, kPsum, kLive);
  for (int n = 0; n < N; ++n) {
    int32_t kept = 0;
    for (int k = 0; k < 4 * kChunkWords * (kChunks - 1); ++k) kept += product(0, n, k);
    EXPECT_EQ(wide_i32(flagged, kPsum, n), kept) << n;
  }
  for (int c = N; c < 64; ++c) EXPECT_EQ(wide_i32(flagged, kPsum, c), 0) << c;
}

// Running `op` fails with an error whose message names `what` (not any other check's error).
void expect_error(const OpInstr& op, Tile& tile, const std::string& what) {
  const std::string error = tinycoral::testing::error_of([&] { run_class(op, tile); });
  EXPECT_NE(error.find(what), std::string::npos)
      << "error \"" << error << "\", expected one naming \"" << what << "\"";
}

TEST(PsumRows, OverTheOpsOwnWindowAreAClearError) {
  Tile tile;
  load_chunked(tile);
  // Row 1 of the window (unit 8004) is position 0's psum row.
  expect_error(chunked_op(kFifoUnit + 4), tile, "overlap the op's `par` rows");
}

TEST(PsumRows, AWalkOfOtherLengthOrOutsideWideMemoryIsAClearError) {
  Tile tile;
  load_chunked(tile);
  OpInstr short_walk = chunked_op(400);
  short_walk.psum.cnt[3] = 0;  // one chunk's addresses for three chunks
  expect_error(short_walk, tile, "addresses for");
  expect_error(chunked_op(kWideUnits - 4), tile, "leaves wide memory");
}

}  // namespace
}  // namespace tinycoral::chip
