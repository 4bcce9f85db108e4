// Each op class on small hand-made instructions whose results are worked out independently here
// (plain loops over the tensor semantics, not over the engine's TTU walk).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "chip/ops/mac_engine.h"
#include "chip/ops/nlu.h"
#include "chip/ops/requantize.h"
#include "chip/tile.h"
#include "common/error.h"
#include "ops_test_util.h"

namespace tinycoral::chip {
namespace {

using ops_test::loops;
using ops_test::put_i32;
using ops_test::run_class;
using ops_test::ttu;

TEST(OpsClasses, FullyConnectedTwoPassesWithBias) {
  // y[N=70] = W x[K=8] + b: two 64-output passes (second has 6 valid outputs -> 2 words).
  constexpr int K = 8, N = 70;
  Tile tile;
  uint8_t x[K] = {1, 2, 3, 4, 250, 6, 7, 128};
  std::memcpy(&tile.narrow[16], x, K);
  auto w = [](int n, int k) { return static_cast<uint8_t>((n * 7 + k * 13) % 256); };
  auto bias = [](int n) { return n * 11 - 300; };
  // Weight rows: pass p, word j at unit 4*(p*2 + j); column c bytes = W[64p+c][4j..4j+3].
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 2; ++j)
      for (int c = 0; c < 64 && 64 * p + c < N; ++c)
        for (int b = 0; b < 4; ++b)
          tile.wide[(p * 2 + j) * 256 + 4 * c + b] = w(64 * p + c, 4 * j + b);
  for (int n = 0; n < N; ++n) put_i32(tile.bias_store, ops::kBiasStoreBase + 4 * n, bias(n));

