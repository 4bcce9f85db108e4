// Attention's scores, softmax and weighted sum over a value cache in one program
// (fc_batch_codegen.h, generate_fc_batch_attention) on the virtual Edge TPU: for random keys,
// values and queries, every output byte equals the integer reference: the requantized scores, the
// scalar-core softmax's float32 exponentials' bytes and 1 / S, the sum over positions t < n of
// e_t v_t in int32, and the output stage with the per-token multiplier f32(base_j (1 / S_h)). The
// values past n are not zero, so e's bytes past n must be; one program serves every n; with
// parameter writes in front (the new key, new values) the same run sees them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "host/rounding.h"
#include "isa/relocate.h"
#include "support/error_of.h"
#include "support/fc_scores_reference.h"

namespace tinycoral::compiler {
namespace {

constexpr int kHeads = 3, kPositions = 128, kHeadSize = 16, kK = 64, kSumSize = 40;

struct Attention {
  FcLayer scores;
  FcPlacement scores_at;
  std::vector<float> exp_mult;
  FcValueSum sum;
  int row_bytes = (kHeads - 1) * kHeadSize + kK;  // head h reads q bytes 16h..16h+63
};

int8_t random_weight(std::mt19937& random) {
  return static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
}

Attention make_attention(std::mt19937& random) {
  Attention a;
  FcLayer& l = a.scores;
  l.n = kHeads * kPositions;
  l.k = kK;
  l.weights.resize(size_t(l.n) * size_t(kK));
  for (auto& w : l.weights) w = random_weight(random);
  l.in_zp = 128;
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  for (int h = 0; h < kHeads; ++h) a.exp_mult.push_back(0.02f + 0.03f * float(h));
  for (int o = 0; o < l.n; ++o) l.mult.push_back(0.0004f + 0.0001f * float(o % 7));
  for (int g = 0; g < fc_groups(l.n); ++g) {
    const int32_t z = 100 + 20 * (g / (kPositions / 64));
    l.group_out_zp.push_back(z);
    l.group_clamp_min.push_back(fc_clamp(0, z, 1.0f));
    l.group_clamp_max.push_back(fc_clamp(255, z, 1.0f));
  }
  l.out_zp = l.group_out_zp[0];
  l.clamp_min = l.group_clamp_min[0];
  l.clamp_max = l.group_clamp_max[0];
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = false;
  for (int g = 0; g < fc_groups(l.n); ++g) {
    a.scores_at.tiles.push_back(15 - g);
    a.scores_at.param_units.push_back(0);
    a.scores_at.in_at.push_back(g / (kPositions / 64) * kHeadSize);
  }
  // The sum: one 64-output group per head (kSumSize outputs, the rest padding rows), K = the
  // positions, head h's e at byte h * kPositions; on tile 0 (no ring), tile 3 and tile 10 (beside
  // a scores group, above its parameters).
  FcLayer& s = a.sum.layer;
  s.n = kHeads * 64;
  s.k = kPositions;
  s.weights.assign(size_t(s.n) * size_t(s.k), 0);
  for (int j = 0; j < s.n; ++j)
    for (int t = 0; t < s.k && j % 64 < kSumSize; ++t)
      s.weights[size_t(j) * size_t(s.k) + size_t(t)] = random_weight(random);
  s.mult.assign(size_t(s.n), 0.0f);
  s.in_zp = 0;
  s.in_scale = 1.0f / 255.0f;
  s.out_zp = 128;
  s.out_scale = 1.0f;
  s.clamp_min = fc_clamp(1, 128, 1.0f);
  s.clamp_max = fc_clamp(255, 128, 1.0f);
  s.input_name = "x";
  s.output_name = "y";
  s.signed_input = s.signed_output = false;
  a.sum.at.tiles = {0, 3, 10};
  a.sum.at.param_units = {0, 0, 128};
  a.sum.at.in_at = {0, kPositions, 2 * kPositions};
  for (int j = 0; j < s.n; ++j) {
    const bool real = j % 64 < kSumSize;
    a.sum.mult_head.push_back(real ? j / 64 : -1);
    a.sum.mult_base.push_back(real ? (0.5f + 0.25f * float(j % 11)) / 255.0f : 0.0f);
  }
  return a;
}

// The integer reference for query x and count n: the sum's bytes [G][64].
std::vector<uint8_t> reference(const Attention& a, const std::vector<uint8_t>& x, int n,
                               std::set<int>* sums_seen) {
  const FcLayer& l = a.scores;
  const FcLayer& s = a.sum.layer;
  std::vector<uint8_t> out(size_t(s.n), 0);
  for (int h = 0; h < kHeads; ++h) {
    const std::vector<int32_t> score = testing::reference_scores(l, x, h, n, kPositions, kHeadSize);
    const int32_t m = *std::max_element(score.begin(), score.end());
    float total = 0;
    std::vector<int32_t> e;
    for (int t = 0; t < n; ++t) {
      const float v = std::exp2(static_cast<float>(score[size_t(t)] - m) * a.exp_mult[size_t(h)]);
      total += v;
      e.push_back(static_cast<int32_t>(std::nearbyint(v * 255.0f)));
    }
    const float inv = 1.0f / total;
    for (int j = h * 64; j < h * 64 + 64; ++j) {
      int32_t acc = 0;
      for (int t = 0; t < n; ++t)
        acc += e[size_t(t)] * s.weights[size_t(j) * size_t(s.k) + size_t(t)];
      const volatile float mult = a.sum.mult_base[size_t(j)] * inv;
      const int32_t q = host::edgetpu::requantize(acc, a.sum.mult_head[size_t(j)] < 0 ? 0.0f : mult,
                                                  {s.clamp_min, s.clamp_max}, s.out_zp);
      out[size_t(j)] = static_cast<uint8_t>(std::clamp(q, 0, 255));
      if (sums_seen && j % 64 < kSumSize) sums_seen->insert(out[size_t(j)]);
    }
  }
  return out;
}

std::vector<uint8_t> query(std::mt19937& random, const Attention& a, int n) {
  std::vector<uint8_t> x(size_t(a.row_bytes + kSoftmaxCountBytes), 0);
  for (int i = 0; i < a.row_bytes; ++i) x[size_t(i)] = static_cast<uint8_t>(random());
  for (int i = 0; i < 4; ++i) x[size_t(a.row_bytes + i)] = uint8_t(uint32_t(n) >> (8 * i));
  return x;
}

// The group holding position `pos` in every head, as a layer and placement of their own, with
// the scores' current weights (what the llm path streams to write a key).
FcParameterWrite key_groups(const Attention& a, int pos) {
  FcParameterWrite keys;
  FcLayer& w = keys.layer;
  w = a.scores;
  w.n = kHeads * 64;
  w.weights.clear();
  w.mult.clear();
  w.group_out_zp.clear();
  w.group_clamp_min.clear();
  w.group_clamp_max.clear();
  for (int h = 0; h < kHeads; ++h) {
    const int g = h * (kPositions / 64) + pos / 64;
    w.weights.insert(w.weights.end(), a.scores.weights.begin() + long(64 * g) * kK,
                     a.scores.weights.begin() + long(64 * g + 64) * kK);
    w.mult.insert(w.mult.end(), a.scores.mult.begin() + 64 * g,
                  a.scores.mult.begin() + 64 * g + 64);
    w.group_out_zp.push_back(a.scores.group_out_zp[size_t(g)]);
    w.group_clamp_min.push_back(a.scores.group_clamp_min[size_t(g)]);
    w.group_clamp_max.push_back(a.scores.group_clamp_max[size_t(g)]);
    keys.at.tiles.push_back(a.scores_at.tiles[size_t(g)]);
    keys.at.param_units.push_back(a.scores_at.param_units[size_t(g)]);
  }
  return keys;
}

TEST(FcAttentionOnTheVirtualEdgeTpu, WeightedSumOfEveryHeadEqualsTheIntegerReference) {
  std::mt19937 random(53);
  Attention a = make_attention(random);
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(a.scores, a.scores_at), {});
  chip::testing::run_executable(chip, fc_caching(a.sum.layer, a.sum.at), {});
  const container::Executable program =
      generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {})
          .execution;
  std::set<int> seen;
  const auto check = [&](const container::Executable& p, int n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<uint8_t> x = query(random, a, n);
    const auto out = chip::testing::run_executable(chip, p, {{"x", x}}).at("y");
    const std::vector<uint8_t> want = reference(a, x, n, &seen);
    ASSERT_EQ(out.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) ASSERT_EQ(int(out[j]), int(want[j])) << "output " << j;
  };
  for (int n : {1, 3, 4, 5, 64, 77, kPositions}) check(program, n);
  EXPECT_EQ(chip.fault(), "");
  // Not a trivial case: the sums reach both clamps and many values between.
  EXPECT_TRUE(seen.count(1) && seen.count(255));
  EXPECT_GT(seen.size(), size_t(100));

