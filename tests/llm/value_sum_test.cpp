// The weighted sum's FC program (llm/value_sum.h) on the virtual Edge TPU against the int8 path's
// weighted_sum_head, byte for byte, written token by token as the chip path writes it (the program
// streams the columns up to the new position and every multiplier, then sums).
#include "llm/value_sum.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_value_write.h"
#include "llm/int8_model.h"
#include "runtime/device_select.h"
#include "runtime/program.h"

namespace tinycoral {
namespace {

// Random v~, e and multipliers for `tokens` positions; after each token the program's caching run
// writes the new column and every multiplier, and its outputs must be weighted_sum_head's of every
// head. The multipliers are spread so that some outputs reach the clamps and most do not.
void expect_program_equals_host(const llm::ValueSumShape s, int tokens, unsigned seed) {
  std::mt19937 rng(seed);
  const int hs = s.head_size, kv_dim = s.kv_heads * hs, kv_mul = s.heads / s.kv_heads;
  std::vector<int> in_at;
  compiler::FcLayer layer = llm::value_sum_layer(s, in_at);
  compiler::FcPlacement at;
  at.in_at = in_at;
  // One program per 64 positions, which writes the prefix up to the new position's group and
  // every multiplier first, then sums.
  std::vector<std::shared_ptr<runtime::Program>> sums(size_t(s.k() / 64));
  auto tpu = runtime::open_virtual_edgetpu();
  std::vector<int8_t> v(size_t(s.positions) * size_t(kv_dim));
  std::vector<uint8_t> e(size_t(s.heads) * size_t(s.positions));
  std::vector<float> base(size_t(s.heads) * size_t(hs)), inv_sum(size_t(s.heads));
  std::vector<uint8_t> row(size_t(s.row_bytes()));
  std::vector<int8_t> got(static_cast<size_t>(s.outputs())), want(static_cast<size_t>(hs));
  int clamped = 0, inside = 0;
  for (int pos = 0; pos < tokens; ++pos) {
    SCOPED_TRACE("position " + std::to_string(pos));
    const int n = pos + 1;
    for (int j = 0; j < kv_dim; ++j)
      v[size_t(pos) * size_t(kv_dim) + size_t(j)] = static_cast<int8_t>(int(rng() % 255) - 127);
    for (uint8_t& b : e) b = static_cast<uint8_t>(rng() % 256);
    for (int h = 0; h < s.heads; ++h) e[size_t(h) * size_t(s.positions) + size_t(pos % 3)] = 255;
    // |acc| grows like sqrt(n) 147 x 73; multipliers around 30 / that, some 8x larger.
    const float typical = 30.0f / (std::sqrt(float(n)) * 10700.0f);
    for (float& b : base)
      b = typical * (0.2f + float(rng() % 1000) / 1000.0f) * (rng() % 5 == 0 ? 8.0f : 1.0f);
    for (float& x : inv_sum) x = 1.0f / (1.0f + float(rng() % 4000) / 1000.0f);
    for (float& b : base) b /= inv_sum[0];
    llm::set_value_column(s, pos, v.data() + size_t(pos) * size_t(kv_dim), layer);
    llm::set_value_multipliers(s, base.data(), inv_sum.data(), layer);
    const compiler::FcParameterWrite write{llm::value_sum_prefix(layer, n), at};
    std::shared_ptr<runtime::Program>& execution = sums[size_t(pos / 64)];
    if (!execution)
      execution = std::make_shared<runtime::Program>(
          compiler::generate_fc_batch(layer, at, 1, s.row_bytes(), &write));
    else
      execution->set_parameters(compiler::fc_parameters(write.layer));
    llm::value_sum_input(s, e.data(), size_t(s.positions), n, row.data());
    execution->set_input(0, row);
    tpu->run(nullptr, execution);
    execution->get_output(0, std::span(reinterpret_cast<uint8_t*>(got.data()), got.size()));
    for (int h = 0; h < s.heads; ++h) {
      llm::weighted_sum_head(e.data() + size_t(h) * size_t(s.positions), n,
                             v.data() + size_t(h / kv_mul) * size_t(hs), size_t(kv_dim), hs,
                             base.data() + size_t(h) * size_t(hs), inv_sum[size_t(h)], {1.0f, 0},
                             -llm::kSymmetricClamp, llm::kSymmetricClamp, want.data());
      for (int i = 0; i < hs; ++i) {
        ASSERT_EQ(got[size_t(h * s.hs_padded() + i)], want[size_t(i)])
            << "head " << h << " output " << i;
        ++(std::abs(int(want[size_t(i)])) == 127 ? clamped : inside);
      }
    }
  }
  EXPECT_GT(clamped, 0);  // the clamps were reached
  EXPECT_GT(inside, 4 * clamped);
}

// Head size 24 (each head one group, 40 outputs padded), grouped kv heads, 100 positions (K 128),
// 70 tokens: the writes cross from the first 64 positions' prefix to the whole.
TEST(ValueSumProgram, GroupedHeadsGiveTheHostsBytes) {
  expect_program_equals_host({.heads = 4, .kv_heads = 2, .head_size = 24, .positions = 100}, 70, 3);
}

// Head size 80 (two groups per head), one kv head per head, 64 positions.
TEST(ValueSumProgram, WideHeadsGiveTheHostsBytes) {
  expect_program_equals_host({.heads = 3, .kv_heads = 3, .head_size = 80, .positions = 64}, 5, 11);
}

// The chip's own value write (compiler::fc_value_write, checked on the virtual Edge TPU in
// FcAttentionOnTheVirtualEdgeTpu.AValueRowWrittenByTheChipIsTheHostsRow) streams one 64-byte piece
// per group: for set_value_column's layer it must be position pos's v~ of the group's kv head
// (+128, padding 128), the bytes fc_weight_rows puts in lane pos % 4 of each word of row pos / 4.
// Over grouped kv heads and over heads of two groups.
TEST(ValueSumProgram, TheChipsValueWriteCarriesSetValueColumnsBytes) {
  for (const llm::ValueSumShape s : {llm::ValueSumShape{4, 2, 24, 100}, {3, 3, 80, 64}}) {
    SCOPED_TRACE("head size " + std::to_string(s.head_size));
    std::mt19937 rng(13);
    const int kv_dim = s.kv_heads * s.head_size, kv_mul = s.heads / s.kv_heads;
    const int groups_per_head = s.hs_padded() / 64;
    std::vector<int> in_at;
    compiler::FcLayer layer = llm::value_sum_layer(s, in_at);
    compiler::FcPlacement at;
    at.in_at = in_at;
    std::vector<int8_t> v(size_t(s.positions) * size_t(kv_dim));
    for (int8_t& x : v) x = static_cast<int8_t>(int(rng() % 255) - 127);
    for (int t = 0; t < s.positions; ++t)
      llm::set_value_column(s, t, v.data() + size_t(t) * size_t(kv_dim), layer);
    const std::vector<int> staging(size_t(s.heads * groups_per_head), 4000);
    for (const int pos : {0, 1, 6, 63, s.positions - 1}) {
      SCOPED_TRACE("position " + std::to_string(pos));
      const compiler::FcValueWrite w = compiler::fc_value_write(layer, at, staging, pos);
      const compiler::FcRowWrite row = compiler::fc_weight_rows(layer, at, pos / 4);
      ASSERT_EQ(w.vectors.bytes.size(), row.bytes.size());
      for (int g = 0; g < s.heads * groups_per_head; ++g) {
        const int h = g / groups_per_head;
        for (int c = 0; c < 256; ++c) {
          const int i = 64 * (g % groups_per_head) + c;  // the head's channel
          const uint8_t got = w.vectors.bytes[size_t(256 * g + c)];
          // Only a group's first 64 bytes inside the head hold a value: read v there alone.
          const bool holds = c < 64 && i < s.head_size;
          const uint8_t want =
              holds ? uint8_t(v[size_t(pos * kv_dim + (h / kv_mul) * s.head_size + i)] + 128)
                    : uint8_t{128};
          ASSERT_EQ(got, want) << "group " << g << " byte " << c;
          if (c < 64) {
            ASSERT_EQ(got, row.bytes[size_t(256 * g + 4 * c + pos % 4)]);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace tinycoral
