// The joined program's tail with the llm path's RoPE sum in front of the scores
// (compiler::generate_ffn_chain_softmax with an FcScoresInput, steps 2 and 3 of joining each
// layer's scores to the chain before it, issue 14): q~'s and the key's sums with their multipliers
// f32(base_j r) made on the scalar core from the r the chain's RMSNorm left at word
// kChainRmsRWord, q's products read from the resident rows the chain wrote in the same run, and
// the key written into its column of the scores' weights. On the virtual Edge TPU its e and 1 / S
// must equal, every byte, those of the chain's program and the scores' own program
// (generate_fc_batch_softmax with the same sum, r in its row) run one after the other.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_column_write.h"
#include "compiler/fc_value_write.h"
#include "isa/isa.h"
#include "isa/relocate.h"
#include "llm/group_program.h"
#include "llm/int8_model.h"
#include "llm/int8_rms.h"
#include "llm/int8_rope.h"
#include "llm/matmul_plan.h"
#include "llm/rope_sum.h"
#include "runtime/device_select.h"
#include "runtime/program.h"
#include "support/chain_layers.h"
#include "support/error_of.h"

namespace tinycoral::testing {
namespace {

using llm::QuantizedMatmul;

// A rotation of n channels from the chain's q/k follower, output scales spread per pair.
llm::QuantizedRope rope_of(const QuantizedMatmul& from, int n, std::mt19937& random) {
  std::uniform_real_distribution<float> spread(0.006f, 0.03f);
  std::vector<float> gain(size_t(n), 1.0f), out_scale(size_t(n), 0.0f);
  for (int j = 0; j < n; j += 2)
    out_scale[size_t(j)] = out_scale[size_t(j + 1)] = spread(random) * 127 * from.out.scale;
  return llm::quantize_rope(from.out.scale, from.out.zero_point, gain, out_scale);
}

// The chain (FFN, the residual add with r, then q and k: 4 heads of 32 over 2 kv heads, q's two
// groups' RoPE products kept on their tiles, k's returned), the scores over 128 positions with
// q~'s and the key's sums in front (the llm path's layout: rope_sum_layer, kv_dim's groups), each
// sum group of q on the tile of its products.
struct JoinedRope {
  static constexpr int kDim = 128, kHeads = 4, kHeadSize = 32, kKvHeads = 2, kPositions = 128;
  static constexpr int kK = 64;  // head_size padded to a group
  compiler::FfnChain chain;
  compiler::FcPlacement up_at, down_at;
  compiler::FcLayer s;
  compiler::FcPlacement s_at;
  std::vector<float> exp_mult;
  llm::RopeSumShape shape{kDim, kKvHeads, kHeadSize, true};
  compiler::FcScoresInput first;
  int row_bytes = 0;  // the scores' input row before the count
  int chain_in = 0;   // the chain's own input (FFN input, x2, RoPE tables)

  explicit JoinedRope(std::mt19937& random) {
    const int hidden = 192;
    const QuantizedMatmul w1 = random_matmul(hidden, kDim, {-2, 2}, {-2.5f, 2.5f}, random),
                          w3 = random_matmul(hidden, kDim, {-2, 2}, {-2.5f, 2}, random),
                          w2 = random_matmul(kDim, hidden, {-3, 3}, {-1.5f, 1.5f}, random),
                          add = random_matmul(kDim, 128, {-1.5f, 1.5f}, {-2, 2}, random),
                          qk = random_matmul(3 * 64, kDim, {-2, 2}, {-2, 2.5f}, random);
    chain.ffn.up = layer_of({&w1, &w3, &w1, &w3, &w1, &w3});
    chain.ffn.down = layer_of({&w2, &w2});
    llm::set_ffn_gate(llm::quantize_gate(w1.out, w3.out, {-0.5f, 2.5f}, w2.in), chain.ffn);
    chain.extra_k = kDim;
    chain.pairwise = chain.output_down = true;
    chain.next = {layer_of({&add, &add}), layer_of({&qk, &qk, &qk})};  // q0, q1, k
    const int up_units = compiler::fc_units_per_tile(kDim, false);
    up_at = {{4, 4, 7, 7, 1, 1}, {0, up_units, 0, up_units, 0, up_units}};
    down_at = {{0, 9}, {0, 0}};
    const int add_at = 2 * up_units, next_at = add_at + 2 * up_units;
    chain.next_at = {{{1, 1}, {add_at, add_at + up_units}},
                     {{1, 12, 1}, {next_at, 0, next_at + up_units}}};
    const llm::QuantizedRope rq = rope_of(qk, kDim, random),
                             rk = rope_of(qk, kKvHeads * kHeadSize, random);
    chain.products.layer = 1;
    chain.products.tables = 3;
    const int32_t x_zp = qk.out.zero_point + 128;
    chain.products.groups = {{0, 0, x_zp, rq.mul_mult, true},
                             {1, 1, x_zp, rq.mul_mult, true},
                             {2, 2, x_zp, rk.mul_mult}};
    chain.products.kept_row[1] = chain.products.kept_row[12] = 2000;
    chain.next_output = {false, true};
    chain.rms = {0, kDim - 5, add.out.zero_point + 128,
                 llm::rms_mean_multiplier(add.out.scale, kDim - 5), "r"};
    chain_in = 2 * kDim + compiler::fc_tables_bytes(2 * kDim, chain.products.tables);

    // q~'s two groups on their products' tiles reading the kept rows, the key's on tile 5 reading
    // its slot, the row's first 128 bytes (rope_sum_slots: the kept groups take none).
    first.layer = llm::rope_sum_layer(rq, shape, first.at.in_at);
    first.at.tiles = {1, 12, 5};
    first.at.param_units = {6 * up_units, up_units, 0};
    int slots_end = 0;
    first.at.in_at = llm::rope_sum_slots(3, {0, 1}, slots_end);
    for (int& at : first.at.in_at) at = std::max(at, 0);
    const std::vector<std::pair<int, int>> places =
        compiler::fc_product_bytes(chain.products, chain.next_at[1].tiles);
    for (int g = 0; g < 2; ++g) first.resident.push_back({g, 2000, places[size_t(g)].second});
    const compiler::ScalarRopeMultipliers m = llm::rope_sum_scalar_multipliers(rq, &rk, shape);
    first.mult_base = m.base;
    first.mult_padding = m.padding;

    // The scores: head h reads 64 bytes from 32 h; each position's key 32 bytes, zeros after.
    const int scores_row = 192;  // whole_groups(max(dim, 3 x 32 + 64)), as scores_program's
    row_bytes = llm::rope_scores_row_bytes(scores_row, first.layer.n, slots_end);
    testing::ScoresLayer scores =
        testing::scores_layer({kHeads,
                               kPositions,
                               kK,
                               kHeadSize,
                               kHeadSize,
                               110,
                               [](int o) { return 0.0006f + 0.0002f * float(o % 5); },
                               [](int h) { return 0.02f + 0.02f * float(h); },
                               {1, 12, 15, 14, 13, 11, 10, 8},
                               {7 * up_units, 2 * up_units, 0, 0, 0, 0, 0, 0}},
                              random);
    s = std::move(scores.layer);
    s_at = std::move(scores.at);
    exp_mult = std::move(scores.exp_mult);
  }

