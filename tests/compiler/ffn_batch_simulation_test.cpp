// The batched fused FFN (generate_ffn_batch, fc_batch_codegen.h) on the virtual Edge TPU: every
// output byte of every row equals what the batch-1 fused FFN program (generate_ffn, itself equal to
// the int8 path's integers, tests/llm) returns for that row alone, over the same resident
// parameters; with the llm batch path's pairing of w1 and w3, two w2 groups on one tile, and the
// most rows one program takes (stories15M's shapes).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"

namespace tinycoral::compiler {
namespace {

FcLayer random_layer(int n, int k, int32_t in_zp, std::mt19937& random) {
  FcLayer l;
  l.n = n;
  l.k = k;
  l.weights.resize(size_t(n) * size_t(k));
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  l.in_zp = in_zp;
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  const float typical = 127.0f / (3.0f * 74 * 74 * std::sqrt(static_cast<float>(k)));
  for (int o = 0; o < n; ++o)
    l.mult.push_back(typical * (0.5f + std::uniform_real_distribution<float>(0, 1)(random)));
  l.out_zp = 128;
  l.clamp_min = fc_clamp(0, l.out_zp, 1.0f);
  l.clamp_max = fc_clamp(255, l.out_zp, 1.0f);
  l.signed_input = l.signed_output = true;
  return l;
}

// hidden / 64 pairs of w1 and w3 groups, w2 of n outputs; the gate's quantization as the int8
// path's calibration gives it (h1 over the spline's range, products within int8).
FfnLayer random_ffn(int k, int hidden, int n, std::mt19937& random) {
  FfnLayer f;
  f.h1_zp = 120;
  f.h3_zp = 136;
  f.a_zp = 100;
  f.up = random_layer(2 * hidden, k, 90, random);
  f.up.input_name = "x";
  for (int g = 0; g < 2 * hidden / 64; ++g) {
    const int32_t zp = g % 2 == 0 ? f.h1_zp : f.h3_zp;
    f.up.group_out_zp.push_back(zp);
    f.up.group_clamp_min.push_back(fc_clamp(0, zp, 1.0f));
    f.up.group_clamp_max.push_back(fc_clamp(255, zp, 1.0f));
  }
  f.down = random_layer(n, hidden, 140, random);
  f.down.output_name = "y";
  f.h1_scale = 0.06f;
  f.mult_a = 1.0f / 200;
  f.a_clamp_min = fc_clamp(0, f.a_zp, 1.0f);
  f.a_clamp_max = fc_clamp(255, f.a_zp, 1.0f);
  f.mult_m = 1.0f / 90;
  f.m_clamp_min = fc_clamp(0, f.down.in_zp, 1.0f);
  f.m_clamp_max = fc_clamp(255, f.down.in_zp, 1.0f);
  return f;
}

struct Case {
  int k, hidden, n, rows;
  FcPlacement up, down;
};

void expect_rows_equal_batch_one(const Case& c, std::mt19937& random) {
  SCOPED_TRACE(cat("K ", c.k, " hidden ", c.hidden, " N ", c.n, " rows ", c.rows));
  const FfnLayer f = random_ffn(c.k, c.hidden, c.n, random);
  std::vector<uint8_t> x(size_t(c.rows) * size_t(c.k));
  for (auto& b : x) b = static_cast<uint8_t>(random());
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(f.up, c.up), {});
  chip::testing::run_executable(chip, fc_caching(f.down, c.down), {});
  const FfnPrograms one = generate_ffn(f, c.up, c.down);
  std::vector<uint8_t> want;
  for (int r = 0; r < c.rows; ++r) {
    const std::vector<uint8_t> row(x.begin() + long(r) * c.k, x.begin() + long(r + 1) * c.k);
    const auto y = chip::testing::run_executable(chip, one.execution, {{"x", row}}).at("y");
    want.insert(want.end(), y.begin(), y.begin() + c.n);
  }
  ASSERT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), size_t(16));
  const auto raw =
      chip::testing::run_executable(chip, generate_ffn_batch(f, c.up, c.down, c.rows), {{"x", x}})
          .at("y");
  std::vector<uint8_t> got;
  for (int r = 0; r < c.rows; ++r)
    for (int o = 0; o < c.n; ++o) got.push_back(raw.at(fc_batch_output_index(c.rows, r, o)));
  EXPECT_EQ(got, want);
  EXPECT_EQ(chip.fault(), "");
}

TEST(FfnBatchOnTheVirtualEdgeTpu, EveryRowEqualsTheBatchOneFfn) {
  std::mt19937 random(53);
  const int units = fc_units_per_tile(320, false);
  // Two pairs on tiles 3 and 9; w2's five groups, two on tile 0.
  expect_rows_equal_batch_one({320,
                               128,
                               320,
                               5,
                               {{3, 3, 9, 9}, {0, units, 0, units}},
                               {{0, 1, 2, 0, 4}, {2048, 2048, 0, 2048 + 512, 0}}},
                              random);
  expect_rows_equal_batch_one({64, 64, 64, 1, {{7, 7}, {0, 100}}, {{7}, {400}}}, random);
  // 8 rows: m's broadcast in 256-byte pieces of 4 rows.
  expect_rows_equal_batch_one(
      {128, 192, 128, 8, {{1, 1, 5, 5, 14, 14}, {0, 200, 0, 200, 0, 200}}, {{5, 6}, {400, 0}}},
      random);
}

// stories15M's shapes (K 288 padded to 320, hidden 768, w2 288 padded to 320) at the most rows
// one program takes: 12 pairs, 1,668 pieces of m broadcast.
TEST(FfnBatchOnTheVirtualEdgeTpu, Stories15MShapesAtTheMostRows) {
  std::mt19937 random(61);
  FcPlacement up, down;
  const int units = fc_units_per_tile(320, false);
  for (int t = 0; t < 12; ++t) {
    up.tiles.insert(up.tiles.end(), {t, t});
    up.param_units.insert(up.param_units.end(), {0, units});
  }
  down.tiles = {12, 13, 14, 15, 0};
  down.param_units = {0, 0, 0, 0, 2 * units};
  const int rows = ffn_batch_max_rows(random_ffn(320, 768, 320, random), 1);
  EXPECT_GE(rows, 128);
  expect_rows_equal_batch_one({320, 768, 320, rows, up, down}, random);
}

TEST(FfnBatchOnTheVirtualEdgeTpu, RefusesUnpairedPlacementsAndTooManyRows) {
  std::mt19937 random(59);
  const FfnLayer f = random_ffn(320, 128, 320, random);
  const FcPlacement up{{3, 3, 9, 9}, {0, 1024, 0, 1024}},
      down{{0, 1, 2, 3, 4}, {2048, 2048, 0, 0, 0}};
  EXPECT_THROW(generate_ffn_batch(f, {{3, 4, 9, 9}, {0, 1024, 0, 1024}}, down, 2), Error);
  EXPECT_THROW(generate_ffn_batch(f, up, down, ffn_batch_max_rows(f, 1) + 1), Error);
  EXPECT_THROW(generate_ffn_batch(f, up, down, 0), Error);
}

}  // namespace
}  // namespace tinycoral::compiler
