// An FFN chain and attention's scores with their softmax in one program
// (compiler::generate_ffn_chain_softmax, the first step of joining each layer's scores to the
// chain before it, issue 14): on the virtual Edge TPU the joined program must return, bit for bit,
// what the two programs return run apart: the chain's bytes and RMSNorm's scale r as
// generate_ffn_chain's program, e and 1 / S as generate_fc_batch_softmax's over the same query row
// and count. The row comes from the chain's own input pop; random layers, some of the scores'
// groups on the chain's tiles (their narrow memory is the chain's until its outputs have left).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "llm/int8_model.h"
#include "llm/int8_rms.h"
#include "llm/int8_rope.h"
#include "llm/matmul_plan.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu.h"
#include "runtime/program.h"
#include "support/chain_layers.h"
#include "support/error_of.h"

namespace tinycoral::testing {
namespace {

using llm::QuantizedMatmul;

// The chain of ffn_chain_test.cpp's pairwise case (FFN, the residual add, q-like follower) with r
// of the add, and with rope the follower's groups 0 and 1 multiplied by tables after the input.
void check_chain_then_softmax(bool rope) {
  std::mt19937 random(rope ? 23 : 19);
  const int dim = 128, hidden = 192, qkv = 192;
  const QuantizedMatmul w1 = random_matmul(hidden, dim, {-2, 2}, {-2.5f, 2.5f}, random),
                        w3 = random_matmul(hidden, dim, {-2, 2}, {-2.5f, 2}, random),
                        w2 = random_matmul(dim, hidden, {-3, 3}, {-1.5f, 1.5f}, random),
                        add = random_matmul(dim, 128, {-1.5f, 1.5f}, {-2, 2}, random),
                        next = random_matmul(qkv, dim, {-2, 2}, {-2, 2.5f}, random);
  compiler::FfnChain chain;
  chain.ffn.up = layer_of({&w1, &w3, &w1, &w3, &w1, &w3});
  chain.ffn.down = layer_of({&w2, &w2});
  llm::set_ffn_gate(llm::quantize_gate(w1.out, w3.out, {-0.5f, 2.5f}, w2.in), chain.ffn);
  chain.extra_k = dim;
  chain.pairwise = chain.output_down = true;
  chain.next = {layer_of({&add, &add}), layer_of({&next, &next, &next})};
  const int up_units = compiler::fc_units_per_tile(dim, false);
  const compiler::FcPlacement up_at{{4, 4, 7, 7, 1, 1}, {0, up_units, 0, up_units, 0, up_units}};
  const compiler::FcPlacement down_at{{0, 9}, {0, 0}};
  const int add_at = 2 * up_units, next_at = add_at + 2 * up_units;
  chain.next_at = {{{1, 1}, {add_at, add_at + up_units}},
                   {{1, 12, 1}, {next_at, 0, next_at + up_units}}};
  const int tables = rope ? 2 * 128 : 0;
  if (rope) {
    const llm::QuantizedRope rq =
        llm::quantize_rope(next.out.scale, next.out.zero_point, std::vector<float>(128, 1.0f),
                           std::vector<float>(128, 1.0f));
    chain.products.layer = 1;
    chain.products.tables = 2;
    chain.products.groups = {{0, 0, next.out.zero_point + 128, rq.mul_mult},
                             {1, 1, next.out.zero_point + 128, rq.mul_mult}};
    chain.next_output = {false, true};
  }
  chain.rms = {0, dim - 5, add.out.zero_point + 128,
               llm::rms_mean_multiplier(add.out.scale, dim - 5), "r"};

  // The scores (fc_softmax_simulation_test's shape): 3 heads of 128 positions, K = 64, head h
  // reading the row from byte 16 h. Groups on tiles 1 and 12 beside the chain's parameters.
  constexpr int kHeads = 3, kPositions = 128, kK = 64, kHeadSize = 16;
  const int row_bytes = (kHeads - 1) * kHeadSize + kK;
  // (Int8 input: the chain's, and the llm path's scores' rows are int8 too.)
  testing::ScoresLayer scores =
      testing::scores_layer({kHeads,
                             kPositions,
                             kK,
                             kHeadSize,
                             kK,
                             100,
                             [](int o) { return 0.0004f + 0.0001f * float(o % 7); },
                             [](int h) { return 0.02f + 0.03f * float(h); },
                             {1, 12, 15, 14, 13, 11},
                             {next_at + 2 * up_units, up_units, 0, 0, 0, 0}},
                            random);
  const compiler::FcLayer& s = scores.layer;
  const compiler::FcPlacement& s_at = scores.at;
  const std::vector<float>& exp_mult = scores.exp_mult;

  const compiler::FfnChainPrograms alone = compiler::generate_ffn_chain(chain, up_at, down_at);
  const compiler::FfnChainPrograms joined =
      compiler::generate_ffn_chain_softmax(chain, up_at, down_at, s, s_at, row_bytes, exp_mult);
  auto tpu = runtime::open_virtual_edgetpu();
  for (const container::Executable& c : joined.caching)
    tpu->run(nullptr, std::make_shared<runtime::Program>(c));
  tpu->run(nullptr, std::make_shared<runtime::Program>(compiler::fc_caching(s, s_at)));
  auto chain_p = std::make_shared<runtime::Program>(alone.execution);
  auto softmax_p = std::make_shared<runtime::Program>(
      compiler::generate_fc_batch_softmax(s, s_at, row_bytes, exp_mult).execution);
  auto joined_p = std::make_shared<runtime::Program>(joined.execution);
  const size_t chain_in = size_t(2 * dim + tables), row_at = (chain_in + 255) / 256 * 256;
  const size_t row_in = size_t(row_bytes + compiler::kSoftmaxCountBytes);
  ASSERT_EQ(joined_p->input_bytes(0), row_at + row_in);
  ASSERT_EQ(joined_p->num_outputs(), 3u);
  ASSERT_EQ(joined_p->output_bytes(0), chain_p->output_bytes(0));
  ASSERT_EQ(joined_p->output_bytes(2), size_t(kHeads * (kPositions + 4)));

  std::set<uint32_t> rs;
  for (int n : {1, 77, kPositions}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<uint8_t> in(row_at + row_in, 0);
    for (size_t i = 0; i < chain_in; ++i) in[i] = static_cast<uint8_t>(random() % 255 + 1);
    for (size_t i = row_at; i < row_at + size_t(row_bytes); ++i)
      in[i] = static_cast<uint8_t>(random());
    // n as the chip sees it: the runtime flips every byte of the int8 input.
    for (int i = 0; i < 4; ++i)
      in[row_at + size_t(row_bytes + i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
    const std::vector<uint8_t> want_chain = all_outputs_of(
        *tpu, chain_p, std::vector<uint8_t>(in.begin(), in.begin() + long(chain_in)));
    const std::vector<uint8_t> want_e =
        all_outputs_of(*tpu, softmax_p, std::vector<uint8_t>(in.begin() + long(row_at), in.end()));
    std::vector<uint8_t> want = want_chain;
    want.insert(want.end(), want_e.begin(), want_e.end());
    const std::vector<uint8_t> got = all_outputs_of(*tpu, joined_p, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
    // Not trivial: r of each input's bytes, several distinct exponentials.
    uint32_t r = 0;
    std::memcpy(&r, want_chain.data() + want_chain.size() - 4, 4);
    rs.insert(r);
    if (n == kPositions) {
      EXPECT_GT(std::set<uint8_t>(want_e.begin(), want_e.begin() + kPositions).size(), 8u);
    }
  }
  EXPECT_EQ(rs.size(), 3u);
}

TEST(FfnChainOnTheChip, SoftmaxAfterTheChainEqualsItsOwnProgram) {
  check_chain_then_softmax(false);
  check_chain_then_softmax(true);  // the row after the RoPE tables
}

// The scores' words from 0 up must stay under the chain's x and r at the top of scalar memory;
// the scores' output needs a name of its own and its row the chain's input type.
TEST(FfnChainOnTheChip, SoftmaxAfterTheChainRefusesClashesInScalarMemoryNamesAndTypes) {
  EXPECT_EQ(compiler::ffn_chain_softmax_unsupported(6, 256, 5), "");  // rand15M: 406 words
  EXPECT_EQ(compiler::ffn_chain_softmax_unsupported(6, 256, 0), "");
  const std::string why = compiler::ffn_chain_softmax_unsupported(6, 256, 250);  // x from 95
  EXPECT_NE(why.find("past the chain's x"), std::string::npos) << why;
  EXPECT_NE(compiler::ffn_chain_softmax_unsupported(2, 100, 5).find("64-position"),
            std::string::npos);
  std::mt19937 random(5);
  const QuantizedMatmul w1 = random_matmul(128, 64, {-2, 2}, {-2, 2}, random),
                        w2 = random_matmul(64, 64, {-2, 2}, {-2, 2}, random),
                        q = random_matmul(64, 128, {-2, 2}, {-2, 2}, random);
  compiler::FfnChain chain;
  chain.ffn.up = layer_of({&w1, &w1});
  chain.ffn.down = layer_of({&w2});
  llm::set_ffn_gate(llm::quantize_gate(w1.out, w1.out, {-0.5f, 2.5f}, w2.in), chain.ffn);
  chain.extra_k = 64;
  chain.next = {layer_of({&q})};
  chain.next_at = {{{3}, {0}}};
  compiler::FcLayer s = layer_of({&q});  // output "y", the chain's
  const std::string named = error_of([&] {
    compiler::generate_ffn_chain_softmax(chain, {{1, 1}, {0, 136}}, {{2}, {0}}, s, {{5}, {0}}, 64,
                                         {0.1f});
  });
  EXPECT_NE(named.find("a name of its own"), std::string::npos) << named;
  s.output_name = "e";
  s.signed_input = false;  // a uint8 row in an int8 input
  const std::string typed = error_of([&] {
    compiler::generate_ffn_chain_softmax(chain, {{1, 1}, {0, 136}}, {{2}, {0}}, s, {{5}, {0}}, 64,
                                         {0.1f});
  });
  EXPECT_NE(typed.find("one input has one type"), std::string::npos) << typed;
}

}  // namespace
}  // namespace tinycoral::testing