  // The key's column at position pos: each head's group holding pos takes its kv head's 32 bytes
  // from the key sum's outputs (ChipTransformer::key_column's layout).
  compiler::FcColumnWrite column(int pos) const {
    const compiler::FcParameterWrite key = key_groups(pos);
    compiler::FcColumnWrite w = compiler::fc_column_write(key.layer, key.at, pos % 64);
    for (int h = 0; h < kHeads; ++h) w.from_byte.push_back(shape.key_at(h / (kHeads / kKvHeads)));
    w.scattered_rows = kHeadSize / 4;
    return w;
  }

  // The scores' groups holding pos, one a head, as a layer and placement of their own (the key's
  // groups streamed whole: ChipTransformer::key_part).
  compiler::FcParameterWrite key_groups(int pos) const {
    compiler::FcLayer part = s;  // (its quantization)
    compiler::FcPlacement at;
    part.weights.clear();
    part.mult.clear();
    for (int h = 0; h < kHeads; ++h) {
      const int g = h * (kPositions / 64) + pos / 64;
      part.weights.insert(part.weights.end(), s.weights.begin() + long(64 * g * kK),
                          s.weights.begin() + long(64 * (g + 1) * kK));
      part.mult.insert(part.mult.end(), s.mult.begin() + 64 * g, s.mult.begin() + 64 * (g + 1));
      at.tiles.push_back(s_at.tiles[size_t(g)]);
      at.param_units.push_back(s_at.param_units[size_t(g)]);
    }
    part.n = 64 * kHeads;
    return {std::move(part), std::move(at)};
  }