  OpInstr op = ops_test::unit_op(1, 3, 0xA5, 0b101);
  loops(op, {2, 1, 1, 2});
  op.in = ttu(16, {{4, 2}, {8, 1}, {8, 1}, {0, 2}});
  op.par = ttu(0, {{4, 2}, {0, 1}, {8, 1}, {8, 2}});
  op.out = ttu(1000, {{4, 16}, {0, 1}, {64, 2}});
  op.out_ch = 63;
  op.out_ch_last = 7;  // 6 valid outputs padded to 8 channels = 2 words
  op.out_last_mode = 2;
  op.out_last_cnt = 1;
  op.out_last_skip = 14;
  op.cfg4 = 1;
  op.in_zp = 3;
  op.w_zp = 9;
  op.out_zp = 10;
  op.mult = 0.001f;
  op.clamp_min = -10.0f;
  op.clamp_max = 245.0f;
  run_class(op, tile);
  for (int n = 0; n < N; ++n) {
    int64_t acc = bias(n);
    for (int k = 0; k < K; ++k) acc += (x[k] - 3) * (w(n, k) - 9);
    float y = std::fmin(std::fmax(static_cast<float>(acc) * 0.001f, -10.0f), 245.0f);
    EXPECT_EQ(tile.narrow[1000 + n], static_cast<int>(std::nearbyint(y)) + 10) << n;
  }
  // The partial last group wrote 2 words, not 16: bytes after 1000+72 stay untouched.
  EXPECT_EQ(tile.narrow[1000 + 72], 0);
  // One explicit value: n = 0: bias -300, x-3 = (-2,-1,0,1,247,3,4,125), w-9 =
  // (-9,4,17,30,43,56,69,82) acc = -300 + 18 - 4 + 0 + 30 + 10621 + 168 + 276 + 10250 = 21059
  // -> 21.059 -> 21 + 10.
  EXPECT_EQ(tile.narrow[1000], 31);
}

// Per-channel requantization (cfg3 8, docs/chip_ops.md section 6) on the same two-pass FC:
// weights stored as w + 128 with the zero point 128 in a wide row (pc_zp_unit), one multiplier per
// output from the bias store's multiplier region, biases as before.
OpInstr per_channel_fc(Tile& tile, int32_t zp_of_column_5) {
  constexpr int K = 8, N = 70;
  uint8_t x[K] = {1, 2, 3, 4, 250, 6, 7, 128};
  std::memcpy(&tile.narrow[16], x, K);
  for (int p = 0; p < 2; ++p)
    for (int j = 0; j < 2; ++j)
      for (int c = 0; c < 64 && 64 * p + c < N; ++c)
        for (int b = 0; b < 4; ++b)
          tile.wide[(p * 2 + j) * 256 + 4 * c + b] =
              static_cast<uint8_t>(((64 * p + c) * 7 + (4 * j + b) * 13) % 256);
  for (int n = 0; n < N; ++n) {
    put_i32(tile.bias_store, ops::kBiasStoreBase + 4 * n, n * 11 - 300);
    const float m = 0.001f * static_cast<float>(1 + n % 5);
    std::memcpy(&tile.bias_store[kMultStoreBase + 4 * n], &m, 4);
  }
  for (int c = 0; c < 64; ++c) put_i32(tile.wide, 100 * 256 + 4 * c, c == 5 ? zp_of_column_5 : 128);
  OpInstr op = ops_test::unit_op(1, 3, 0xA5, 0b101);
  loops(op, {2, 1, 1, 2});
  op.in = ttu(16, {{4, 2}, {8, 1}, {8, 1}, {0, 2}});
  op.par = ttu(0, {{4, 2}, {0, 1}, {8, 1}, {8, 2}});
  op.out = ttu(1000, {{4, 16}, {0, 1}, {64, 2}});
  op.out_ch = 63;
  op.out_ch_last = 7;
  op.out_last_mode = 2;
  op.out_last_cnt = 1;
  op.out_last_skip = 14;
  op.cfg4 = 1;
  op.cfg3 = 8;
  op.pc_mult = true;
  op.pc_zp_unit = 400;  // row 100
  op.in_zp = 3;
  op.out_zp = 10;
  op.clamp_min = -10.0f;
  op.clamp_max = 245.0f;
  return op;
}

TEST(OpsClasses, FullyConnectedPerChannel) {
  Tile tile;
  const OpInstr op = per_channel_fc(tile, 128);
  run_class(op, tile);
  const uint8_t x[8] = {1, 2, 3, 4, 250, 6, 7, 128};
  for (int n = 0; n < 70; ++n) {
    int64_t acc = n * 11 - 300;
    for (int k = 0; k < 8; ++k) acc += (x[k] - 3) * ((n * 7 + k * 13) % 256 - 128);
    const float m = 0.001f * static_cast<float>(1 + n % 5);
    float y = std::fmin(std::fmax(static_cast<float>(acc) * m, -10.0f), 245.0f);
    EXPECT_EQ(tile.narrow[1000 + n], static_cast<int>(std::nearbyint(y)) + 10) << n;
  }
}

TEST(OpsClasses, PerChannelZeroPointsThatDifferAreRefused) {
  Tile tile;
  const OpInstr op = per_channel_fc(tile, 127);
  const OpClass* cls = ops::classify(op);
  ASSERT_NE(cls, nullptr);
  OpEnv env(tile, op);
  try {
    cls->run(op, env);
    FAIL() << "an op whose per-channel zero points differ ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("per-channel weight zero points 128 and 127"),
              std::string::npos)
        << e.what();
  }
}

