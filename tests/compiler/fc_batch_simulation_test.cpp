// The batched FULLY_CONNECTED program (fc_batch_codegen.h) on the virtual Edge TPU: for random
// layers and batches, every output byte of every row equals the CPU reference in `edgetpu`
// rounding, with the weights placed and cached as the llm chip path places them (several layers
// resident at once, two groups on a tile, per-group output stages), and for K above the batch-1
// generator's 1024 (K-splitting is not needed: every tile streams the whole row).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "chip/sim_runner.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_column_write.h"
#include "host/rounding.h"

namespace tinycoral::compiler {
namespace {

struct BatchCase {
  int n, k, rows;
  FcPlacement placement;
  bool own_stages = false;
};

struct Layer {
  FcLayer layer;
  FcPlacement placement;
  int rows;
  container::Executable caching, execution;
  std::vector<uint8_t> x, want;  // x [rows][k]; want [rows][n]
};

Layer make(const BatchCase& c, std::mt19937& random) {
  Layer p;
  FcLayer& l = p.layer;
  l.n = c.n;
  l.k = c.k;
  l.weights.resize(size_t(c.n) * size_t(c.k));
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  l.in_zp = static_cast<int32_t>(random() % 200) + 28;
  l.out_zp = static_cast<int32_t>(random() % 100) + 78;
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  const float typical = 127.0f / (3.0f * 74 * 74 * std::sqrt(static_cast<float>(c.k)));
  for (int o = 0; o < c.n; ++o)
    l.mult.push_back(typical * (0.5f + std::uniform_real_distribution<float>(0, 1)(random)));
  l.clamp_min = fc_clamp(0, l.out_zp, 1.0f);
  l.clamp_max = fc_clamp(255, l.out_zp, 1.0f);
  if (c.own_stages) {
    for (int g = 0; g < fc_groups(c.n); ++g) {
      const int32_t zp = 40 + 50 * (g % 4);
      l.group_out_zp.push_back(zp);
      l.group_clamp_min.push_back(fc_clamp(0, zp, 1.0f));
      l.group_clamp_max.push_back(fc_clamp(200, zp, 1.0f));
    }
  }
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  p.placement = c.placement;
  p.rows = c.rows;
  p.caching = fc_caching(l, p.placement);
  p.execution = generate_fc_batch(l, p.placement, c.rows);
  p.x.resize(size_t(c.rows) * size_t(c.k));
  for (auto& b : p.x) b = static_cast<uint8_t>(random());
  for (int row = 0; row < c.rows; ++row) {
    for (int r = 0; r < c.n; ++r) {
      const size_t g = size_t(r / 64);
      const bool own = c.own_stages;
      const host::edgetpu::Clamps clamps{own ? l.group_clamp_min[g] : l.clamp_min,
                                         own ? l.group_clamp_max[g] : l.clamp_max};
      int32_t acc = 0;
      for (int j = 0; j < c.k; ++j)
        acc += (int32_t{p.x[size_t(row) * size_t(c.k) + size_t(j)]} - l.in_zp) *
               l.weights[size_t(r) * size_t(c.k) + size_t(j)];
      const int32_t y = host::edgetpu::requantize(acc, l.mult[size_t(r)], clamps,
                                                  own ? l.group_out_zp[g] : l.out_zp);
      p.want.push_back(static_cast<uint8_t>(std::clamp(y, 0, 255)));
    }
  }
  EXPECT_GT(std::set<uint8_t>(p.want.begin(), p.want.end()).size(), size_t(16));
  return p;
}

std::vector<uint8_t> ordered(const Layer& p, const std::vector<uint8_t>& raw) {
  std::vector<uint8_t> out;
  for (int row = 0; row < p.rows; ++row)
    for (int r = 0; r < p.layer.n; ++r)
      out.push_back(raw.at(fc_batch_output_index(p.rows, row, r)));
  return out;
}

// Several placed layers resident together, each run as a batch program twice.
TEST(FcBatchOnTheVirtualEdgeTpu, EveryRowOfPlacedLayersMatchesTheReference) {
  std::mt19937 random(41);
  const int top = 0x2000 - fc_units_per_tile(1024, false);
  const std::vector<BatchCase> cases = {
      {320, 320, 4, {}},
      {200, 768, 16, {{3, 7, 0, 15}, {4 * 300, 4 * 100, 4 * 300, 4 * 200}}, true},
      {64, 1024, 3, {{9}, {top}}},
      // 24 groups: tiles 0..7 compute two each, at their own units.
      {1536,
       320,
       5,
       {{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 7, 6, 5, 4, 3, 2, 1, 0},
        [] {
          std::vector<int> u(16, 5000);
          u.resize(24, 5400);
          return u;
        }()},
       true},
      {128, 64, 1, {{12, 13}, {0, 0}}},
  };
  std::vector<Layer> layers;
  for (const BatchCase& c : cases) layers.push_back(make(c, random));
  chip::VirtualEdgeTpu chip;
  for (const Layer& p : layers) chip::testing::run_executable(chip, p.caching, {});
  for (int round = 0; round < 2; ++round) {
    for (const Layer& p : layers) {
      SCOPED_TRACE(std::to_string(p.layer.n) + " x " + std::to_string(p.layer.k) + " x " +
                   std::to_string(p.rows) + " rows");
      const auto raw = chip::testing::run_executable(chip, p.execution, {{"x", p.x}}).at("y");
      ASSERT_EQ(ordered(p, raw), p.want) << "round " << round;
    }
  }
  EXPECT_EQ(chip.fault(), "");
}

// K beyond the batch-1 generator (stories42M's w2 has K = 1376, stories110M's 2048), at one row
// (the batch-1 case) and several, and the most rows one program takes for K = 768.
TEST(FcBatchOnTheVirtualEdgeTpu, KAbove1024AndTheLargestBatch) {
  std::mt19937 random(43);
  for (const BatchCase& c : std::vector<BatchCase>{{128, 1408, 1, {}},
                                                   {64, 2048, 3, {{5}, {0}}},
                                                   {96, 1408, 2, {}},
                                                   {64, 768, fc_batch_max_rows(768, 1), {}}}) {
    SCOPED_TRACE(std::to_string(c.n) + " x " + std::to_string(c.k) + " x " +
                 std::to_string(c.rows));
    const Layer p = make(c, random);
    chip::VirtualEdgeTpu chip;
    chip::testing::run_executable(chip, p.caching, {});
    const auto raw = chip::testing::run_executable(chip, p.execution, {{"x", p.x}}).at("y");
    ASSERT_EQ(ordered(p, raw), p.want);
    EXPECT_EQ(chip.fault(), "");
  }
}

// Groups reading their own part of each row (FcPlacement::in_at, the llm batch path's u: each
// head's 64 weights over its slice of v): every byte equals the reference over that part, with
// two groups on one tile reading different places, and unaligned or overlong places refused.
TEST(FcBatchOnTheVirtualEdgeTpu, GroupsReadTheirOwnPartOfEachRow) {
  std::mt19937 random(47);
  const int k = 64, row_bytes = 320, rows = 6;
  FcLayer l;
  l.n = 5 * 64;
  l.k = k;
  l.weights.resize(size_t(l.n) * k);
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  l.in_zp = 77;
  l.out_zp = 120;
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  for (int o = 0; o < l.n; ++o)
    l.mult.push_back(0.004f * (0.5f + std::uniform_real_distribution<float>(0, 1)(random)));
  l.clamp_min = fc_clamp(0, l.out_zp, 1.0f);
  l.clamp_max = fc_clamp(255, l.out_zp, 1.0f);
  l.input_name = "x";
  l.output_name = "y";
  FcPlacement at;
  at.tiles = {0, 3, 3, 9, 15};
  at.param_units = {0, 0, fc_units_per_tile(k, false), 100, 0};
  at.in_at = {0, 48, 96, 240, 256};  // 48-byte heads, K padded to 64, up to the row's end
  std::vector<uint8_t> x(size_t(rows) * row_bytes);
  for (auto& b : x) b = static_cast<uint8_t>(random());
  std::vector<uint8_t> want;
  for (int row = 0; row < rows; ++row)
    for (int r = 0; r < l.n; ++r) {
      int32_t acc = 0;
      const size_t from = size_t(row) * row_bytes + size_t(at.in_at[size_t(r / 64)]);
      for (int j = 0; j < k; ++j)
        acc += (int32_t{x[from + size_t(j)]} - l.in_zp) * l.weights[size_t(r) * k + size_t(j)];
      const int32_t y =
          host::edgetpu::requantize(acc, l.mult[size_t(r)], {l.clamp_min, l.clamp_max}, l.out_zp);
      want.push_back(static_cast<uint8_t>(std::clamp(y, 0, 255)));
    }
  EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), size_t(16));
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(l, at), {});
  const auto raw =
      chip::testing::run_executable(chip, generate_fc_batch(l, at, rows, row_bytes), {{"x", x}})
          .at("y");
  std::vector<uint8_t> got;
  for (int row = 0; row < rows; ++row)
    for (int r = 0; r < l.n; ++r) got.push_back(raw.at(fc_batch_output_index(rows, row, r)));
  EXPECT_EQ(got, want);
  EXPECT_EQ(chip.fault(), "");
  FcPlacement bad = at;
  bad.in_at[1] = 50;  // not a word
  EXPECT_THROW(generate_fc_batch(l, bad, rows, row_bytes), Error);
  bad.in_at[1] = 260;  // past the row's end
  EXPECT_THROW(generate_fc_batch(l, bad, rows, row_bytes), Error);
}