  // With parameter writes in front: new weights of positions 64..127 of every head's keys and
  // new values of every position, both seen by the same run.
  for (int h = 0; h < kHeads; ++h) {
    const int g = h * (kPositions / 64) + 1;
    for (size_t i = size_t(64 * g) * size_t(kK); i < size_t(64 * g + 64) * size_t(kK); ++i)
      a.scores.weights[i] = random_weight(random);
  }
  const FcParameterWrite keys = key_groups(a, 64);
  for (size_t j = 0; j < a.sum.layer.weights.size(); ++j)
    if (int(j) / kPositions % 64 < kSumSize) a.sum.layer.weights[j] = random_weight(random);
  const FcParameterWrite values{a.sum.layer, a.sum.at};
  const container::Executable with_writes =
      generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum,
                                  {&keys, &values})
          .execution;
  EXPECT_EQ(with_writes.type, container::ExecutableType::kStandAlone);
  check(with_writes, kPositions);
  check(program, 100);  // the new weights stay resident
  // The new position's values alone: the one weight row per group that holds position 101 (the
  // llm path's v~ write), after the key write, in the same run.
  for (int j = 0; j < a.sum.layer.n; ++j)
    if (j % 64 < kSumSize)
      a.sum.layer.weights[size_t(j) * size_t(kPositions) + 101] = random_weight(random);
  const FcRowWrite row = fc_weight_rows(a.sum.layer, a.sum.at, 101 / 4);
  ASSERT_EQ(row.rows.size(), size_t(kHeads));
  EXPECT_EQ(row.rows[2].unit, 128 + 8 + 4 * 25);  // after the aux block's two rows
  const container::Executable with_row =
      generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {&keys},
                                  &row)
          .execution;
  EXPECT_EQ(with_row.parameters.size(), fc_parameters(keys.layer).size() + 3 * 256);
  check(with_row, 102);
  check(program, kPositions);
  EXPECT_EQ(chip.fault(), "");
}