TEST(OpsClasses, DepthwiseDiagonalRowsFromAFifo) {
  // 3 taps along a row of 5 positions (VALID, stride 1) -> 3 outputs, 8 channels = 2 channel words,
  // each with its own FIFO fill of 3 diagonal rows and its own 4-channel bias.
  constexpr int C = 8, W = 5, taps = 3, out_w = 3;
  Tile tile;
  auto xv = [](int p, int c) { return static_cast<uint8_t>(40 + 17 * p + 5 * c); };
  for (int p = 0; p < W; ++p)
    for (int c = 0; c < C; ++c) tile.narrow[p * C + c] = xv(p, c);
  auto wv = [](int t, int c) { return static_cast<uint8_t>(200 + 3 * t - 2 * c); };
  const uint8_t w_zp = 204;
  for (int t = 0; t < taps; ++t) {
    auto& row = tile.fifo_rows[(8192 + 4 * t) / 4];
    for (int cw = 0; cw < 2; ++cw) {
      std::array<uint8_t, 256> r{};
      for (int c = 0; c < 4; ++c)
        for (int b = 0; b < 4; ++b) r[4 * c + b] = b == c ? wv(t, 4 * cw + c) : w_zp;
      row.fills.push_back(r);
    }
  }
  for (int c = 0; c < C; ++c) put_i32(tile.bias_store, ops::kBiasStoreBase + 4 * c, 100 * c - 50);

  OpInstr op = ops_test::unit_op(1, 3, 0xE5, 0b11);
  loops(op, {1, taps, out_w, 2});
  op.in = ttu(0, {{4, 1}, {C, taps}, {C, out_w}, {4, 2}});
  op.par = ttu(8192, {{4, 1}, {4, taps}, {0, out_w}, {0, 2}});
  op.par_fifo = taps;
  op.out = ttu(4000, {{4, 1}, {C, out_w}, {4, 2}});
  op.out_ch = op.out_ch_last = 3;
  op.cfg4 = 1;
  op.in_zp = 7;
  op.w_zp = w_zp;
  op.out_zp = 3;
  op.mult = 0.01f;
  op.clamp_min = -3.0f;
  op.clamp_max = 252.0f;
  const OpClass* cls = ops::classify(op);
  ASSERT_NE(cls, nullptr);
  EXPECT_STREQ(cls->name, "DEPTHWISE_CONV_2D");
  EXPECT_EQ(cls->par_fifo_fills(op), 2u);
  run_class(op, tile);
  for (int p = 0; p < out_w; ++p)
    for (int c = 0; c < C; ++c) {
      int64_t acc = 100 * c - 50;
      for (int t = 0; t < taps; ++t) acc += (xv(p + t, c) - 7) * (wv(t, c) - w_zp);
      const float y = std::fmin(std::fmax(static_cast<float>(acc) * 0.01f, -3.0f), 252.0f);
      EXPECT_EQ(tile.narrow[4000 + p * C + c], static_cast<int>(std::nearbyint(y)) + 3)
          << p << "," << c;
    }
}

TEST(OpsClasses, ConvKChunkedKeepsPartialSumsAcrossChunks) {
  // 1x1 conv, K = 16 in 2 chunks of 2 words, 3 positions, 4 outputs (one group).
  constexpr int K = 16, P = 3, N = 4;
  Tile tile;
  auto xv = [](int p, int k) { return static_cast<uint8_t>((p * 31 + k * 7) % 256); };
  auto wv = [](int n, int k) { return static_cast<uint8_t>((n * 19 + k * 5 + 3) % 256); };
  for (int p = 0; p < P; ++p)
    for (int k = 0; k < K; ++k) tile.narrow[p * K + k] = xv(p, k);
  // FIFO: 2 rows per fill (chunk), fill f row r holds input word 2f + r.
  for (int r = 0; r < 2; ++r)
    for (int f = 0; f < 2; ++f) {
      std::array<uint8_t, 256> row{};
      for (int n = 0; n < N; ++n)
        for (int b = 0; b < 4; ++b) row[4 * n + b] = wv(n, 4 * (2 * f + r) + b);
      tile.fifo_rows[(8000 + 4 * r) / 4].fills.push_back(row);
    }
  OpInstr op = ops_test::unit_op(1, 4, 0xE5, 0b1011);
  loops(op, {2, 1, P, 2, 1});
  op.in = ttu(0, {{4, 2}, {8, 1}, {K, P}, {8, 2}, {0, 1}});
  op.par = ttu(8000, {{4, 2}, {8, 1}, {0, P}, {0, 2}, {0, 1}});
  op.par_fifo = 2;
  // One psum row a position (Google's walk; psum_rows_test.cpp checks what the rows hold).
  op.psum = ttu(400, {{0, 2}, {0, 1}, {4, P}, {0, 2}, {0, 1}});
  op.out = ttu(2000, {{4, 1}, {4, P}});
  op.out_ch = op.out_ch_last = 3;
  op.in_zp = 1;
  op.w_zp = 2;
  op.mult = 1.0f / 64;
  op.clamp_min = 0;
  op.clamp_max = 255;
  const OpClass* cls = ops::classify(op);
  ASSERT_NE(cls, nullptr);
  EXPECT_EQ(cls->par_fifo_fills(op), 2u);
  run_class(op, tile);
  for (int p = 0; p < P; ++p)
    for (int n = 0; n < N; ++n) {
      int64_t acc = 0;
      for (int k = 0; k < K; ++k) acc += (xv(p, k) - 1) * (wv(n, k) - 2);
      const float y = std::fmin(std::fmax(static_cast<float>(acc) / 64, 0.0f), 255.0f);
      EXPECT_EQ(tile.narrow[2000 + 4 * p + n], static_cast<int>(std::nearbyint(y)))
          << p << "," << n;
    }
}