  // The scores' own input as the host builds it (llm::rope_sum_input): the key's P1 and P2
  // (undoing the swap of the R the chain returns, its last 128 output bytes) in its slot, q's
  // kept groups none; then the count block with n and r's bits (as the chip sees them: the
  // runtime flips every byte of the int8 input).
  std::vector<uint8_t> scores_input(const std::vector<uint8_t>& chain_out, int n,
                                    uint32_t r) const {
    const size_t key_products = chain_out.size() - 4 - 128;  // before r
    std::vector<int8_t> k_p1(64), k_p2(64), unread(kDim);
    for (int j = 0; j < 64; ++j) {
      k_p1[size_t(j)] = int8_t(chain_out[key_products + size_t(j)]);
      k_p2[size_t(j ^ 1)] = int8_t(chain_out[key_products + 64 + size_t(j)]);
    }
    std::vector<int8_t> row(size_t(row_bytes + compiler::kSoftmaxCountBytes), 0);
    int slots_end = 0;
    llm::rope_sum_input(shape, llm::rope_sum_slots(3, {0, 1}, slots_end), unread.data(),
                        unread.data(), k_p1.data(), k_p2.data(), row.data());
    std::vector<uint8_t> in(row.begin(), row.end());
    for (int i = 0; i < 4; ++i) {
      in[size_t(row_bytes + i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
      in[size_t(row_bytes + 4 + i)] = uint8_t(r >> 8 * i) ^ 0x80u;
    }
    return in;
  }
};

// Runs the joined program and, one after the other, the chain's and the scores' own programs at
// n = 1, 77, 128 and compares every byte they return. With `moved` the joined program takes the
// key's products from the chain's on the chip (its input ends with the count block); else from
// the row, as the scores' own program does.
void check_joined(bool moved) {
  std::mt19937 random(moved ? 47 : 41);
  const JoinedRope t(random);
  compiler::FcScoresInput joined_first = t.first;
  joined_first.r_word = compiler::kChainRmsRWord;
  const std::vector<int> from_products = moved ? std::vector<int>{-1, -1, 2} : std::vector<int>{};
  auto tpu = runtime::open_virtual_edgetpu();
  const compiler::FfnChainPrograms alone =
      compiler::generate_ffn_chain(t.chain, t.up_at, t.down_at);
  for (const container::Executable& c : alone.caching)
    tpu->run(nullptr, std::make_shared<runtime::Program>(c));
  tpu->run(nullptr,
           std::make_shared<runtime::Program>(compiler::fc_caching(t.first.layer, t.first.at)));
  const auto scores_caching = std::make_shared<runtime::Program>(compiler::fc_caching(t.s, t.s_at));
  auto chain_p = std::make_shared<runtime::Program>(alone.execution);
  const size_t row_at = (size_t(t.chain_in) + 255) / 256 * 256;
  const size_t row_in = size_t(t.row_bytes + compiler::kSoftmaxCountBytes);
  std::set<uint32_t> rs, sums;
  for (int n : {1, 77, JoinedRope::kPositions}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const compiler::FcColumnWrite column = t.column(n - 1);
    auto joined_p = std::make_shared<runtime::Program>(
        compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at, t.row_bytes,
                                             t.exp_mult, &joined_first, &column, from_products)
            .execution);
    auto softmax_p = std::make_shared<runtime::Program>(
        compiler::generate_fc_batch_softmax(t.s, t.s_at, t.row_bytes, t.exp_mult, nullptr, &t.first,
                                            nullptr, &column)
            .execution);
    ASSERT_EQ(joined_p->input_bytes(0),
              row_at + (moved ? size_t(compiler::kSoftmaxCountBytes) : row_in));
    ASSERT_EQ(joined_p->num_outputs(), 3u);
    std::vector<uint8_t> chain_in(size_t(t.chain_in)), other(size_t(t.chain_in));
    for (uint8_t& b : chain_in) b = static_cast<uint8_t>(random() % 255 + 1);
    for (uint8_t& b : other) b = static_cast<uint8_t>(random() % 255 + 1);
    // The two programs: the chain alone (its products kept, the key's returned, r), then the
    // scores' own with the key's products and r in its row, its column written into freshly
    // cached weights.
    const std::vector<uint8_t> want_chain = all_outputs_of(*tpu, chain_p, chain_in);
    uint32_t r = 0;
    std::memcpy(&r, want_chain.data() + want_chain.size() - 4, 4);
    rs.insert(r);
    tpu->run(nullptr, scores_caching);
    const std::vector<uint8_t> want_e =
        all_outputs_of(*tpu, softmax_p, t.scores_input(want_chain, n, r));
    // The joined program after another input's products were computed and kept (it must use its
    // own), with a wrong r in its count block (it must read the chain's).
    (void)all_outputs_of(*tpu, chain_p, other);
    tpu->run(nullptr, scores_caching);
    std::vector<uint8_t> in = chain_in;
    in.resize(row_at, 0);
    const std::vector<uint8_t> row =
        t.scores_input(want_chain, n, std::bit_cast<uint32_t>(std::bit_cast<float>(r) * 3.0f));
    in.insert(in.end(), row.begin() + (moved ? t.row_bytes : 0), row.end());
    const std::vector<uint8_t> got = all_outputs_of(*tpu, joined_p, in);
    std::vector<uint8_t> want = want_chain;
    want.insert(want.end(), want_e.begin(), want_e.end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
    // Not trivial: several distinct exponentials, and r matters (2% off in the row changes them).
    EXPECT_GT(std::set<uint8_t>(want_e.begin(), want_e.begin() + n).size(), size_t(n > 8 ? 8 : 0));
    uint32_t sum = 0;
    std::memcpy(&sum, want_e.data() + JoinedRope::kHeads * JoinedRope::kPositions, 4);
    sums.insert(sum);
    tpu->run(nullptr, scores_caching);
    EXPECT_NE(
        all_outputs_of(*tpu, softmax_p,
                       t.scores_input(want_chain, n,
                                      std::bit_cast<uint32_t>(std::bit_cast<float>(r) * 1.02f))),
        want_e);
  }
  EXPECT_EQ(rs.size(), 3u);
  EXPECT_EQ(sums.size(), 3u);
}

// Step 2: the joined program reads r at the chain's word and q's products from the rows the chain
// kept in the same run; the key's products still come in the row.
TEST(FfnChainOnTheChip, RopeSumAfterTheChainEqualsTheTwoProgramsBitForBit) { check_joined(false); }

// Step 3: the key's products move on the chip from k's tile to the key sum's row slot; the
// host's row is gone (the count block alone follows the chain's input).
TEST(FfnChainOnTheChip, KeysProductsMovedOnTheChipEqualTheTwoProgramsBitForBit) {
  check_joined(true);
}

// JoinedRope's q and k alone as layer 0's chain (an FcChain), its products kept or returned.
compiler::FcChain fc_chain_of(const JoinedRope& t) {
  compiler::FcChain chain;
  chain.layers = {t.chain.next[1]};
  chain.at = {t.chain.next_at[1]};
  chain.output = {true};
  chain.products = t.chain.products;
  chain.products.layer = 0;
  return chain;
}

// Layer 0's form (generate_fc_chain_softmax): JoinedRope's q and k alone as an FcChain
// (generate_fc_chain, no RMSNorm on the chip), its products kept or returned, so the multipliers
// take r from the count block (r_word -1) and the count block reaches the key sum's tile as well
// as the scores' (the scores' first group is moved off the key sum's first tile); the key's
// products move on the chip. At each n of `counts` the joined program (with `sum`, the weighted
// sum after the softmax) returns the chain program's bytes and then those of the scores' own
// program (with `sum`, the attention program) run after it with the same r in its row and the
// key's products the chain returned, every byte. Before each joined run another input's products
// were computed and kept and, with `sum`, the attention program ran at another n (scalar memory
// left stale). Where n > 1, r 2% off in the joined program's count block changes its output.
// Returns the second program's bytes per n, for the caller's checks.
std::vector<std::vector<uint8_t>> check_fc_chain_joined(JoinedRope& t,
                                                        const std::vector<int>& counts,
                                                        const compiler::FcValueSum* sum,
                                                        std::mt19937& random) {
  std::swap(t.s_at.tiles[0], t.s_at.tiles[2]);
  std::swap(t.s_at.param_units[0], t.s_at.param_units[2]);
  const compiler::FcChain chain = fc_chain_of(t);
  const int chain_in = JoinedRope::kDim + compiler::fc_tables_bytes(JoinedRope::kDim, 3);
  const std::vector<int> moved = {-1, -1, 2};
  auto tpu = runtime::open_virtual_edgetpu();
  const compiler::FfnChainPrograms alone = compiler::generate_fc_chain(chain);
  for (const container::Executable& c : alone.caching)
    tpu->run(nullptr, std::make_shared<runtime::Program>(c));
  tpu->run(nullptr,
           std::make_shared<runtime::Program>(compiler::fc_caching(t.first.layer, t.first.at)));
  if (sum)
    tpu->run(nullptr,
             std::make_shared<runtime::Program>(compiler::fc_caching(sum->layer, sum->at)));
  const auto scores_caching = std::make_shared<runtime::Program>(compiler::fc_caching(t.s, t.s_at));
  auto chain_p = std::make_shared<runtime::Program>(alone.execution);
  const size_t count_at = (size_t(chain_in) + 255) / 256 * 256;
  std::vector<std::vector<uint8_t>> seconds;
  for (const int n : counts) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const compiler::FcColumnWrite column = t.column(n - 1);
    auto joined_p = std::make_shared<runtime::Program>(
        compiler::generate_fc_chain_softmax(chain, t.s, t.s_at, t.row_bytes, t.exp_mult, &t.first,
                                            &column, moved, sum)
            .execution);
    auto second_p = std::make_shared<runtime::Program>(
        sum ? compiler::generate_fc_batch_attention(t.s, t.s_at, t.row_bytes, t.exp_mult, *sum, {},
                                                    nullptr, &t.first, &column)
                  .execution
            : compiler::generate_fc_batch_softmax(t.s, t.s_at, t.row_bytes, t.exp_mult, nullptr,
                                                  &t.first, nullptr, &column)
                  .execution);
    EXPECT_EQ(joined_p->input_bytes(0), count_at + size_t(compiler::kSoftmaxCountBytes));
    EXPECT_EQ(joined_p->num_outputs(), 2u);
    std::vector<uint8_t> in(static_cast<size_t>(chain_in)), other(static_cast<size_t>(chain_in));
    for (uint8_t& b : in) b = static_cast<uint8_t>(random() % 255 + 1);
    for (uint8_t& b : other) b = static_cast<uint8_t>(random() % 255 + 1);
    const float r = 0.6f + 0.1f * float(n % 7);
    const auto row_of = [&](const std::vector<uint8_t>& chain_out, int count, float with_r) {
      std::vector<uint8_t> as_if_r = chain_out;  // scores_input reads the key's products before r
      as_if_r.resize(as_if_r.size() + 4);
      return t.scores_input(as_if_r, count, std::bit_cast<uint32_t>(with_r));
    };
    const std::vector<uint8_t> want_chain = all_outputs_of(*tpu, chain_p, in);
    EXPECT_EQ(want_chain.size(), 128u);  // the key's products: q's stay in the kept rows
    tpu->run(nullptr, scores_caching);
    seconds.push_back(all_outputs_of(*tpu, second_p, row_of(want_chain, n, r)));
    if (sum) (void)all_outputs_of(*tpu, second_p, row_of(want_chain, n % 64 + 1, r));
    (void)all_outputs_of(*tpu, chain_p, other);
    const auto joined_with = [&](float with_r) {
      tpu->run(nullptr, scores_caching);
      std::vector<uint8_t> joined_in = in;
      joined_in.resize(count_at, 0);
      const std::vector<uint8_t> row = row_of(want_chain, n, with_r);
      joined_in.insert(joined_in.end(), row.begin() + t.row_bytes, row.end());
      return all_outputs_of(*tpu, joined_p, joined_in);
    };
    std::vector<uint8_t> want = want_chain;
    want.insert(want.end(), seconds.back().begin(), seconds.back().end());
    const std::vector<uint8_t> got = joined_with(r);
    EXPECT_EQ(got.size(), want.size());
    for (size_t i = 0; i < std::min(want.size(), got.size()); ++i) {
      EXPECT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
      if (got[i] != want[i]) break;
    }
    if (n > 1) {
      EXPECT_NE(joined_with(r * 1.02f), got);
    }
  }
  return seconds;
}

// Layer 0's scores and softmax (check_fc_chain_joined without a sum) at n = 1, 77, 128: e and
// 1 / S every byte; several distinct exponentials, a sum of its own at each n; r at a word is
// refused without a chain r.
TEST(FfnChainOnTheChip, ScoresAfterAnFcChainWithRInTheCountEqualTheTwoProgramsBitForBit) {
  std::mt19937 random(53);
  JoinedRope t(random);
  const std::vector<int> counts = {1, 77, JoinedRope::kPositions};
  const std::vector<std::vector<uint8_t>> e = check_fc_chain_joined(t, counts, nullptr, random);
  std::set<uint32_t> sums;
  for (size_t i = 0; i < e.size(); ++i) {
    const int n = counts[i];
    EXPECT_GT(std::set<uint8_t>(e[i].begin(), e[i].begin() + n).size(), size_t(n > 8 ? 8 : 0));
    uint32_t sum = 0;
    std::memcpy(&sum, e[i].data() + JoinedRope::kHeads * JoinedRope::kPositions, 4);
    sums.insert(sum);
  }
  EXPECT_EQ(sums.size(), 3u);
  const compiler::FcChain chain = fc_chain_of(t);
  compiler::FcScoresInput at_word = t.first;
  at_word.r_word = compiler::kChainRmsRWord;
  const compiler::FcColumnWrite column = t.column(5);
  const std::string refused = error_of([&] {
    compiler::generate_fc_chain_softmax(chain, t.s, t.s_at, t.row_bytes, t.exp_mult, &at_word,
                                        &column, {-1, -1, 2});
  });
  EXPECT_NE(refused.find("did not compute it"), std::string::npos) << refused;
}

// In the join r is the chain's: r in the row (its count block moved to words 4080..4095, over the
// chain's x and r), r at a word in a program of its own, multipliers reaching the chain's x and a
// column whose words would be streamed are refused; so are moved products that leave a group
// without input or give one two.
TEST(FfnChainOnTheChip, RopeSumAfterTheChainRefusesRInTheRowAndStreamedWords) {
  std::mt19937 random(43);
  const JoinedRope t(random);
  const compiler::FcColumnWrite column = t.column(5);
  const auto joined = [&](const compiler::FcScoresInput& first, const compiler::FcColumnWrite& c) {
    return error_of([&] {
      compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at, t.row_bytes,
                                           t.exp_mult, &first, &c);
    });
  };
  compiler::FcScoresInput at_word = t.first;
  at_word.r_word = compiler::kChainRmsRWord;
  EXPECT_EQ(joined(at_word, column), "");
  const std::string in_row = joined(t.first, column);
  EXPECT_NE(in_row.find("FcScoresInput::r_word"), std::string::npos) << in_row;
  compiler::FcColumnWrite streamed = column;
  streamed.from_byte.clear();
  const std::string words = joined(at_word, streamed);
  EXPECT_NE(words.find("streams no parameters"), std::string::npos) << words;
  const std::string alone = error_of([&] {
    compiler::generate_fc_batch_softmax(t.s, t.s_at, t.row_bytes, t.exp_mult, nullptr, &at_word,
                                        nullptr, &column);
  });
  EXPECT_NE(alone.find("did not compute it"), std::string::npos) << alone;
  compiler::FcValueSum sum;
  sum.layer.n = 64;
  sum.layer.k = JoinedRope::kPositions;
  sum.mult_base.assign(64, 1.0f);
  sum.mult_head.assign(64, 0);
  const std::string attention = error_of([&] {
    compiler::generate_fc_batch_attention(t.s, t.s_at, t.row_bytes, t.exp_mult, sum, {}, nullptr,
                                          &at_word);
  });
  EXPECT_NE(attention.find("did not compute it"), std::string::npos) << attention;
  // After a chain only kChainRmsRWord holds r.
  compiler::FcScoresInput elsewhere = at_word;
  elsewhere.r_word = compiler::kChainRmsRWord - 1;
  const std::string other_word = joined(elsewhere, column);
  EXPECT_NE(other_word.find("the chain's r at"), std::string::npos) << other_word;
  // Moved products: every group that reads no resident row takes a product group, none both.
  const auto moved = [&](const std::vector<int>& from) {
    return error_of([&] {
      compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at, t.row_bytes,
                                           t.exp_mult, &at_word, &column, from);
    });
  };
  EXPECT_EQ(moved({-1, -1, 2}), "");
  EXPECT_NE(moved({-1, -1, -1}).find("neither"), std::string::npos);
  EXPECT_NE(moved({0, -1, 2}).find("resident and moved"), std::string::npos);
  EXPECT_NE(moved({-1, 2}).find("moved products for"), std::string::npos);
  // A moved slot holds P1 and R: an FC of another K is refused.
  compiler::FcScoresInput wide = at_word;
  wide.layer.k = 3 * 64;
  const std::string k = error_of([&] {
    compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at, t.row_bytes,
                                         t.exp_mult, &wide, &column, {-1, -1, 2});
  });
  EXPECT_NE(k.find("a moved slot holds P1 and R"), std::string::npos) << k;
  // The host's row is not sent: a scores group reading past the FC's outputs would read what the
  // chain left there.
  compiler::FcPlacement past_at = t.s_at;
  past_at.in_at.back() = t.row_bytes;
  const std::string past_outputs = error_of([&] {
    compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, past_at,
                                         t.row_bytes + 64, t.exp_mult, &at_word, &column,
                                         {-1, -1, 2});
  });
  EXPECT_NE(past_outputs.find("past the moved FC's outputs"), std::string::npos) << past_outputs;
  // rand15M's 640 multipliers under its x (5 groups from word 4015); 4,016 reach it.
  EXPECT_EQ(compiler::ffn_chain_softmax_unsupported(6, 256, 5, 640), "");
  const std::string past = compiler::ffn_chain_softmax_unsupported(6, 256, 5, 4016);
  EXPECT_NE(past.find("reach the chain's x"), std::string::npos) << past;
}