// What message an expression's Error carries ("" when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A K that is not a multiple of 64 has one form (FcLayer::weight_k, the llm scores' keys at K =
// head_size): the input keeps K = 64 bytes, the op and the weights K = 48. Each group reads its
// head's 48 bytes from in_at, the last one up to the row's end (in_at + 48 = row_bytes, where
// in_at + 64 would pass it); every byte equals the reference over those 48 bytes, a group holds
// 8 + 48 units and its column write 12 rows. The same layer at k = 48 is refused where the
// generators take a layer's K (the batch checks, the caching stream), naming the multiple of 64.
TEST(FcBatchOnTheVirtualEdgeTpu, AKOf48IsAWeightKOverA64ByteInput) {
  std::mt19937 random(53);
  const int k = 64, weight_k = 48, heads = 4, row_bytes = 192, rows = 3;
  FcLayer l;
  l.n = heads * 64;
  l.k = k;
  l.weight_k = weight_k;
  l.weights.assign(size_t(l.n) * k, 0);
  for (int o = 0; o < l.n; ++o)
    for (int j = 0; j < weight_k; ++j)
      l.weights[size_t(o) * k + size_t(j)] =
          static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  l.in_zp = 90;
  l.out_zp = 110;
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  for (int o = 0; o < l.n; ++o)
    l.mult.push_back(0.004f * (0.5f + std::uniform_real_distribution<float>(0, 1)(random)));
  l.clamp_min = fc_clamp(0, l.out_zp, 1.0f);
  l.clamp_max = fc_clamp(255, l.out_zp, 1.0f);
  l.input_name = "x";
  l.output_name = "y";
  FcPlacement at;
  at.tiles = {1, 4, 4, 11};
  at.param_units = {0, 0, fc_units_per_tile(l), 200};
  at.in_at = {0, 48, 96, 144};  // 48-byte heads side by side, the last to the row's end
  EXPECT_EQ(fc_units_per_tile(l), 8 + weight_k);
  EXPECT_EQ(fc_batch_unsupported(l, rows, 1, row_bytes), "");
  std::vector<uint8_t> x(size_t(rows) * row_bytes);
  for (auto& b : x) b = static_cast<uint8_t>(random());
  std::vector<uint8_t> want;
  for (int row = 0; row < rows; ++row)
    for (int r = 0; r < l.n; ++r) {
      int32_t acc = 0;
      const size_t from = size_t(row) * row_bytes + size_t(at.in_at[size_t(r / 64)]);
      for (int j = 0; j < weight_k; ++j)
        acc += (int32_t{x[from + size_t(j)]} - l.in_zp) * l.weights[size_t(r) * k + size_t(j)];
      const int32_t y =
          host::edgetpu::requantize(acc, l.mult[size_t(r)], {l.clamp_min, l.clamp_max}, l.out_zp);
      want.push_back(static_cast<uint8_t>(std::clamp(y, 0, 255)));
    }
  EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), size_t(16));
  const container::Executable caching = fc_caching(l, at);
  EXPECT_EQ(caching.parameters.size(), size_t(heads * (8 + weight_k) * 64));
  EXPECT_EQ(fc_column_write(l, at, 5).rows, weight_k / 4);
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, caching, {});
  const auto raw =
      chip::testing::run_executable(chip, generate_fc_batch(l, at, rows, row_bytes), {{"x", x}})
          .at("y");
  std::vector<uint8_t> got;
  for (int row = 0; row < rows; ++row)
    for (int r = 0; r < l.n; ++r) got.push_back(raw.at(fc_batch_output_index(rows, row, r)));
  EXPECT_EQ(got, want);
  EXPECT_EQ(chip.fault(), "");

  // K = 48 as the layer's own K: refused, pointing at weight_k.
  FcLayer short_k = l;
  short_k.k = weight_k;
  short_k.weight_k = 0;
  short_k.weights.clear();
  for (int o = 0; o < l.n; ++o)
    short_k.weights.insert(short_k.weights.end(), l.weights.begin() + long(o) * k,
                           l.weights.begin() + long(o) * k + weight_k);
  for (const std::string& why : {fc_batch_unsupported(short_k, rows, 1, row_bytes),
                                 fc_batch_unsupported(short_k.n, short_k.k, rows, 1, row_bytes),
                                 error_of([&] { generate_fc_batch(short_k, at, rows, row_bytes); }),
                                 error_of([&] { fc_caching(short_k, at); })}) {
    EXPECT_NE(why.find("K = 48"), std::string::npos) << why;
    EXPECT_NE(why.find("multiple of 64"), std::string::npos) << why;
    EXPECT_NE(why.find("weight_k"), std::string::npos) << why;
  }
  // The weights' K must be whole words, at most the input's.
  FcLayer ragged = l;
  ragged.weight_k = 50;
  EXPECT_NE(fc_batch_unsupported(ragged, rows, 1, row_bytes), "");
  EXPECT_THROW(fc_caching(ragged, at), Error);
  ragged.weight_k = 68;
  EXPECT_NE(fc_batch_unsupported(ragged, rows, 1, row_bytes), "");
  // A head read past the row's end (in_at + 48 > row_bytes) is refused.
  FcPlacement past = at;
  past.in_at[3] = 148;
  EXPECT_THROW(generate_fc_batch(l, past, rows, row_bytes), Error);
}

TEST(FcBatchGenerator, RefusesWhatItCannotHold) {
  FcLayer l;
  l.n = 64;
  l.k = 768;
  l.weights.assign(64 * 768, 1);
  l.mult.assign(64, 0.01f);
  l.input_name = "x";
  l.output_name = "y";
  EXPECT_THROW(generate_fc_batch(l, {}, 0), Error);
  EXPECT_THROW(generate_fc_batch(l, {}, fc_batch_max_rows(768, 1) + 1), Error);
  EXPECT_NE(fc_batch_unsupported(64, 100, 1, 1), "");
  EXPECT_NE(fc_batch_unsupported(64 * 33, 64, 1, 2), "");
  EXPECT_EQ(fc_batch_unsupported(64, 2048, 8, 1), "");
  EXPECT_GE(fc_batch_max_rows(288, 2), 256);  // stories15M's dim: a batch of 256 in one run
}

}  // namespace
}  // namespace tinycoral::compiler
