// An FFN with FULLY_CONNECTED layers after it in one program (compiler::generate_ffn_chain, the
// step towards one program per token): on the virtual Edge TPU it must give, byte for byte, the
// int8 path's integer arithmetic for w1 and w3, the chip's gate, w2, a follower over the host's
// extra bytes and w2's output, and a follower over that one's output. Random weights and shapes
// that are not the test checkpoints'; the placement crowds four output pieces onto one tile. With
// RoPE (compiler::FcTableProducts, the chip path's --chip-rope) the last follower's groups 0 and 1
// are multiplied by the host's two tables: the program returns int8_rope.h's products instead of
// those groups, every byte. With RMSNorm's scale (compiler::FcChainRms, the chip path's
// --chip-rms) the program's second output is int8_rms.h's r of the add's bytes, every bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>

#include "compiler/fc_codegen.h"
#include "isa/isa.h"
#include "llm/int8_model.h"
#include "llm/int8_rms.h"
#include "llm/int8_rope.h"
#include "llm/matmul_plan.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu.h"
#include "runtime/program.h"
#include "support/chain_layers.h"

namespace tinycoral::testing {
namespace {

using llm::QuantizedMatmul;

// y_q = the int8 path's FULLY_CONNECTED of x_q.
std::vector<int8_t> fc(const QuantizedMatmul& q, const std::vector<int8_t>& x) {
  std::vector<int8_t> y(size_t(q.rows));
  for (int r = 0; r < q.rows; ++r) {
    int32_t acc = 0;
    for (int j = 0; j < q.cols; ++j)
      acc += int32_t{x[size_t(j)]} * q.w[size_t(r) * size_t(q.cols) + size_t(j)];
    y[size_t(r)] = llm::requantize_row(q, r, acc);
  }
  return y;
}

// What check_chain checks: the bytes, or (with rope) that a chain whose products need more output
// rows than a tile has is compiler::LayoutRejected (the chip path then builds it without them),
// and that a product list naming a group the follower lacks is an Error of another kind (which
// the chip path lets through instead of quietly dropping the products).
// kBadRms: r of a follower that does not exist, of more bytes than the follower has, or under
// the first output's name is an Error, not a layout to retry.
// kMuls: the MULs' count (below). kSecondSlot: the bytes, with group 2 (tile 1's second rotated
// group, its tables landing at another place than group 0's) multiplied too, by table piece 2.
// kShortK: the bytes, with w1, w3 and the last follower of K = dim - 8 over dim input bytes
// (FcLayer::weight_k: the tiles hold those K only, the pieces' last 8 bytes meet no weights).
enum class Variant { kBytes, kTooManyPieces, kBadGroup, kBadRms, kMuls, kSecondSlot, kShortK };

// `l` (K = its weights') over an input of k bytes: zero weights past its K, held no more.
compiler::FcLayer over_input(compiler::FcLayer l, int k) {
  std::vector<int8_t> w(size_t(l.n) * size_t(k), 0);
  for (int o = 0; o < l.n; ++o) std::copy_n(l.weights.begin() + o * l.k, l.k, w.begin() + o * k);
  l.weights = std::move(w);
  l.weight_k = l.k;
  l.k = k;
  return l;
}

// The program's MULs: step 1 of each (mul's first op, dp_mode 4; the pack after it is dp_mode 2).
int mul_ops(const container::Executable& e) {
  int n = 0;
  for (const isa::Instruction& in : isa::decode(e.bitstreams.at(0).data))
    if (in.spec->mnemonic == "op" && in.value("dp_mode") == 4) ++n;
  return n;
}

// Pairwise: follower 0's group g reads only [extra piece g; w2's group g] (the residual add's
// form). rope: RoPE's products of the last follower's groups 0 and 1 after everything else. rms:
// r of the add's first bytes (not a whole number of words) as the second output.
void check_chain(bool pairwise, bool rope = false, Variant variant = Variant::kBytes,
                 bool rms = false) {
  std::mt19937 random(pairwise ? 11 : 7);
  const int dim = 128, hidden = 192, extra = 128, qkv = 192;
  const int wk = variant == Variant::kShortK ? dim - 8 : dim;
  const QuantizedMatmul w1 = random_matmul(hidden, wk, {-2, 2}, {-2.5f, 2.5f}, random),
                        w3 = random_matmul(hidden, wk, {-2, 2}, {-2.5f, 2}, random),
                        w2 = random_matmul(dim, hidden, {-3, 3}, {-1.5f, 1.5f}, random),
                        add = random_matmul(dim, pairwise ? 128 : extra + dim, {-1.5f, 1.5f},
                                            {-2, 2}, random),
                        next = random_matmul(qkv, wk, {-2, 2}, {-2, 2.5f}, random);
  const llm::QuantizedGate gate = llm::quantize_gate(w1.out, w3.out, {-0.5f, 2.5f}, w2.in);

  compiler::FfnChain chain;
  compiler::FfnLayer& f = chain.ffn;
  f.up = layer_of({&w1, &w3, &w1, &w3, &w1, &w3});
  f.down = layer_of({&w2, &w2});
  llm::set_ffn_gate(gate, f);
  chain.extra_k = extra;
  chain.pairwise = pairwise;
  chain.output_down = pairwise;
  chain.next = {layer_of({&add, &add}), layer_of({&next, &next, &next})};
  if (wk != dim) {
    f.up = over_input(f.up, dim);
    chain.next[1] = over_input(chain.next[1], dim);
  }
  // Groups packed at the units K = wk takes: at K = dim they would overlap.
  const int up_units = compiler::fc_units_per_tile(wk, false);
  const compiler::FcPlacement up_at{{4, 4, 7, 7, 1, 1}, {0, up_units, 0, up_units, 0, up_units}};
  const compiler::FcPlacement down_at{{0, 9}, {0, 0}};
  // Tile 1 computes both of add's groups and two of next's: four output pieces leave from it.
  const int add_units = compiler::fc_units_per_tile(add.cols, false);
  const int add_at = 2 * up_units, next_at = add_at + 2 * add_units;
  chain.next_at = {{{1, 1}, {add_at, add_at + add_units}},
                   {{1, 12, 1}, {next_at, 0, next_at + up_units}}};
  // RoPE: tables of 2 pieces; group 0 (tile 1) with piece 0, group 1 (tile 12) with piece 1;
  // the multiplier 8 times the unclamped one, so that some products reach the clamps.
  const int rotated = variant == Variant::kSecondSlot ? 3 : 2;
  const int tables = rope ? 128 * rotated : 0;
  llm::QuantizedRope rq;
  if (rope) {
    rq = llm::quantize_rope(next.out.scale, next.out.zero_point,
                            std::vector<float>(size_t(64 * rotated), 1.0f),
                            std::vector<float>(size_t(64 * rotated), 1.0f));
    rq.mul_mult *= 8;
    chain.products.layer = 1;
    chain.products.tables = rotated;
    chain.products.groups = {{0, 0, next.out.zero_point + 128, rq.mul_mult},
                             {1, 1, next.out.zero_point + 128, rq.mul_mult}};
    if (rotated == 3)
      chain.products.groups.push_back({2, 2, next.out.zero_point + 128, rq.mul_mult});
    chain.next_output = {false, true};
  }
  const int rms_n = dim - 5;
  if (rms)
    chain.rms = {0, rms_n, add.out.zero_point + 128, llm::rms_mean_multiplier(add.out.scale, rms_n),
                 "r"};
  if (variant == Variant::kBadRms) {
    for (const compiler::FcChainRms& bad : {compiler::FcChainRms{2, 64, 128, 1.0f, "r"},
                                            compiler::FcChainRms{0, dim + 1, 128, 1.0f, "r"},
                                            compiler::FcChainRms{0, 64, 128, 1.0f, "y"}}) {
      chain.rms = bad;
      try {
        compiler::generate_ffn_chain(chain, up_at, down_at);
        ADD_FAILURE() << "r of follower " << bad.layer << " over " << bad.n << " bytes as '"
                      << bad.output_name << "' was generated";
      } catch (const compiler::LayoutRejected& e) {
        ADD_FAILURE() << "taken for a layout to retry: " << e.what();
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("RMSNorm"), std::string::npos) << e.what();
      }
    }
    return;
  }
  if (variant == Variant::kMuls) {
    // Groups 0 (tile 1) and 1 (tile 12) read x from the same place and leave their products at
    // the same place, with different table pieces: one MUL per table over both tiles. Group 2
    // (tile 1's second slot) has its own place: two more. The FFN gate's two MULs on top.
    chain.products.groups.push_back({2, 0, next.out.zero_point + 128, rq.mul_mult});
    EXPECT_EQ(mul_ops(compiler::generate_ffn_chain(chain, up_at, down_at).execution), 2 + 2 + 2);
    // Another multiplier for group 1: it no longer shares.
    chain.products.groups[1].mult *= 2;
    EXPECT_EQ(mul_ops(compiler::generate_ffn_chain(chain, up_at, down_at).execution), 2 + 6);
    return;
  }
  if (variant == Variant::kTooManyPieces) {
    // Tile 1 would return the add's two groups, next's group 2 and group 0's two products.
    chain.next_output = {true, true};
    EXPECT_THROW(compiler::generate_ffn_chain(chain, up_at, down_at), compiler::LayoutRejected);
    chain.next_output = {false, true};  // four: the layout is taken
    EXPECT_NO_THROW(compiler::generate_ffn_chain(chain, up_at, down_at));
    return;
  }
  if (variant == Variant::kBadGroup) {
    chain.products.groups.back().group = 3;  // next has groups 0..2
    try {
      compiler::generate_ffn_chain(chain, up_at, down_at);
      ADD_FAILURE() << "a product of group 3 was generated";
    } catch (const compiler::LayoutRejected& e) {
      ADD_FAILURE() << "taken for a layout to retry: " << e.what();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos) << e.what();
    }
    return;
  }
  const compiler::FfnChainPrograms code = compiler::generate_ffn_chain(chain, up_at, down_at);
  // The tiles take w1's and w3's 6 groups and the follower's 3 at K = wk (caching: up, down,
  // the add, the follower).
  ASSERT_EQ(code.caching.at(0).parameters.size(), size_t(6 * up_units * 64));
  ASSERT_EQ(code.caching.at(3).parameters.size(), size_t(3 * up_units * 64));