// One program per group serves all its positions (ChipTransformer::joined_run): the program
// generated at a group's first position marks each head's scatter address (FfnChainPrograms::
// marks: the n.addr field of kHeads w2n's, at column 0), and that program with those fields
// rewritten to column c sends, byte for byte, the program generated at position first + c, in
// both groups, for c one after the other in the same program and back to 0. (So within a group
// the generated programs differ in those fields alone.)
TEST(FfnChainOnTheChip, AGroupsProgramWithItsColumnRewrittenIsThatPositionsProgram) {
  std::mt19937 random(47);
  const JoinedRope t(random);
  compiler::FcScoresInput first = t.first;
  first.r_word = compiler::kChainRmsRWord;
  auto generated = [&](int pos) {
    const compiler::FcColumnWrite column = t.column(pos);
    return compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at,
                                                t.row_bytes, t.exp_mult, &first, &column,
                                                {-1, -1, 2});
  };
  for (const int group : {0, 64}) {
    SCOPED_TRACE("group at " + std::to_string(group));
    compiler::FfnChainPrograms g = generated(group);
    ASSERT_EQ(g.execution.bitstreams.size(), 1u);
    const std::vector<isa::Instruction> program = isa::decode(g.execution.bitstreams[0].data);
    ASSERT_EQ(g.marks.size(), size_t(JoinedRope::kHeads));
    for (const isa::EncodedField& f : g.marks) {
      const std::optional<isa::BitLocation> at = isa::locate_bit(program, f.offset_bit);
      ASSERT_TRUE(at && at->field);
      EXPECT_EQ(program[at->instruction].spec->mnemonic, "w2n");
      EXPECT_EQ(at->field->name, "n.addr");
      EXPECT_EQ(at->bit_in_field, 0u);
      EXPECT_EQ(f.width, at->field->width);
      EXPECT_EQ(f.value, program[at->instruction].value(*at->field));
    }
    runtime::Program patched(std::move(g.execution));
    for (const int c : {1, 2, 37, 63, 0}) {
      SCOPED_TRACE("column " + std::to_string(c));
      for (const isa::EncodedField& f : g.marks)
        patched.patch_field(0, f.offset_bit, f.width, uint64_t(f.value + c));
      const runtime::Program want(generated(group + c).execution);
      ASSERT_EQ(patched.instructions().size(), 1u);
      EXPECT_TRUE(patched.instructions() == want.instructions());
      EXPECT_TRUE(patched.executable().bitstreams == want.executable().bitstreams);
    }
  }
}