// The new key written by the chip (fc_column_write.h): only its column's words travel, 256 bytes
// per head where the groups are 72 units each; the same run's scores see it, and every byte of
// the groups is the streamed groups' afterwards (the column replaced, the rest kept), also where
// two of the groups share a tile (each its own copy in narrow memory).
TEST(FcAttentionOnTheVirtualEdgeTpu, AKeyColumnWrittenByTheChipIsSeenByTheSameRun) {
  std::mt19937 random(67);
  Attention a = make_attention(random);
  a.scores_at.tiles[3] = 14;  // head 1's positions 64..127 on the tile of head 0's
  a.scores_at.param_units[3] = 128;
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(a.scores, a.scores_at), {});
  chip::testing::run_executable(chip, fc_caching(a.sum.layer, a.sum.at), {});
  const auto check = [&](const container::Executable& p, int n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<uint8_t> x = query(random, a, n);
    const auto out = chip::testing::run_executable(chip, p, {{"x", x}}).at("y");
    const std::vector<uint8_t> want = reference(a, x, n, nullptr);
    ASSERT_EQ(out.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) ASSERT_EQ(int(out[j]), int(want[j])) << "output " << j;
  };
  const int group_bytes = fc_units_per_tile(kK, false) * 64;
  for (const int pos : {64, 77, 127}) {
    SCOPED_TRACE("position " + std::to_string(pos));
    for (int h = 0; h < kHeads; ++h)
      for (int j = 0; j < kK; ++j)
        a.scores.weights[size_t(h * kPositions + pos) * kK + size_t(j)] = random_weight(random);
    const FcParameterWrite keys = key_groups(a, pos);
    const FcColumnWrite column = fc_column_write(keys.layer, keys.at, pos % 64);
    ASSERT_EQ(column.words.rows.size(), size_t(kHeads));
    EXPECT_EQ(column.words.rows[1].tile, 14);
    EXPECT_EQ(fc_column_write_narrow_bytes(column), 2 * (kK / 4) * 256);
    const container::Executable with_key =
        generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {},
                                    nullptr, nullptr, &column)
            .execution;
    EXPECT_EQ(with_key.type, container::ExecutableType::kStandAlone);
    EXPECT_EQ(with_key.parameters.size(), size_t(kHeads * 256));
    check(with_key, pos + 1);
    const std::vector<uint8_t> streamed = fc_parameters(keys.layer);
    for (int g = 0; g < kHeads; ++g) {
      const auto& wide = chip.tile(keys.at.tiles[size_t(g)]).wide;
      const auto at = wide.begin() + 64 * keys.at.param_units[size_t(g)];
      EXPECT_TRUE(std::equal(at, at + group_bytes, streamed.begin() + long(g) * group_bytes))
          << "head " << g << "'s group";
    }
  }
  check(generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {})
            .execution,
        kPositions);
  EXPECT_EQ(chip.fault(), "");
  // A key longer than one wide row has no one-row column to scatter: refused, not written past it.
  FcParameterWrite long_keys = key_groups(a, 64);
  long_keys.layer.k = 320;
  EXPECT_NE(tinycoral::testing::error_of([&] {
              (void)fc_column_write(long_keys.layer, long_keys.at, 0);
            }).find("up to 256"),
            std::string::npos);
  // Words taken from the FC in front of the scores (the llm path's key sum) need that FC.
  const FcParameterWrite keys = key_groups(a, 64);
  FcColumnWrite from_first = fc_column_write(keys.layer, keys.at, 0);
  from_first.from_byte.assign(size_t(kHeads), 0);
  EXPECT_NE(tinycoral::testing::error_of([&] {
              (void)generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult,
                                                a.sum, {}, nullptr, nullptr, &from_first);
            }).find("without that FC"),
            std::string::npos);
}

