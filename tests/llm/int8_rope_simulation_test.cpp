// RoPE's elementwise ops on the virtual Edge TPU (docs/llm.md "RoPE in the chip's ops"): the ADD
// and MUL generator's programs (compiler/eltwise_codegen.h) doing MUL(k, cos), MUL(swap(k), sin')
// and ADD, the products' bytes handed from one program to the next, give rope_q's bytes, every
// byte, where the sum's multiplier is one for all channels (a key scale per tensor: the ADD op has
// one multiplier); with a scale per pair, the sum as an FC of [P1; P2] with two weights 1 per
// output and a multiplier per output (the FC generator's output stage) gives them too.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "llm/int8_rope.h"
#include "llm/rope_sum.h"

namespace tinycoral::testing {
namespace {

using compiler::EltwiseLayer;

// The chip stores int8 as uint8 with the zero point + 128.
std::vector<uint8_t> stored(const std::vector<int8_t>& v) {
  std::vector<uint8_t> out;
  for (int8_t b : v) out.push_back(static_cast<uint8_t>(b) ^ 0x80);
  return out;
}

// One elementwise op of n bytes on a fresh virtual Edge TPU; its int8 output.
std::vector<int8_t> run(const EltwiseLayer& l, const std::vector<int8_t>& a,
                        const std::vector<int8_t>& b) {
  chip::VirtualEdgeTpu chip;
  const container::Executable exe = compiler::generate_eltwise(l);
  chip::testing::Buffers out =
      chip::testing::run_executable(chip, exe, {{l.a_name, stored(a)}, {l.b_name, stored(b)}});
  EXPECT_EQ(chip.fault(), "");
  std::vector<int8_t> y;
  for (int64_t i = 0; i < l.elements; ++i)
    y.push_back(static_cast<int8_t>(out.at(l.output_name).at(size_t(i)) ^ 0x80));
  return y;
}

EltwiseLayer op(EltwiseLayer::Kind kind, int n, const char* a, const char* b, const char* y) {
  EltwiseLayer l;
  l.kind = kind;
  l.elements = n;
  l.shape = {n};
  l.a_name = a;
  l.b_name = b;
  l.output_name = y;
  l.clamp_min = -127;  // relative to the output's zero point: rope_q's +-127
  l.clamp_max = 127;
  l.out_zp = 128;  // int8 zero point 0
  return l;
}

// RoPE's two products as the MUL generator's programs: P1 = MUL(x, cos), P2 = MUL(swap(x), sin')
// (x's pairs swapped on the host), x with scale in_scale and zero point zp.
std::pair<std::vector<int8_t>, std::vector<int8_t>> products(const llm::QuantizedRope& q,
                                                             float in_scale, int32_t zp,
                                                             const std::vector<int8_t>& x,
                                                             const std::vector<int8_t>& c,
                                                             const std::vector<int8_t>& s) {
  const int n = int(x.size());
  std::vector<int8_t> swapped(x.size());
  for (int j = 0; j < n; ++j) swapped[size_t(j)] = x[size_t(j ^ 1)];
  EltwiseLayer mul = op(EltwiseLayer::Kind::kMul, n, "x", "cos", "p");
  mul.a_zp = zp + 128;
  mul.b_zp = 128;
  mul.a_scale = in_scale;
  mul.b_scale = 1.0f / 127;
  mul.out_scale = q.product_scale;
  mul.mult = q.mul_mult;
  return {run(mul, x, c), run(mul, swapped, s)};
}

TEST(Int8RopeOnTheVirtualEdgeTpu, MulMulAddGiveRopesBytes) {
  std::mt19937 rng(11);
  const int n = 96, hs = 48;  // two heads of stories15M's head size
  for (int trial = 0; trial < 3; ++trial) {
    SCOPED_TRACE(trial);
    const float in_scale = std::uniform_real_distribution<float>(0.02f, 0.1f)(rng);
    const int32_t zp = std::uniform_int_distribution<int32_t>(-30, 30)(rng);
    // The last trial's output scale makes some bytes reach the clamps.
    const float out_scale = (trial == 2 ? 0.006f : 0.03f) * in_scale * 127;
    const llm::QuantizedRope q = llm::quantize_rope(in_scale, zp, std::vector<float>(n, 1.0f),
                                                    std::vector<float>(n, out_scale));
    std::vector<int8_t> x(n), c(n), s(n), want(n);
    for (int8_t& v : x) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
    const int pos = 17 + 50 * trial;
    const float r = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    llm::rope_tables(pos, n, hs, c.data(), s.data());
    llm::rope_q(q, x.data(), c.data(), s.data(), n, r, want.data());

    const auto [p1, p2] = products(q, in_scale, zp, x, c, s);
    EltwiseLayer add = op(EltwiseLayer::Kind::kAdd, n, "p1", "p2", "k");
    add.a_zp = add.b_zp = 128;
    add.a_scale = add.b_scale = q.product_scale;
    add.out_scale = out_scale;
    add.w1 = add.w2 = 1;  // P1 and P2 share their scale: the sum is exact
    add.offset = -(128 + 128);
    const volatile float mult = q.base[0] * r;  // the per-token multiplier
    add.mult = mult;
    const std::vector<int8_t> got = run(add, p1, p2);
    EXPECT_EQ(got, want);
    int distinct = 0, clamped = 0;
    for (int j = 0; j < n; ++j) {
      distinct += std::count(want.begin(), want.begin() + j, want[size_t(j)]) == 0;
      clamped += std::abs(want[size_t(j)]) == 127;
    }
    EXPECT_GT(distinct, 40);    // the case spreads
    EXPECT_LT(clamped, n / 3);  // and mostly stays inside the clamps
    if (trial == 2) {
      EXPECT_GT(clamped, 0);
    }
    // The per-token multiplier matters: r 1% off changes bytes.
    add.mult = q.base[0] * (r * 1.01f);
    EXPECT_NE(run(add, p1, p2), want);
  }
}

// The key's real form: one scale per RoPE pair, so the sum needs a multiplier per channel: an FC
// over P1 and P2 side by side (K = 2n), output j with weight 1 on P1_j and on P2_j, multiplier
// f32(base_j r), clamps +-127, zero point 0.
TEST(Int8RopeOnTheVirtualEdgeTpu, MulMulAndAPerChannelSumGiveTheKeysBytes) {
  std::mt19937 rng(5);
  const int n = 128, hs = 32;
  const float in_scale = 0.05f;
  const int32_t zp = -9;
  std::vector<float> gain(n, 1.0f), key_scale(n);
  for (int j = 0; j < n; j += 2)
    key_scale[size_t(j)] = key_scale[size_t(j) + 1] =
        std::uniform_real_distribution<float>(0.006f, 0.03f)(rng) * in_scale * 127;
  const llm::QuantizedRope q = llm::quantize_rope(in_scale, zp, gain, key_scale);
  std::vector<int8_t> x(n), c(n), s(n), want(n);
  for (int8_t& v : x) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
  const int pos = 93;
  const float r = 1.37f;
  llm::rope_tables(pos, n, hs, c.data(), s.data());
  llm::rope_q(q, x.data(), c.data(), s.data(), n, r, want.data());

  const auto [p1, p2] = products(q, in_scale, zp, x, c, s);

  compiler::FcLayer sum;
  sum.n = n;
  sum.k = 2 * n;
  sum.weights.assign(size_t(n) * size_t(2 * n), 0);
  for (int j = 0; j < n; ++j) {
    sum.weights[size_t(j) * size_t(2 * n) + size_t(j)] = 1;
    sum.weights[size_t(j) * size_t(2 * n) + size_t(n + j)] = 1;
    const volatile float mult = q.base[size_t(j)] * r;  // the per-token multiplier
    sum.mult.push_back(float{mult});
  }
  sum.in_zp = sum.out_zp = 128;
  sum.in_scale = q.product_scale;
  sum.out_scale = 1.0f;
  sum.clamp_min = -127;
  sum.clamp_max = 127;
  sum.input_name = "p";
  sum.output_name = "k";
  const compiler::FcPrograms programs = compiler::generate_fc(sum);
  std::vector<int8_t> both = p1;
  both.insert(both.end(), p2.begin(), p2.end());
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, programs.caching, {});
  const auto& y = programs.execution.output_layers.at(0);
  const std::vector<uint8_t> got = chip::testing::detile(
      y, chip::testing::run_executable(chip, programs.execution, {{"p", stored(both)}}).at(y.name));
  EXPECT_EQ(chip.fault(), "");
  ASSERT_GE(got.size(), size_t(n));
  std::vector<int8_t> key;
  for (int j = 0; j < n; ++j) key.push_back(static_cast<int8_t>(got[size_t(j)] ^ 0x80));
  EXPECT_EQ(key, want);
  int clamped = 0;
  for (int8_t b : want) clamped += std::abs(b) == 127;
  EXPECT_GT(clamped, 0);      // the case reaches the clamps
  EXPECT_LT(clamped, n / 3);  // but mostly stays inside them
}

// q~'s RoPE sum in front of the scores (llm/rope_sum.h in generate_fc_batch_softmax; docs/llm.md
// "RoPE's sum in the scores' program"): the program takes P1 and P2 of 80 channels (two heads of
// 40, padded to two groups on other tiles than the scores'), writes this token's multipliers
// f32(base_j r) itself and runs the sum, whose bytes go over the ring as the scores' input. The
// keys here are unit vectors (position t's key is channel t of its head, multiplier 1), so the
// score of t is q~'s byte t: every e byte and 1 / S equal the softmax of rope_sum's bytes, for
// two positions and r; with r 1% off the sums change. The same with both groups on one tile
// reading one copy of the sum's weights (FcPlacement::weight_units, each group keeping only its
// aux rows: TileAllocator::place_sharing's layout, cached as the llm path caches it).
TEST(Int8RopeOnTheVirtualEdgeTpu, QsSumInFrontOfTheScoresGivesRopeSumsBytes) {
  std::mt19937 rng(11);
  constexpr int kN = 80, kHs = 40, kHeads = 2, kPositions = 64, kRow = 256;
  const float in_scale = 0.04f;
  const int32_t zp = 7;
  std::vector<float> gain(kN), out_scale(kN);
  for (int j = 0; j < kN; ++j) {
    gain[size_t(j)] = std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
    out_scale[size_t(j)] = std::uniform_real_distribution<float>(0.006f, 0.03f)(rng) * 127 *
                           in_scale * gain[size_t(j)];
  }
  const llm::QuantizedRope q = llm::quantize_rope(in_scale, zp, gain, out_scale);
  // The scores: head h's 64 positions read 64 bytes from 40 h; position t < 40's key is e_t.
  compiler::FcLayer scores;
  scores.n = kHeads * kPositions;
  scores.k = 64;
  scores.weights.assign(size_t(scores.n) * 64, 0);
  for (int h = 0; h < kHeads; ++h)
    for (int t = 0; t < kHs; ++t) scores.weights[size_t(h * kPositions + t) * 64 + size_t(t)] = 1;
  scores.mult.assign(size_t(scores.n), 1.0f);
  scores.in_zp = scores.out_zp = 128;
  scores.in_scale = scores.out_scale = 1.0f;
  scores.clamp_min = -127;
  scores.clamp_max = 127;
  scores.input_name = "x";
  scores.output_name = "y";
  compiler::FcPlacement at{{0, 1}, {0, 0}, {0, kHs}};
  compiler::FcScoresInput first;
  first.layer = llm::rope_sum_layer(q, kN, first.at.in_at);
  first.layer.signed_input = first.layer.signed_output = false;  // the test hands stored bytes
  const compiler::FcParameterWrite keys{scores, at};
  const std::vector<float> exp_mult = {0.05f, 0.08f};
  int clamped = 0;
  for (const auto& [shared, pos, r] :
       {std::tuple{false, 37, 1.21f}, std::tuple{true, 200, 0.83f}}) {
    SCOPED_TRACE(std::string(shared ? "one copy of the weights" : "own weights") + ", position " +
                 std::to_string(pos));
    chip::VirtualEdgeTpu chip;
    chip::testing::run_executable(chip, compiler::fc_caching(scores, at), {});
    if (shared) {  // aux rows at 0 and 8 of tile 5, the copy's block at 16 (its weights at 24)
      first.at.tiles = {5, 5};
      first.at.param_units = {0, 8};
      first.at.weight_units = {24, 24};
      const compiler::FcRowWrite aux = llm::rope_sum_aux_rows(first.at);
      chip::testing::run_executable(
          chip, compiler::fc_caching(llm::rope_sum_weight_copies(1), {{5}, {16}, {}, {}}, &aux),
          {});
      // fc_caching writes a group's weights after its aux rows: this layout is refused there;
      // a copy whose weights would reach past the parameter rows is refused by the op.
      const auto refusal = [](const auto& make) -> std::string {
        try {
          make();
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      };
      EXPECT_NE(
          refusal([&] { (void)compiler::fc_caching(first.layer, first.at); }).find("weight_units"),
          std::string::npos);
      compiler::FcScoresInput past = first;
      past.at.weight_units = {24, compiler::kFcParamUnits - 4};
      const compiler::FcRowWrite past_rows = llm::rope_sum_multipliers(q, kN, r, past.at);
      EXPECT_NE(refusal([&] {
                  (void)compiler::generate_fc_batch_softmax(scores, at, kRow, exp_mult, &keys,
                                                            &past, &past_rows);
                }).find("past the parameters"),
                std::string::npos);
    } else {
      first.at.tiles = {5, 9};
      first.at.param_units = {0, 0};
      chip::testing::run_executable(chip, compiler::fc_caching(first.layer, first.at), {});
    }
    std::vector<int8_t> x(kN), c(kN), s(kN), p1(kN), p2(kN), want(kN);
    for (int8_t& v : x) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
    llm::rope_tables(pos, kN, kHs, c.data(), s.data());
    llm::rope_products(q, x.data(), c.data(), s.data(), kN, p1.data(), p2.data());
    llm::rope_sum(q, p1.data(), p2.data(), kN, r, want.data());
    for (int8_t b : want) clamped += std::abs(b) == 127;
    std::vector<int8_t> row(kRow);
    llm::rope_sum_input(p1.data(), p2.data(), kN, row.data());
    std::vector<uint8_t> in = stored(row);
    for (int i = 0; i < compiler::kSoftmaxCountBytes; ++i)
      in.push_back(uint8_t(i < 4 ? (uint32_t(kHs) >> (8 * i)) & 0xff : 0));
    // Runs the program with the multipliers of `r_sent`; e and 1 / S.
    const auto run_with = [&](float r_sent) {
      const compiler::FcRowWrite rows = llm::rope_sum_multipliers(q, kN, r_sent, first.at);
      const container::Executable program =
          compiler::generate_fc_batch_softmax(scores, at, kRow, exp_mult, &keys, &first, &rows)
              .execution;
      return chip::testing::run_executable(chip, program, {{"x", in}}).at("y");
    };
    const std::vector<uint8_t> out = run_with(r);
    EXPECT_EQ(chip.fault(), "");
    ASSERT_EQ(out.size(), size_t(kHeads * (kPositions + 4)));
    std::vector<uint32_t> sums;
    for (int h = 0; h < kHeads; ++h) {
      const int8_t* qh = want.data() + h * kHs;
      const int m = *std::max_element(qh, qh + kHs);
      float sum = 0;
      for (int t = 0; t < kHs; ++t) {
        const float v = std::exp2(static_cast<float>(qh[t] - m) * exp_mult[size_t(h)]);
        sum += v;
        EXPECT_EQ(out[size_t(h * kPositions + t)], static_cast<uint8_t>(std::nearbyint(v * 255.0f)))
            << "head " << h << " channel " << t;
      }
      uint32_t got = 0;
      std::memcpy(&got, out.data() + kHeads * kPositions + 4 * h, 4);
      EXPECT_EQ(got, std::bit_cast<uint32_t>(1.0f / sum)) << "head " << h;
      sums.push_back(got);
    }
    const std::vector<uint8_t> off = run_with(r * 1.01f);
    std::vector<uint32_t> off_sums(kHeads);
    std::memcpy(off_sums.data(), off.data() + kHeads * kPositions, 4 * kHeads);
    EXPECT_NE(off_sums, sums);
    // The program makes the multipliers itself from r after the count (FcScoresInput::mult_base,
    // no rows streamed): the same bytes; r 1% off in the row changes them.
    compiler::FcScoresInput from_r = first;
    const compiler::ScalarRopeMultipliers m =
        llm::rope_sum_scalar_multipliers(q, nullptr, llm::RopeSumShape{kN});
    from_r.mult_base = m.base;
    from_r.mult_padding = m.padding;
    const auto run_from_r = [&](float r_sent) {
      std::vector<uint8_t> with_r = in;
      for (int i = 0; i < 4; ++i)
        with_r[size_t(kRow + 4 + i)] = uint8_t(std::bit_cast<uint32_t>(r_sent) >> (8 * i));
      const container::Executable program =
          compiler::generate_fc_batch_softmax(scores, at, kRow, exp_mult, &keys, &from_r).execution;
      return chip::testing::run_executable(chip, program, {{"x", with_r}}).at("y");
    };
    EXPECT_EQ(run_from_r(r), out);
    EXPECT_EQ(chip.fault(), "");
    EXPECT_NE(run_from_r(r * 1.01f), out);
    // Each group's multiplier row takes 64 of them: outputs short of a whole group are refused.
    compiler::FcScoresInput part = from_r;
    part.layer.n -= 8;
    part.mult_base.resize(size_t(part.layer.n));
    part.mult_padding.resize(size_t(part.layer.n));
    std::string why;
    try {
      (void)compiler::generate_fc_batch_softmax(scores, at, kRow, exp_mult, &keys, &part);
    } catch (const Error& e) {
      why = e.what();
    }
    EXPECT_NE(why.find("not whole groups"), std::string::npos) << why;
  }
  EXPECT_GT(clamped, 0);  // some of q~'s bytes at the clamps
}

// The scores' row with the sum in front, one rule for every program that builds one: with no group
// kept on its tile it is the longer of the scores' own row and the sum's 128-byte slots (what the
// q~ and key sums' trials computed as max(row, 2 outputs)); kept groups shorten it to the other
// groups' slots, never below the scores' row, the sum's outputs or one group's K; whole 8 bytes.
TEST(RopeSumSlots, TheScoresRowHoldsTheScoresRowTheSumsOutputsAndItsSlots) {
  for (const int row : {64, 320, 384, 768, 1024})
    for (const int groups : {1, 2, 5, 11}) {
      int end = 0;
      llm::rope_sum_slots(groups, {}, end);
      EXPECT_EQ(llm::rope_scores_row_bytes(row, 64 * groups, end), std::max(row, 2 * 64 * groups))
          << row << " " << groups;
    }
  int end = 0;
  llm::rope_sum_slots(5, {0, 1, 2, 3, 4}, end);  // rand15M's q: every group kept
  EXPECT_EQ(end, 0);
  EXPECT_EQ(llm::rope_scores_row_bytes(320, 320, end), 320);
  llm::rope_sum_slots(11, {0, 1, 2, 3, 4}, end);  // and six key groups that read the row
  EXPECT_EQ(llm::rope_scores_row_bytes(320, 704, end), 768);
  EXPECT_EQ(llm::rope_scores_row_bytes(0, 0, 0), 128);  // one group's K at least
  EXPECT_EQ(llm::rope_scores_row_bytes(100, 0, 0), 128);
  EXPECT_EQ(llm::rope_scores_row_bytes(132, 64, 0), 136);  // whole 8 bytes
}

// The host's row for a RoPE sum whose group 1 of 4 reads its products from a resident row (kept on
// its tile): the other groups' 128-byte slots follow each other from byte 0 and the row ends after
// them; the kept group's products are written nowhere; a group the sum does not have is an error.
TEST(RopeSumSlots, KeptGroupsTakeNoSlotAndTheOthersFollowEachOther) {
  int end = -1;
  EXPECT_EQ(llm::rope_sum_slots(4, {1}, end), (std::vector<int>{0, -1, 128, 256}));
  EXPECT_EQ(end, 384);
  EXPECT_EQ(llm::rope_sum_slots(4, {}, end), (std::vector<int>{0, 128, 256, 384}));
  EXPECT_EQ(end, 512);
  EXPECT_THROW(llm::rope_sum_slots(4, {4}, end), Error);

  const llm::RopeSumShape shape{256};  // q alone: 4 groups of 64 channels
  std::vector<int8_t> p1(256), p2(256);
  for (int c = 0; c < 256; ++c) {
    p1[size_t(c)] = int8_t(c % 100);
    p2[size_t(c)] = int8_t(-(c % 100) - 1);
  }
  std::vector<int8_t> row(512, int8_t{7});  // 7: not written
  llm::rope_sum_input(shape, llm::rope_sum_slots(4, {1}, end), p1.data(), p2.data(), nullptr,
                      nullptr, row.data());
  const int group_of_slot[] = {0, 2, 3};
  for (int k = 0; k < 3; ++k)
    for (int i = 0; i < 64; ++i) {
      const int c = 64 * group_of_slot[k] + i;
      SCOPED_TRACE("slot " + std::to_string(k) + " byte " + std::to_string(i));
      EXPECT_EQ(row[size_t(128 * k + i)], p1[size_t(c)]);           // P1
      EXPECT_EQ(row[size_t(128 * k + 64 + i)], p2[size_t(c ^ 1)]);  // R: P2 pair-swapped
    }
  for (size_t b = 384; b < row.size(); ++b) EXPECT_EQ(row[b], 7) << "byte " << b;
}

}  // namespace
}  // namespace tinycoral::testing