TEST(OpsClasses, RequantizeThroughTheIdentityRow) {
  Tile tile;
  for (int i = 0; i < 8; ++i) tile.narrow[i] = static_cast<uint8_t>(i * 30);
  for (int c = 0; c < 4; ++c) tile.wide[8316 * 64 + 4 * c + c] = 1;  // identity row 0x207C
  OpInstr op = ops_test::unit_op(1, 1, 0x05, 0);
  loops(op, {2});
  op.in = ttu(0, {{4, 2}});
  op.par = ttu(8316, {{0, 2}});
  op.out = ttu(100, {{4, 2}});
  op.out_ch = op.out_ch_last = 3;
  op.in_zp = 60;  // RELU: lo = 0 relative -> clamp_min 0
  op.out_zp = 5;
  op.mult = 0.5f;
  op.clamp_min = 0.0f;
  op.clamp_max = 250.0f;
  run_class(op, tile);
  for (int i = 0; i < 8; ++i) {
    const float y = std::fmax((i * 30 - 60) * 0.5f, 0.0f);
    EXPECT_EQ(tile.narrow[100 + i], static_cast<int>(std::nearbyint(y)) + 5) << i;
  }
  EXPECT_EQ(tile.narrow[100 + 3], 20);  // (90-60)*0.5 = 15, + 5
}

TEST(OpsClasses, LogisticUsesTheLoadedSpline) {
  Tile tile;
  tile.nlu = ops::logistic_table();
  for (int i = 0; i < 4; ++i) tile.narrow[i] = static_cast<uint8_t>(i * 80);
  for (int c = 0; c < 4; ++c) tile.wide[8316 * 64 + 4 * c + c] = 1;
  OpInstr op = ops_test::unit_op(1, 1, 0x05, 0);
  op.nlu_mode = 1;
  loops(op, {1});
  op.in = ttu(0, {{4, 1}});
  op.par = ttu(8316, {{0, 1}});
  op.out = ttu(50, {{4, 1}});
  op.out_ch = op.out_ch_last = 3;
  op.in_zp = 128;
  op.mult = 0.0625f;  // s_in
  op.clamp_min = -10.396732f;
  op.clamp_max = 10.396732f;
  run_class(op, tile);
  for (int i = 0; i < 4; ++i) {
    const double x = (i * 80 - 128) * 0.0625;
    const double sigmoid256 = 256.0 / (1.0 + std::exp(-x));
    EXPECT_NEAR(tile.narrow[50 + i], std::min(255.0, sigmoid256), 0.51) << i;
  }
  tile.nlu.loaded = false;
  OpEnv env(tile, op);
  EXPECT_THROW(ops::classify(op)->run(op, env), Error);
}