// The scores' own program and the value cache's attention program (the chip path's layers that do
// not join the program before) serve a group the same way (llm::GroupProgram): generated at the
// group's first position (0 and 64) they mark each head group's scatter n.addr (column 0) and
// each v~ row's wide address (ringcons0's addr, the row of that position), and llm::at_position
// rewritten to c, c one after the other and back to 0, sends the program generated at position
// first + c, every byte; with that position's parameters set, its parameters too. The program
// before the rewrite differs from it (the fields matter), and a position of another group is
// refused. `value_rows`: how many of the row marks move with the position (the RoPE multipliers'
// rows after them do not).
// Mark `f` is the whole field `field` of an instruction `mnemonic` in `program`, with its value.
void expect_mark(const std::vector<isa::Instruction>& program, const isa::EncodedField& f,
                 const std::string& mnemonic, const std::string& field) {
  const std::optional<isa::BitLocation> at = isa::locate_bit(program, f.offset_bit);
  ASSERT_TRUE(at && at->field);
  EXPECT_EQ(program[at->instruction].spec->mnemonic, mnemonic);
  EXPECT_EQ(at->field->name, field);
  EXPECT_EQ(at->bit_in_field, 0u);
  EXPECT_EQ(f.width, at->field->width);
  EXPECT_EQ(f.value, program[at->instruction].value(*at->field));
}