  auto tpu = runtime::open_virtual_edgetpu();
  for (const container::Executable& c : code.caching)
    tpu->run(nullptr, std::make_shared<runtime::Program>(c));
  auto program = std::make_shared<runtime::Program>(code.execution);
  const int sum_bytes = rope ? 0 : dim;
  ASSERT_EQ(program->input_bytes(0), size_t(dim + extra + tables));
  // With RoPE the rotated groups' own bytes stay on the chip: their products come back instead.
  ASSERT_EQ(program->output_bytes(0), size_t((pairwise ? dim : 0) + sum_bytes + qkv + tables / 2));
  ASSERT_EQ(program->num_outputs(), rms ? 2u : 1u);
  if (rms) {
    ASSERT_EQ(program->output_bytes(1), 4u);
  }
  int clamped = 0;
  std::vector<float> rs;
  std::uniform_int_distribution<int> byte(-128, 127);
  for (int inference = 0; inference < 3; ++inference) {
    SCOPED_TRACE("inference " + std::to_string(inference));
    std::vector<int8_t> in(size_t(dim + extra + tables));
    for (int8_t& b : in) b = static_cast<int8_t>(std::max(-127, byte(random)));
    const std::vector<int8_t> x(in.begin(), in.begin() + dim);
    const std::vector<int8_t> h1 = fc(w1, x), h3 = fc(w3, x);
    std::vector<int8_t> m(static_cast<size_t>(hidden));
    llm::gate(gate, h1.data(), h3.data(), hidden, m.data());
    std::vector<int8_t> add_in(in.begin() + dim, in.begin() + dim + extra);
    const std::vector<int8_t> y = fc(w2, m);
    add_in.insert(add_in.end(), y.begin(), y.end());
    std::vector<int8_t> sum = fc(add, add_in);
    if (pairwise) {
      for (int g = 0; g < dim / 64; ++g) {
        std::vector<int8_t> pair(add_in.begin() + 64 * g, add_in.begin() + 64 * g + 64);
        pair.insert(pair.end(), y.begin() + 64 * g, y.begin() + 64 * g + 64);
        const std::vector<int8_t> group = fc(add, pair);
        std::copy_n(group.begin() + 64 * g, 64, sum.begin() + 64 * g);
      }
    }
    const std::vector<int8_t> q = fc(next, sum);
    std::vector<int8_t> want = pairwise ? y : std::vector<int8_t>{};
    if (!rope) want.insert(want.end(), sum.begin(), sum.end());
    want.insert(want.end(), q.begin() + (rope ? 64 * rotated : 0), q.end());
    if (rope) {
      // The chip's R_j = MUL(x_j, t_j) is int8_rope.h's P2 at j ^ 1 with sin'_j = t_(j ^ 1); the
      // tables come piece by piece, 64 bytes of cos, then the same channels' t.
      const int8_t* tables_in = in.data() + dim + extra;
      const int n = 64 * rotated;
      std::vector<int8_t> cos(static_cast<size_t>(n)), sin(static_cast<size_t>(n)),
          p1(static_cast<size_t>(n)), p2(static_cast<size_t>(n));
      for (int j = 0; j < n; ++j) {
        cos[size_t(j)] = tables_in[128 * (j / 64) + j % 64];
        sin[size_t(j)] = tables_in[128 * ((j ^ 1) / 64) + 64 + (j ^ 1) % 64];
      }
      llm::rope_products(rq, q.data(), cos.data(), sin.data(), n, p1.data(), p2.data());
      for (int g = 0; g < rotated; ++g) {
        want.insert(want.end(), p1.begin() + 64 * g, p1.begin() + 64 * g + 64);
        for (int j = 64 * g; j < 64 * g + 64; ++j) want.push_back(p2[size_t(j ^ 1)]);
      }
      clamped +=
          int(std::count_if(p1.begin(), p1.end(), [](int8_t b) { return b == 127 || b == -127; }));
    }
    // Not a trivial output: the values spread over the int8 range.
    EXPECT_GT(
        *std::max_element(want.begin(), want.end()) - *std::min_element(want.begin(), want.end()),
        100);

    program->set_input(0, std::span(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
    tpu->run(nullptr, program);
    std::vector<int8_t> got(want.size());
    program->get_output(0, std::span(reinterpret_cast<uint8_t*>(got.data()), got.size()));
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i;
    if (rms) {
      float r = 0;
      program->get_output(1, std::span(reinterpret_cast<uint8_t*>(&r), sizeof r));
      const float want_r =
          llm::chip_rms_scale(sum.data(), rms_n, add.out.scale, add.out.zero_point);
      ASSERT_EQ(std::bit_cast<uint32_t>(r), std::bit_cast<uint32_t>(want_r));
      rs.push_back(r);
    }
  }
  if (rope) {
    EXPECT_GT(clamped, 0);  // some products at the clamps
  }
  if (rms) {
    EXPECT_NE(rs.front(), rs.back());  // r of each inference's bytes
  }
}

TEST(FfnChainOnTheChip, FfnThenTwoFollowersEqualTheInt8ArithmeticInEveryByte) {
  check_chain(false);
}

TEST(FfnChainOnTheChip, PairwiseAddAndW2OutputEqualTheInt8ArithmeticInEveryByte) {
  check_chain(true);
}

// The FCs of K = 120 over the 128 bytes of two input pieces (rand15M's K = 288 in 5 pieces).
TEST(FfnChainOnTheChip, FcsOfKNotAMultipleOf64HoldOnlyTheirWeightsAndEqualTheInt8Arithmetic) {
  check_chain(true, false, Variant::kShortK, true);
  check_chain(true, true, Variant::kShortK);
}

TEST(FfnChainOnTheChip, RopeProductsAfterTheFollowersEqualTheInt8RopeInEveryByte) {
  check_chain(true, true);
}

TEST(FfnChainOnTheChip, RotatedGroupsInTheSamePlacesShareTheirMulsWhateverTheirTablePieces) {
  check_chain(true, true, Variant::kMuls);
  check_chain(true, true, Variant::kSecondSlot);  // and a second slot's tables land apart
}

TEST(FfnChainOnTheChip, RmsScaleOfTheAddIsTheInt8PathsRBitForBit) {
  check_chain(true, false, Variant::kBytes, true);
  check_chain(true, true, Variant::kBytes, true);  // with RoPE's products after the followers
  check_chain(true, false, Variant::kBadRms);
}

TEST(FfnChainOnTheChip, ProductsPastATilesOutputRowsAreARejectedLayoutABadGroupIsNot) {
  check_chain(true, true, Variant::kTooManyPieces);
  check_chain(true, true, Variant::kBadGroup);
}

}  // namespace
}  // namespace tinycoral::testing