TEST(OpsClasses, MulTwoSteps) {
  // a (4 bytes) * b (4 bytes) elementwise: step 1 writes one word per element, step 2 packs.
  Tile tile;
  const uint8_t a[4] = {10, 200, 128, 255}, b[4] = {3, 100, 250, 128};
  std::memcpy(&tile.narrow[0], a, 4);
  std::array<uint8_t, 256> row{};
  for (int c = 0; c < 64; ++c)
    for (int k = 0; k < 4; ++k) row[4 * c + k] = c == 0 ? b[k] : 0;  // b's word in column 0
  tile.fifo_rows[8284 / 4].fills.push_back(row);
  OpInstr s1 = ops_test::unit_op(1, 4, 0x60, 0);
  s1.cfg3 = 7;
  loops(s1, {4});
  s1.in = ttu(0, {{1, 4}});
  s1.par = ttu(8284, {{1, 4}});
  s1.par_fifo = 1;
  s1.out = ttu(64, {{4, 4}});
  s1.out_ch = s1.out_ch_last = 3;
  s1.in_zp = 128;
  s1.w_zp = 120;
  s1.out_zp = 100;
  s1.mult = 0.01f;
  s1.clamp_min = -100.0f;
  s1.clamp_max = 155.0f;
  run_class(s1, tile);
  for (int i = 0; i < 4; ++i) {
    const float y = std::fmin(
        std::fmax(static_cast<float>((a[i] - 128) * (b[i] - 120)) * 0.01f, -100.0f), 155.0f);
    const int q = static_cast<int>(std::nearbyint(y)) + 100;
    for (int k = 0; k < 4; ++k) EXPECT_EQ(tile.narrow[64 + 4 * i + k], q) << i;
  }
  for (int c = 0; c < 4; ++c) tile.wide[8316 * 64 + 4 * c + c] = 1;
  OpInstr s2 = ops_test::unit_op(1, 2, 0, 0);
  s2.cfg3 = 7;
  loops(s2, {4});
  s2.in = ttu(64, {{4, 4}});
  s2.par = ttu(8316, {{1, 4}});
  s2.out = ttu(128, {{4, 1}});
  s2.out_ch = s2.out_ch_last = 3;
  run_class(s2, tile);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tile.narrow[128 + i], tile.narrow[64 + 4 * i]) << i;
}

TEST(OpsClasses, AddSixteenBitMode) {
  // y = requant(w1 a + w2 b + offset) for one word of a and b (delta 8 bytes apart).
  Tile tile;
  const uint8_t a[4] = {0, 50, 128, 255}, b[4] = {255, 7, 128, 1};
  std::memcpy(&tile.narrow[0], a, 4);
  std::memcpy(&tile.narrow[8], b, 4);
  const int16_t w1 = 10, w2 = 3;
  auto put16 = [&](int row, int col, int half, int16_t v) {
    std::memcpy(&tile.wide[(8256 + 4 * row) * 64 + 4 * col + 2 * half], &v, 2);
  };
  put16(0, 0, 0, w1), put16(0, 1, 1, w1), put16(1, 2, 0, w1), put16(1, 3, 1, w1);
  put16(2, 0, 0, w2), put16(2, 1, 1, w2), put16(3, 2, 0, w2), put16(3, 3, 1, w2);
  OpInstr op = ops_test::unit_op(1, 5, 0x09, 0b11);
  loops(op, {2, 2});
  op.in = ttu(0, {{2, 2}, {8, 2}});
  op.par = ttu(8256, {{4, 4}});  // rows 0..3 in step order (half, operand)
  // The step order is (half 0, op 1), (half 1, op 1), (half 0, op 2), (half 1, op 2): rows 0,1,2,3.
  op.out = ttu(32, {{4, 1}});
  op.out_ch = op.out_ch_last = 3;
  op.offset = -(w1 * 128 + w2 * 128);
  op.out_zp = 128;
  op.mult = 1.0f / 13;
  op.clamp_min = -128.0f;
  op.clamp_max = 127.0f;
  run_class(op, tile);
  for (int i = 0; i < 4; ++i) {
    const int32_t acc = w1 * a[i] + w2 * b[i] + op.offset;
    const float y = std::fmin(std::fmax(static_cast<float>(acc) * (1.0f / 13), -128.0f), 127.0f);
    EXPECT_EQ(tile.narrow[32 + i], static_cast<int>(std::nearbyint(y)) + 128) << i;
  }
}

// Pool window in wide memory: 4 positions per row (lanes), 64 channels per lane.
void fill_window(Tile& tile, int base_unit, int positions, uint8_t (*v)(int, int)) {
  for (int p = 0; p < positions; ++p)
    for (int c = 0; c < 64; ++c)
      tile.wide[(base_unit + (p / 4) * 4) * 64 + 4 * c + (p % 4)] = v(p, c);
}