void expect_group_rewrites(const std::function<compiler::FcScoresProgram(int)>& generated,
                           size_t column_groups, size_t rows, size_t value_rows) {
  for (const int group : {0, 64}) {
    SCOPED_TRACE("group at " + std::to_string(group));
    compiler::FcScoresProgram g = generated(group);
    ASSERT_EQ(g.execution.bitstreams.size(), 1u);
    const std::vector<isa::Instruction> program = isa::decode(g.execution.bitstreams[0].data);
    ASSERT_EQ(g.column_marks.size(), column_groups);
    ASSERT_EQ(g.row_marks.size(), rows);
    for (const isa::EncodedField& f : g.column_marks) expect_mark(program, f, "w2n", "n.addr");
    for (const isa::EncodedField& f : g.row_marks) expect_mark(program, f, "ringcons0", "addr");
    const runtime::Program unpatched(g.execution);
    g.row_marks.resize(value_rows);
    const llm::GroupProgram p{std::make_shared<runtime::Program>(std::move(g.execution)), group,
                              std::move(g.column_marks), std::move(g.row_marks)};
    for (const int c : {1, 2, 6, 37, 63, 0}) {
      SCOPED_TRACE("column " + std::to_string(c));
      const runtime::Program& patched = *llm::at_position(p, group + c);
      const runtime::Program want(generated(group + c).execution);
      ASSERT_EQ(patched.instructions().size(), 1u);
      EXPECT_TRUE(patched.instructions() == want.instructions());
      EXPECT_TRUE(patched.executable().bitstreams == want.executable().bitstreams);
      // (Without a column, the positions of one v~ row's 4 share their program.)
      if (c != 0 && (column_groups > 0 || c / 4 != 0)) {
        EXPECT_FALSE(unpatched.instructions() == want.instructions());
      }
      p.program->set_parameters(want.executable().parameters);
      EXPECT_TRUE(patched.executable().parameters == want.executable().parameters);
    }
    EXPECT_NE(error_of([&] { llm::at_position(p, group + 64); }).find("outside the group"),
              std::string::npos);
  }
}

// The key's column with its words streamed (no key sum on the chip: the llm path's softmax and
// attention programs without --chip-rope) or from the key sum's outputs (with it).
compiler::FcColumnWrite column_of(const JoinedRope& t, int pos, bool streamed) {
  compiler::FcColumnWrite w = t.column(pos);
  if (streamed) {
    w.from_byte.clear();
    w.scattered_rows = 0;
  }
  return w;
}

TEST(ScoresProgramOnTheChip, AGroupsProgramWithItsColumnRewrittenIsThatPositionsProgram) {
  std::mt19937 random(53);
  const JoinedRope t(random);
  for (const bool streamed : {true, false}) {
    SCOPED_TRACE(streamed ? "words streamed" : "words from the key sum");
    expect_group_rewrites(
        [&](int pos) {
          const compiler::FcColumnWrite column = column_of(t, pos, streamed);
          return compiler::generate_fc_batch_softmax(t.s, t.s_at, t.row_bytes, t.exp_mult, nullptr,
                                                     streamed ? nullptr : &t.first, nullptr,
                                                     &column);
        },
        JoinedRope::kHeads, 0, 0);
  }
}

// A value cache's sum after JoinedRope's scores (K = the positions, one group a head): random
// weights, multipliers spread per channel, head h's e at h * positions.
compiler::FcValueSum value_sum(std::mt19937& random, const std::vector<int>& tiles,
                               const std::vector<int>& units) {
  compiler::FcValueSum sum;
  compiler::FcLayer& v = sum.layer;
  v.n = JoinedRope::kHeads * 64;
  v.k = JoinedRope::kPositions;
  for (int i = 0; i < v.n * v.k; ++i)
    v.weights.push_back(static_cast<int8_t>(static_cast<int>(random() % 255) - 127));
  v.mult.assign(size_t(v.n), 0.0f);
  v.in_zp = 0;
  v.in_scale = 1.0f / 255.0f;
  v.out_zp = 128;
  v.out_scale = 1.0f;
  v.clamp_min = compiler::fc_clamp(1, 128, 1.0f);
  v.clamp_max = compiler::fc_clamp(255, 128, 1.0f);
  v.input_name = "x";
  v.output_name = "a";
  v.signed_input = v.signed_output = false;
  sum.at.tiles = tiles;
  sum.at.param_units = units;
  for (int h = 0; h < JoinedRope::kHeads; ++h) {
    sum.at.in_at.push_back(h * JoinedRope::kPositions);
    for (int j = 0; j < 64; ++j) {
      sum.mult_head.push_back(h);
      sum.mult_base.push_back((0.5f + 0.25f * float(j % 11)) / 255.0f);
    }
  }
  return sum;
}