// The new position's values written by the chip (fc_value_write.h): one program, generated at
// position 0, its two marked fields per group rewritten for each token as a runtime patches them;
// only each group's 64 bytes travel. Over 70 tokens (every slot of a quad, rows 0..17, past the
// 64th position) two things hold after every run: the same run's sums equal the integer reference
// (the cache's rows past the new position, and the lanes past it in its row, hold stale bytes the
// sum meets with e = 0), and every byte of each group's rows up to the new position equals the
// host's layout, fc_weight_rows of the layer with the columns set as llm::set_value_column sets
// them (two groups share a tile, each with its own staging row and quad buffer).
TEST(FcAttentionOnTheVirtualEdgeTpu, AValueRowWrittenByTheChipIsTheHostsRow) {
  std::mt19937 random(71);
  Attention a = make_attention(random);
  a.sum.at.tiles[2] = 3;  // head 2's group beside head 0's
  a.sum.at.param_units[2] = 136;
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(a.scores, a.scores_at), {});
  // The cache as an earlier sequence left it: the caching run's random values everywhere.
  chip::testing::run_executable(chip, fc_caching(a.sum.layer, a.sum.at), {});
  const std::vector<int> staging = {512, 512, 516};
  const FcValueWrite write = fc_value_write(a.sum.layer, a.sum.at, staging, 0);
  FcScoresProgram generated = generate_fc_batch_attention(
      a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {}, nullptr, nullptr, nullptr, &write);
  container::Executable& program = generated.execution;
  const std::vector<isa::EncodedField>& marks = generated.value_marks;
  EXPECT_TRUE(generated.column_marks.empty());
  EXPECT_TRUE(generated.row_marks.empty());
  EXPECT_EQ(program.type, container::ExecutableType::kStandAlone);
  ASSERT_EQ(marks.size(), size_t(2 * kHeads));
  std::set<int> seen;
  for (int pos = 0; pos < 70; ++pos) {
    SCOPED_TRACE("position " + std::to_string(pos));
    // Position pos's v~ (head h's kSumSize bytes), as set_value_column puts it: column pos of the
    // head's outputs; the padding outputs keep their zero weights.
    for (int h = 0; h < kHeads; ++h)
      for (int i = 0; i < kSumSize; ++i)
        a.sum.layer.weights[size_t(h * 64 + i) * size_t(kPositions) + size_t(pos)] =
            random_weight(random);
    const FcValueWrite now = fc_value_write(a.sum.layer, a.sum.at, staging, pos);
    program.parameters = now.vectors.bytes;
    const std::vector<int64_t> fields = fc_value_write_fields(write, pos);
    for (size_t i = 0; i < marks.size(); ++i)
      isa::write_field(program.bitstreams[0].data, marks[i].offset_bit, marks[i].width,
                       uint64_t(fields[i]));
    const std::vector<uint8_t> x = query(random, a, pos + 1);
    const auto out = chip::testing::run_executable(chip, program, {{"x", x}}).at("y");
    const std::vector<uint8_t> want = reference(a, x, pos + 1, &seen);
    ASSERT_EQ(out.size(), want.size());
    for (size_t j = 0; j < want.size(); ++j) ASSERT_EQ(int(out[j]), int(want[j])) << "output " << j;
    for (int kq = 0; kq <= pos / 4; ++kq) {
      const FcRowWrite host = fc_weight_rows(a.sum.layer, a.sum.at, kq);
      for (size_t g = 0; g < host.rows.size(); ++g) {
        const auto& wide = chip.tile(host.rows[g].tile).wide;
        for (int c = 0; c < 64; ++c)
          for (int b = 0; b < 4 && 4 * kq + b <= pos; ++b) {
            const size_t at = size_t(64 * host.rows[g].unit + 4 * c + b);
            ASSERT_EQ(int(wide[at]), int(host.bytes[256 * g + size_t(4 * c + b)]))
                << "group " << g << ", row " << kq << ", channel " << c << ", position "
                << 4 * kq + b;
          }
      }
    }
  }
  EXPECT_GT(seen.size(), size_t(100));
  EXPECT_EQ(chip.fault(), "");
  // Vectors from narrow memory need an op that leaves them there: this program has none.
  FcValueWrite from_narrow = write;
  from_narrow.from_byte.assign(size_t(kHeads), 0);
  EXPECT_NE(tinycoral::testing::error_of([&] {
              (void)generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult,
                                                a.sum, {}, nullptr, nullptr, nullptr, &from_narrow);
            }).find("computes none"),
            std::string::npos);
  // A staging row over a group's parameters is refused.
  EXPECT_NE(tinycoral::testing::error_of([&] {
              (void)fc_value_write(a.sum.layer, a.sum.at, {512, 40, 516}, 0);
            }).find("inside a group's parameters"),
            std::string::npos);
}