TEST(OpsClasses, MaxPoolAndAveragePoolOverAWideWindow) {
  Tile tile;
  auto v = [](int p, int c) { return static_cast<uint8_t>((p * 37 + c * 11) % 256); };
  fill_window(tile, 4096, 4, v);  // a 2x2 window: positions 0,1 (row 0) and 2,3 (row 1)
  OpInstr mp = ops_test::unit_op(2, 4, 0x127, 0b11);
  loops(mp, {2, 2});
  mp.par = ttu(4096, {{1, 2}, {2, 2}});
  mp.out = ttu(0, {{4, 16}});
  mp.out_ch = mp.out_ch_last = 63;
  mp.in_zp = mp.out_zp = 9;
  mp.offset = -9;
  mp.clamp_min = -9.0f;
  mp.clamp_max = 246.0f;
  run_class(mp, tile);
  for (int c = 0; c < 64; ++c) {
    int m = 0;
    for (int p = 0; p < 4; ++p) m = std::max<int>(m, v(p, c));
    EXPECT_EQ(tile.narrow[c], m) << c;
  }
  OpInstr ap = ops_test::unit_op(1, 4, 0x127, 0b11);
  ap.cfg2 = 0xE;
  ap.cfg3 = 6;
  loops(ap, {2, 2});
  ap.par = ttu(4096, {{1, 2}, {2, 2}});
  ap.out = ttu(256, {{4, 16}});
  ap.out_ch = ap.out_ch_last = 63;
  ap.mult = 0.25f;
  run_class(ap, tile);
  for (int c = 0; c < 64; ++c) {
    int s = 0;
    for (int p = 0; p < 4; ++p) s += v(p, c);
    EXPECT_EQ(tile.narrow[256 + c], static_cast<int>(std::nearbyint(s * 0.25f))) << c;
  }
}

TEST(OpsClasses, NarrowCopyGathersBytesIntoWords) {
  // 3-channel pixels (3 bytes each) -> 4-byte words through a selection row (lane k -> column k).
  Tile tile;
  for (int i = 0; i < 9; ++i) tile.narrow[i] = static_cast<uint8_t>(100 + i);
  for (int c = 0; c < 4; ++c) tile.wide[8192 * 64 + 4 * c + c] = 1;
  OpInstr op = ops_test::unit_op(1, 3, 0x07, 0b1);
  op.cfg3 = 7;
  loops(op, {3, 3});
  op.in = ttu(0, {{1, 3}, {3, 3}});
  op.par = ttu(8192, {{1, 3}, {0, 3}});
  op.out = ttu(64, {{4, 3}});
  op.out_ch = op.out_ch_last = 3;
  run_class(op, tile);
  for (int p = 0; p < 3; ++p) {
    for (int k = 0; k < 3; ++k) EXPECT_EQ(tile.narrow[64 + 4 * p + k], 100 + 3 * p + k);
    EXPECT_EQ(tile.narrow[64 + 4 * p + 3], 0);
  }
}

TEST(OpsClasses, UnknownClassesAreNotComputed) {
  OpInstr op = ops_test::unit_op(1, 1, 0x60, 0b1);  // L2 norm step 1: known shape, not modelled
  EXPECT_EQ(ops::classify(op), nullptr);
  op = ops_test::unit_op(5, 4, 0xE5, 0b1011);  // opcode 0x05
  EXPECT_EQ(ops::classify(op), nullptr);
  op = ops_test::unit_op(1, 4, 0x127, 0b11);  // 0x127 without the average-pool cfg2/cfg3
  EXPECT_EQ(ops::classify(op), nullptr);
}

TEST(OpsClasses, BoundsAreCheckedAgainstFuzzedAddresses) {
  Tile tile;
  for (int c = 0; c < 4; ++c) tile.wide[8316 * 64 + 4 * c + c] = 1;
  OpInstr op = ops_test::unit_op(1, 1, 0x05, 0);
  loops(op, {2});
  op.in = ttu(kNarrowBytes - 4, {{4, 2}});  // second word beyond narrow memory
  op.par = ttu(8316, {{0, 2}});
  op.out = ttu(0, {{4, 2}});
  op.out_ch = op.out_ch_last = 3;
  OpEnv env(tile, op);
  EXPECT_THROW(ops::classify(op)->run(op, env), Error);
  op.in = ttu(0, {{4, 3}});  // TTU step count disagrees with the main loop
  EXPECT_THROW(ops::classify(op)->run(op, env), Error);
}

}  // namespace
}  // namespace tinycoral::chip