// Issue 14 step B.3's sum in the chain's tail: the joined program (the chain, q~'s and the key's
// sums with the key's products moved on the chip, the scores, the softmax) goes on with the value
// prep, the sum over the value cache and its output, through generate_fc_batch_attention's own
// stages, and returns the chain's outputs, r and the sum's bytes. They must equal, every byte,
// the chain's program and the attention program (r and the key's products in its row) run one
// after the other, at positions on both sides of a quad's and a 64-position group's boundary.
TEST(FfnChainOnTheChip, ValueSumAfterTheChainEqualsTheTwoProgramsBitForBit) {
  std::mt19937 random(61);
  const JoinedRope t(random);
  // On tiles the chain, q~'s and the key's sums and the scores leave free (tile 14: past its
  // scores group).
  const compiler::FcValueSum sum = value_sum(random, {2, 3, 6, 14}, {0, 0, 0, 1024});
  compiler::FcScoresInput joined_first = t.first;
  joined_first.r_word = compiler::kChainRmsRWord;
  const std::vector<int> from_products{-1, -1, 2};
  auto tpu = runtime::open_virtual_edgetpu();
  const compiler::FfnChainPrograms alone =
      compiler::generate_ffn_chain(t.chain, t.up_at, t.down_at);
  for (const container::Executable& c : alone.caching)
    tpu->run(nullptr, std::make_shared<runtime::Program>(c));
  tpu->run(nullptr,
           std::make_shared<runtime::Program>(compiler::fc_caching(t.first.layer, t.first.at)));
  tpu->run(nullptr, std::make_shared<runtime::Program>(compiler::fc_caching(sum.layer, sum.at)));
  const auto scores_caching = std::make_shared<runtime::Program>(compiler::fc_caching(t.s, t.s_at));
  auto chain_p = std::make_shared<runtime::Program>(alone.execution);
  const size_t row_at = (size_t(t.chain_in) + 255) / 256 * 256;
  std::set<std::vector<uint8_t>> sums;
  const std::vector<int> positions = {1, 4, 5, 64, 65, JoinedRope::kPositions};
  for (const int n : positions) {
    SCOPED_TRACE("n = " + std::to_string(n));
    const compiler::FcColumnWrite column = t.column(n - 1);
    auto joined_p = std::make_shared<runtime::Program>(
        compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at, t.row_bytes,
                                             t.exp_mult, &joined_first, &column, from_products,
                                             &sum)
            .execution);
    auto attention_p = std::make_shared<runtime::Program>(
        compiler::generate_fc_batch_attention(t.s, t.s_at, t.row_bytes, t.exp_mult, sum, {},
                                              nullptr, &t.first, &column)
            .execution);
    ASSERT_EQ(joined_p->input_bytes(0), row_at + size_t(compiler::kSoftmaxCountBytes));
    ASSERT_EQ(joined_p->num_outputs(), 3u);
    std::vector<uint8_t> chain_in(size_t(t.chain_in)), other(size_t(t.chain_in));
    for (uint8_t& b : chain_in) b = static_cast<uint8_t>(random() % 255 + 1);
    for (uint8_t& b : other) b = static_cast<uint8_t>(random() % 255 + 1);
    const std::vector<uint8_t> want_chain = all_outputs_of(*tpu, chain_p, chain_in);
    uint32_t r = 0;
    std::memcpy(&r, want_chain.data() + want_chain.size() - 4, 4);
    tpu->run(nullptr, scores_caching);
    const std::vector<uint8_t> want_sum =
        all_outputs_of(*tpu, attention_p, t.scores_input(want_chain, n, r));
    // The joined program after the attention program at another position (scalar memory holds
    // its e, 1 / S and count) and another input's products were kept, with a wrong r in its count
    // block: it must use its own products, sums and count, and the chain's r.
    (void)all_outputs_of(*tpu, attention_p, t.scores_input(want_chain, n % 64 + 1, r));
    (void)all_outputs_of(*tpu, chain_p, other);
    tpu->run(nullptr, scores_caching);
    std::vector<uint8_t> in = chain_in;
    in.resize(row_at, 0);
    const std::vector<uint8_t> row =
        t.scores_input(want_chain, n, std::bit_cast<uint32_t>(std::bit_cast<float>(r) * 3.0f));
    in.insert(in.end(), row.begin() + t.row_bytes, row.end());
    const std::vector<uint8_t> got = all_outputs_of(*tpu, joined_p, in);
    std::vector<uint8_t> want = want_chain;
    want.insert(want.end(), want_sum.begin(), want_sum.end());
    ASSERT_EQ(want_sum.size(), size_t(sum.layer.n));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
    // Not trivial: the sums spread, and each position's differ.
    EXPECT_GT(std::set<uint8_t>(want_sum.begin(), want_sum.end()).size(), size_t(16));
    sums.insert(want_sum);
  }
  EXPECT_EQ(sums.size(), positions.size());
}

// Layer 0's form with the sum (check_fc_chain_joined with the attention program) across a
// quad's and a 64-position group's boundaries: the sums every byte, spread, each n's its own.
TEST(FfnChainOnTheChip, ValueSumAfterAnFcChainWithRInTheCountEqualsTheTwoProgramsBitForBit) {
  std::mt19937 random(67);
  JoinedRope t(random);
  const compiler::FcValueSum sum = value_sum(random, {2, 3, 6, 14}, {0, 0, 0, 1024});
  const std::vector<int> counts = {3, 4, 63, 64, 65, JoinedRope::kPositions};
  const std::vector<std::vector<uint8_t>> sums = check_fc_chain_joined(t, counts, &sum, random);
  for (const std::vector<uint8_t>& a : sums)
    EXPECT_GT(std::set<uint8_t>(a.begin(), a.end()).size(), size_t(16));
  EXPECT_EQ(std::set<std::vector<uint8_t>>(sums.begin(), sums.end()).size(), counts.size());
}

// Issue 14 step B.3: the joined program with the value write too (generate_ffn_chain_softmax's
// `values`; the key follower's group stands for v~, kv_dim 64 being one piece) is one program per
// 64-position group as the scores' programs are. Its marks, in FfnChainPrograms::marks' order
// (the column's scatters' n.addr, then the write's landings' n.addr, then its rows' w.addr),
// rewritten by llm::at_position from the group's first position to c (one after the other, back
// to 0) give the program generated at first + c, every byte; unrewritten it differs.
TEST(FfnChainOnTheChip, AJoinedProgramWithTheValueWriteIsEachPositionsProgramOnceRewritten) {
  std::mt19937 random(73);
  const JoinedRope t(random);
  const compiler::FcValueSum sum = value_sum(random, {2, 3, 6, 14}, {0, 0, 0, 1024});
  compiler::FcScoresInput first = t.first;
  first.r_word = compiler::kChainRmsRWord;
  std::vector<int> staging;
  for (const int unit : sum.at.param_units)
    staging.push_back(unit + compiler::fc_units_per_tile(JoinedRope::kPositions, false));
  const auto generated = [&](int pos) {
    const compiler::FcColumnWrite column = t.column(pos);
    compiler::FcChainValueWrite values{
        compiler::fc_value_write(sum.layer, sum.at, staging, pos), 1, {2}};
    values.write.from_byte = compiler::value_vectors_side_by_side(
                                 JoinedRope::kHeads, JoinedRope::kKvHeads, JoinedRope::kHeadSize, 0)
                                 .from_byte;
    return compiler::generate_ffn_chain_softmax(t.chain, t.up_at, t.down_at, t.s, t.s_at,
                                                t.row_bytes, t.exp_mult, &first, &column,
                                                {-1, -1, 2}, &sum, &values);
  };
  const long heads = JoinedRope::kHeads, groups = long(sum.at.tiles.size());
  for (const int group : {0, 64}) {
    SCOPED_TRACE("group at " + std::to_string(group));
    compiler::FfnChainPrograms g = generated(group);
    ASSERT_EQ(g.execution.bitstreams.size(), 1u);
    const std::vector<isa::Instruction> program = isa::decode(g.execution.bitstreams[0].data);
    ASSERT_EQ(long(g.marks.size()), heads + 2 * groups);
    const auto from = g.marks.begin();
    for (auto f = from; f != from + heads + groups; ++f) expect_mark(program, *f, "w2n", "n.addr");
    for (auto f = from + heads + groups; f != g.marks.end(); ++f)
      expect_mark(program, *f, "n2w", "w.addr");
    const runtime::Program unpatched(g.execution);
    const llm::GroupProgram p{std::make_shared<runtime::Program>(std::move(g.execution)),
                              group,
                              {from, from + heads},
                              {from + heads + groups, g.marks.end()},
                              {from + heads, from + heads + groups}};
    for (const int c : {1, 2, 3, 4, 5, 37, 63, 0}) {
      SCOPED_TRACE("position " + std::to_string(group + c));
      const runtime::Program& patched = *llm::at_position(p, group + c);
      const runtime::Program want(generated(group + c).execution);
      EXPECT_TRUE(patched.executable().bitstreams == want.executable().bitstreams);
      if (c != 0) {
        EXPECT_FALSE(unpatched.executable().bitstreams == want.executable().bitstreams);
      }
    }
  }
}