// A multiplier 1% off in one head fails the comparison: the multipliers the scalar core computes
// reach the output stage.
TEST(FcAttentionOnTheVirtualEdgeTpu, AChangedMultiplierChangesTheSums) {
  std::mt19937 random(59);
  Attention a = make_attention(random);
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(a.scores, a.scores_at), {});
  chip::testing::run_executable(chip, fc_caching(a.sum.layer, a.sum.at), {});
  Attention changed = a;
  for (int j = 64; j < 128; ++j) changed.sum.mult_base[size_t(j)] *= 1.01f;
  const container::Executable program =
      generate_fc_batch_attention(changed.scores, changed.scores_at, changed.row_bytes,
                                  changed.exp_mult, changed.sum, {})
          .execution;
  const std::vector<uint8_t> x = query(random, a, 90);
  const auto out = chip::testing::run_executable(chip, program, {{"x", x}}).at("y");
  const std::vector<uint8_t> want = reference(a, x, 90, nullptr);
  int differ = 0;
  for (size_t j = 0; j < want.size(); ++j) {
    if (j / 64 != 1) {
      EXPECT_EQ(int(out[j]), int(want[j])) << "output " << j;
    }
    differ += out[j] != want[j];
  }
  EXPECT_GT(differ, 0);
}

// An FC after the sum in the same program (the llm path's wo): the sum's bytes reach its tiles
// over the ring and only its outputs leave, each equal to the integer reference over the sum's.
TEST(FcAttentionOnTheVirtualEdgeTpu, AnFcAfterTheSumGivesItsBytes) {
  std::mt19937 random(61);
  Attention a = make_attention(random);
  FcLayer& o = a.sum.out;
  o.n = 128;
  o.k = kHeads * 64;
  o.weights.resize(size_t(o.n) * size_t(o.k));
  for (auto& w : o.weights) w = random_weight(random);
  for (int r = 0; r < o.n; ++r) o.mult.push_back(0.0005f + 0.0001f * float(r % 5));
  o.in_zp = 128;  // the sum's int8 bytes
  o.in_scale = 1.0f;
  o.out_zp = 120;
  o.out_scale = 1.0f;
  o.clamp_min = fc_clamp(0, 120, 1.0f);
  o.clamp_max = fc_clamp(255, 120, 1.0f);
  o.input_name = "x";
  o.output_name = "y";
  o.signed_input = o.signed_output = false;
  a.sum.out_at.tiles = {5, 3};
  a.sum.out_at.param_units = {0, 512};  // tile 3 holds a sum group at unit 0
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(a.scores, a.scores_at), {});
  chip::testing::run_executable(chip, fc_caching(a.sum.layer, a.sum.at), {});
  chip::testing::run_executable(chip, fc_caching(o, a.sum.out_at), {});
  const container::Executable program =
      generate_fc_batch_attention(a.scores, a.scores_at, a.row_bytes, a.exp_mult, a.sum, {})
          .execution;
  std::set<int> seen;
  for (int n : {1, 50, kPositions}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const std::vector<uint8_t> x = query(random, a, n);
    const auto out = chip::testing::run_executable(chip, program, {{"x", x}}).at("y");
    const std::vector<uint8_t> sums = reference(a, x, n, nullptr);
    ASSERT_EQ(out.size(), size_t(o.n));
    for (int r = 0; r < o.n; ++r) {
      int32_t acc = 0;
      for (int j = 0; j < o.k; ++j)
        acc += (int32_t{sums[size_t(j)]} - 128) * o.weights[size_t(r) * size_t(o.k) + size_t(j)];
      const int32_t want = std::clamp(
          host::edgetpu::requantize(acc, o.mult[size_t(r)], {o.clamp_min, o.clamp_max}, o.out_zp),
          0, 255);
      ASSERT_EQ(int(out[size_t(r)]), want) << "output " << r;
      seen.insert(want);
    }
  }
  EXPECT_GT(seen.size(), size_t(50));
  EXPECT_EQ(chip.fault(), "");
}

TEST(FcAttentionOnTheVirtualEdgeTpu, WhatScalarMemoryCannotHoldIsRefused) {
  EXPECT_EQ(fc_batch_attention_unsupported(6, 256, 384), "");
  EXPECT_NE(fc_batch_attention_unsupported(8, 1792, 1024).find("16 KiB of scalar memory"),
            std::string::npos);
  EXPECT_NE(fc_batch_attention_unsupported(6, 256, 100).find("64-output"), std::string::npos);
}

}  // namespace
}  // namespace tinycoral::compiler