// The value cache's sum after the scores (K = the positions, one group a head) on tiles the
// scores and the sums in front leave free; each token streams the key's column, the weight row of
// its v~ (fc_weight_rows, 4 positions a row) and one more row that does not move (as the RoPE
// multipliers' rows).
TEST(AttentionProgramOnTheChip, AGroupsProgramWithItsColumnAndValueRowRewrittenIsThatPositions) {
  std::mt19937 random(59);
  const JoinedRope t(random);
  const compiler::FcValueSum sum = value_sum(random, {0, 2, 3, 4}, {0, 0, 0, 0});
  const compiler::FcLayer& v = sum.layer;
  const size_t value_rows = compiler::fc_weight_rows(v, sum.at, 0).rows.size();
  ASSERT_EQ(value_rows, size_t(JoinedRope::kHeads));
  for (const bool streamed : {true, false}) {
    SCOPED_TRACE(streamed ? "words streamed" : "words from the key sum");
    expect_group_rewrites(
        [&](int pos) {
          const compiler::FcColumnWrite column = column_of(t, pos, streamed);
          compiler::FcRowWrite rows = compiler::fc_weight_rows(v, sum.at, pos / 4);
          rows.rows.push_back({6, 0});
          rows.bytes.resize(rows.bytes.size() + 256, uint8_t(pos));
          return compiler::generate_fc_batch_attention(t.s, t.s_at, t.row_bytes, t.exp_mult, sum,
                                                       {}, &rows, streamed ? nullptr : &t.first,
                                                       &column);
        },
        JoinedRope::kHeads, value_rows + 1, value_rows);
  }
}

// Without the key's column (the llm path without --key-column-write): the key's groups holding
// pos streamed whole (their parameters), then the v~ rows and the row that does not move; the
// instructions differ from position to position only in the v~ rows' addresses (+4 units every 4
// positions), so one program per 64-position group serves all its positions once rewritten.
TEST(AttentionProgramOnTheChip, AGroupsProgramWithTheKeysGroupsStreamedAndItsValueRowRewritten) {
  std::mt19937 random(61);
  const JoinedRope t(random);
  const compiler::FcValueSum sum = value_sum(random, {0, 2, 3, 4}, {0, 0, 0, 0});
  const size_t value_rows = compiler::fc_weight_rows(sum.layer, sum.at, 0).rows.size();
  expect_group_rewrites(
      [&](int pos) {
        const compiler::FcParameterWrite key = t.key_groups(pos);
        compiler::FcRowWrite rows = compiler::fc_weight_rows(sum.layer, sum.at, pos / 4);
        rows.rows.push_back({6, 0});
        rows.bytes.resize(rows.bytes.size() + 256, uint8_t(pos));
        return compiler::generate_fc_batch_attention(t.s, t.s_at, t.row_bytes, t.exp_mult, sum,
                                                     {&key}, &rows);
      },
      0, value_rows + 1, value_rows);
}

// The multipliers' form is decided before the sum's groups are placed
// (compiler::fc_multipliers_loop_pays, from the outputs' padding alone): it must be the form of the
// smaller program wherever the groups go. The softmax program with q~'s and the key's sum in front
// and its multipliers from r, generated in both forms (base_rows: the loop over resident constants;
// without: a bundle per output) at two placements of the sum's groups.
TEST(ScoresProgramOnTheChip, TheMultipliersFormDecidedBeforePlacementIsTheSmallerProgram) {
  std::mt19937 random(67);
  const JoinedRope t(random);
  const compiler::FcColumnWrite column = column_of(t, 5, false);
  const bool loop =
      compiler::fc_multipliers_loop_pays(t.first.mult_padding, t.first.r_word < 0 ? 1 : 0);
  std::vector<int64_t> saved;
  for (const bool moved : {false, true}) {
    SCOPED_TRACE(moved ? "groups moved" : "groups as placed");
    compiler::FcScoresInput first = t.first;
    if (moved) {  // other tiles and units
      first.at.tiles = {3, 6, 9};
      first.at.param_units = {100, 300, 612};
    }
    first.at.weight_units.assign(first.at.tiles.size(), 4000);
    const auto bytes = [&](bool base_rows) {
      first.base_rows = base_rows;
      return int64_t(compiler::generate_fc_batch_softmax(t.s, t.s_at, t.row_bytes, t.exp_mult,
                                                         nullptr, &first, nullptr, &column)
                         .execution.bitstreams.at(0)
                         .data.size());
    };
    const int64_t looped = bytes(true), bundles = bytes(false);
    EXPECT_EQ(loop, looped < bundles) << looped << " bytes looped, " << bundles << " bundled";
    saved.push_back(bundles - looped);
  }
  // (The placement moves other instructions, not the two forms' difference.)
  EXPECT_EQ(saved[0], saved[1]);
}

}  // namespace
}  // namespace tinycoral::testing
