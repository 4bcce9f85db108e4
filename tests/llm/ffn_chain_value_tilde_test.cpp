// v~ on the chip (issue 14 step B.2, compiler::FcChainAfterR): the chain program of the chip path's
// form (a layer's FFN, the residual add as follower 0 with r of its bytes on the scalar core, the
// next layer's q, k and v as follower 1) with v's groups' output stage waiting for r, their
// multipliers f32(base_j r) made on the scalar core from the r the program computed, zero point
// 0, clamps +-127. On both test checkpoints, every chained layer, four positions of a story, with
// the constants as immediates and resident: v's bytes are the int8 path's v~ under chip_residual
// (int8_residual.h's value_tilde) every byte, q's and k's the int8 path's, and r bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_value_write.h"
#include "compiler/ffn_parts.h"
#include "compiler/program_parts.h"
#include "isa/isa.h"
#include "llama2c_files.h"
#include "llm/int8_model.h"
#include "llm/int8_residual.h"
#include "llm/int8_rms.h"
#include "llm/matmul_plan.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu.h"
#include "runtime/program.h"
#include "support/chain_layers.h"
#include "support/error_of.h"
#include "support/sanitizers.h"

namespace tinycoral::testing {
namespace {

using llm::LayerMatmul;
using llm::QuantizedMatmul;

// The int8 arithmetic these chains compute: the whole layer's (chip_residual), which needs the
// value cache, RoPE and RMSNorm on the chip.
llm::Int8Options residual_options();

// Each reference checkpoint's config and its int8 weights under residual_options (calibrated over
// 4 positions): the set-up the joined programs' tests share.
void for_each_residual_model(
    const std::filesystem::path& data,
    const std::function<void(const llm::Config& c, const llm::Int8Weights& w)>& check) {
  for_each_reference_model(data, [&check](const std::string&, const LoadedModel& model) {
    llm::ThreadPool pool(2);
    const llm::Int8Weights w(model.ck, llm::calibrate(model.ck, pool, 4), residual_options());
    check(model.ck.config, w);
  });
}

llm::Int8Options residual_options() {
  llm::Int8Options options;
  options.weighted_sum = llm::WeightedSum::kValueCache;
  options.chip_rope = options.chip_rms = options.chip_residual = true;
  return options;
}

// The int8 path's bytes around each chain: the FFN's input and x2 (the chain's input), q and k of
// the next layer.
class TappedInt8 : public llm::Int8Transformer {
 public:
  using Int8Transformer::Int8Transformer;
  struct Layer {
    std::vector<int8_t> ffn_in, x2, x, q, k;  // x: q, k and v's input
  };
  std::vector<std::vector<Layer>> at;  // [pos][layer]
  int pos = 0;
  const int8_t* v_tilde(int layer, int t) const { return value_q(layer, t); }

 protected:
  Layer& layer_at(int layer) {
    at.resize(size_t(pos) + 1);
    at[size_t(pos)].resize(size_t(config().n_layers));
    return at[size_t(pos)][size_t(layer)];
  }
  void ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq,
                 int8_t* next) override {
    Layer& l = layer_at(layer);
    l.ffn_in.assign(xq, xq + matmul(layer, LayerMatmul::kW1).cols);
    l.x2.assign(x2q, x2q + config().dim);
    Int8Transformer::ffn_add_q(layer, xq, x2q, yq, next);
  }
  void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) override {
    Int8Transformer::qkv_q(layer, xq, q, k, v);
    Layer& l = layer_at(layer);
    l.x.assign(xq, xq + config().dim);
    l.q.assign(q, q + config().dim);
    l.k.assign(k, k + config().kv_dim());
  }
};

// v's groups of the q, k, v layer `q` (v from output v_at, kv_dim kv) waiting for r: v~'s output
// stage (zero point 0, the chip's 128, clamps +-127) with multipliers f32(base_j r); with
// `resident` (q's placement), each group's constants in the row after its `units` of parameters.
// The caller sets the layer.
compiler::FcChainAfterR wait_for_r(compiler::FcLayer& q, int v_at, int kv,
                                   const std::vector<float>& base,
                                   const compiler::FcPlacement* resident, int units) {
  compiler::FcChainAfterR after;
  for (int g = v_at / 64; g < compiler::fc_groups(q.n); ++g) {
    q.group_out_zp[size_t(g)] = 128;
    q.group_clamp_min[size_t(g)] = -llm::kSymmetricClamp;
    q.group_clamp_max[size_t(g)] = llm::kSymmetricClamp;
    after.groups.push_back(g);
    for (int j = 64 * g - v_at; j < 64 * g - v_at + 64; ++j) {
      after.base.push_back(j < kv ? base[size_t(j)] : 0.0f);
      after.padding.push_back(j >= kv);
    }
    if (resident) after.const_units.push_back(resident->param_units[size_t(g)] + units);
  }
  return after;
}

// Layer `layer`'s q, k and v as the chip path's follower: its plan over dim_padded inputs and
// where q, k and v lie in its outputs.
llm::FcProgramPlan qkv_plan(const llm::Int8Weights& w, int layer, int dim_padded,
                            std::array<int, 3>& out_at) {
  llm::FcProgramPlan qkv;
  qkv.k_padded = dim_padded;
  for (LayerMatmul m : {LayerMatmul::kQ, LayerMatmul::kK, LayerMatmul::kV}) {
    const int rows = w.matmul(layer, m).rows;
    out_at[size_t(m)] = qkv.outputs;
    qkv.segments.push_back({int(m), 0, rows, qkv.outputs});
    qkv.outputs += llm::whole_groups(rows);
  }
  return qkv;
}

// Layer `layer`'s chain as the chip path builds it (ChipTransformer::chain_ffn), v's groups after
// r (`resident`: their constants in a row after each group's parameters); where v's bytes and
// the segments' offsets lie in its output.
struct ValueChain {
  compiler::FfnChain chain;
  compiler::FcPlacement up_at, down_at;
  int k_padded = 0, dim_padded = 0;
  std::array<int, 3> out_at{};  // q, k, v in the q, k, v follower's outputs
};
// With `cache_at`, the value cache's groups of layer + 1 (heads x whole_groups(head_size), K =
// cache_k positions) are placed after them, each with one row more for its staging row; then
// `more` places what else the test runs beside the chain. With `add_first` the residual add's
// groups are placed before the FFN's, from tile 0 on (where a joined tail's e and multipliers
// pass).
ValueChain value_chain(const llm::Int8Weights& w, int layer, bool resident,
                       const std::vector<float>& base, compiler::FcPlacement* cache_at = nullptr,
                       int cache_k = 0,
                       const std::function<void(llm::TileAllocator&)>& more = nullptr,
                       bool add_first = false) {
  const llm::Config& c = w.config;
  const QuantizedMatmul &w1 = w.matmul(layer, LayerMatmul::kW1),
                        &w2 = w.matmul(layer, LayerMatmul::kW2);
  ValueChain v;
  v.k_padded = llm::whole_groups(w1.cols);
  v.dim_padded = llm::whole_groups(c.dim);
  const int hidden = llm::whole_groups(w1.rows);
  const auto of = [&](int l) {
    return [&w, l](int id) -> const QuantizedMatmul& { return w.matmul(l, LayerMatmul(id)); };
  };
  const llm::FfnPlan plan = llm::plan_ffn(v.k_padded, w1.rows, w2.rows);
  compiler::FfnLayer& f = v.chain.ffn;
  f.up = llm::fc_layer_of(plan.up, of(layer));
  f.down = llm::fc_layer_of(plan.down, of(layer));
  llm::set_ffn_gate(w.gates[size_t(layer)], f);
  const llm::FcProgramPlan qkv = qkv_plan(w, layer + 1, v.dim_padded, v.out_at);
  const int qkv_units = compiler::fc_units_per_tile(v.dim_padded, false);
  llm::TileAllocator tiles;
  compiler::FcPlacement add_at, qkv_at;
  const auto place_add = [&] {
    EXPECT_TRUE(tiles.place(compiler::fc_groups(v.dim_padded),
                            compiler::fc_units_per_tile(128, true), add_at));
  };
  if (add_first) place_add();
  EXPECT_TRUE(tiles.place_pairs(compiler::fc_groups(hidden),
                                compiler::fc_units_per_tile(v.k_padded, false), v.up_at));
  EXPECT_TRUE(tiles.place(compiler::fc_groups(w2.rows), compiler::fc_units_per_tile(hidden, false),
                          v.down_at));
  if (!add_first) place_add();
  // With resident constants each group takes one row more: its constants after its weights.
  EXPECT_TRUE(
      tiles.place(compiler::fc_groups(qkv.outputs), qkv_units + (resident ? 4 : 0), qkv_at));
  if (cache_at) {
    EXPECT_TRUE(tiles.place(c.n_heads * compiler::fc_groups(c.head_size()),
                            compiler::fc_units_per_tile(cache_k, false) + 4, *cache_at));
  }
  if (more) more(tiles);
  compiler::FcLayer q = llm::fc_layer_of(qkv, of(layer + 1));
  v.chain.after_r =
      wait_for_r(q, v.out_at[2], c.kv_dim(), base, resident ? &qkv_at : nullptr, qkv_units);
  v.chain.after_r.layer = 1;
  const llm::QParams in = w.matmul(layer + 1, LayerMatmul::kQ).in;
  v.chain.extra_k = v.dim_padded;
  v.chain.next = {llm::residual_add_layer(w.adds[size_t(layer)], c.dim), q};
  v.chain.next_at = {add_at, qkv_at};
  v.chain.next_output = {false, true};
  v.chain.output_down = true;
  v.chain.pairwise = true;
  v.chain.rms = {0, c.dim, in.zero_point + 128, llm::rms_mean_multiplier(in.scale, c.dim), "r"};
  return v;
}

TEST(FfnChainOnTheChip, ValueTildeFromWvsOutputStageIsTheInt8PathsEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string&, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Config& c = ck.config;
    llm::ThreadPool pool(2);
    const llm::Calibration cal = llm::calibrate(ck, pool, 8);
    const llm::Int8Options options = residual_options();
    TappedInt8 cpu(ck, pool, cal, options);
    const llm::Int8Weights& w = *cpu.weights();
    constexpr int kPositions = 4;
    const int tokens[kPositions] = {llm::kBos, 403, 2501, 29889};
    for (int pos = 0; pos < kPositions; ++pos) {
      cpu.pos = pos;
      cpu.forward(tokens[pos] % c.vocab_size, pos);
    }
    const int kv = c.kv_dim();
    auto chip = std::make_shared<chip::VirtualEdgeTpu>();
    auto tpu = runtime::open_virtual_edgetpu({}, chip);
    std::vector<size_t> immediate_bytes;  // [layer]
    for (const bool resident : {false, true}) {
      SCOPED_TRACE(resident ? "constants resident" : "constants as immediates");
      int distinct_r = 0;
      for (int layer = 0; layer + 1 < c.n_layers; ++layer) {
        SCOPED_TRACE("layer " + std::to_string(layer));
        const std::vector<float>& base = w.attention[size_t(layer + 1)].v_base;
        ASSERT_EQ(base.size(), size_t(kv));
        const ValueChain v = value_chain(w, layer, resident, base);
        const compiler::FfnChainPrograms code =
            compiler::generate_ffn_chain(v.chain, v.up_at, v.down_at);
        // The resident constants take the loop over them: fewer instruction bytes.
        const size_t bytes = code.execution.bitstreams.at(0).data.size();
        if (resident) {
          EXPECT_LT(bytes, immediate_bytes.at(size_t(layer)));
        } else {
          immediate_bytes.push_back(bytes);
        }
        for (const container::Executable& e : code.caching)
          tpu->run(nullptr, std::make_shared<runtime::Program>(e));
        auto program = std::make_shared<runtime::Program>(code.execution);
        const QuantizedMatmul& w1 = w.matmul(layer, LayerMatmul::kW1);
        float last_r = 0;
        for (int pos = 0; pos < kPositions; ++pos) {
          SCOPED_TRACE("position " + std::to_string(pos));
          const TappedInt8::Layer& t = cpu.at.at(size_t(pos)).at(size_t(layer));
          // The chain's input as the chip path's: the FFN's input, then x2, padded with their
          // zero points (zero weights meet them).
          std::vector<int8_t> in(size_t(v.k_padded + v.dim_padded));
          std::fill(in.begin(), in.begin() + v.k_padded, static_cast<int8_t>(w1.in.zero_point));
          std::copy(t.ffn_in.begin(), t.ffn_in.end(), in.begin());
          std::fill(in.begin() + v.k_padded, in.end(),
                    static_cast<int8_t>(w.adds[size_t(layer)].x.zero_point));
          std::copy(t.x2.begin(), t.x2.end(), in.begin() + v.k_padded);
          ASSERT_EQ(program->input_bytes(0), in.size());
          program->set_input(0, std::span(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
          tpu->run(nullptr, program);
          std::vector<int8_t> out(program->output_bytes(0));
          program->get_output(0, std::span(reinterpret_cast<uint8_t*>(out.data()), out.size()));
          const int8_t* qkv = out.data() + v.dim_padded;
          const TappedInt8::Layer& next = cpu.at[size_t(pos)].at(size_t(layer + 1));
          const int8_t* want = cpu.v_tilde(layer + 1, pos);
          for (int j = 0; j < kv; ++j)
            ASSERT_EQ(int(qkv[v.out_at[2] + j]), int(want[j])) << "v~ byte " << j;
          for (int j = 0; j < c.dim; ++j)
            ASSERT_EQ(int(qkv[v.out_at[0] + j]), int(next.q[size_t(j)])) << "q byte " << j;
          for (int j = 0; j < kv; ++j)
            ASSERT_EQ(int(qkv[v.out_at[1] + j]), int(next.k[size_t(j)])) << "k byte " << j;
          // Not a trivial output: v~ spreads over the int8 range.
          const auto [lo, hi] = std::minmax_element(want, want + kv);
          EXPECT_GT(*hi - *lo, 60);
          float r = 0;
          program->get_output(1, std::span(reinterpret_cast<uint8_t*>(&r), sizeof r));
          const float want_r = cpu.rms_scale_at(layer + 1, pos);
          ASSERT_EQ(std::bit_cast<uint32_t>(r), std::bit_cast<uint32_t>(want_r));
          // The multipliers themselves (the bytes hide a multiplier an ulp off): each v group's
          // multiplier row holds f32(base_j r), 0 past kv_dim.
          const compiler::FcChainAfterR& after = v.chain.after_r;
          const compiler::FcPlacement& at = v.chain.next_at[1];
          for (size_t k = 0; k < after.groups.size(); ++k) {
            const size_t g = size_t(after.groups[k]);
            const auto& wide = chip->tile(at.tiles[g]).wide;
            for (int j = 0; j < 64; ++j) {
              const int channel = 64 * int(k) + j;
              uint32_t bits = 0;
              std::memcpy(&bits, &wide[size_t(64 * at.param_units[g] + 4 * j)], 4);
              const float m =
                  channel < kv ? llm::per_token_multiplier(base[size_t(channel)], want_r) : 0.0f;
              ASSERT_EQ(bits, std::bit_cast<uint32_t>(m)) << "v~ channel " << channel;
            }
          }
          distinct_r += r != last_r;
          last_r = r;
        }
      }
      // Each position's own r (the multipliers are per token).
      EXPECT_EQ(distinct_r, (c.n_layers - 1) * kPositions);
    }
  });
}

// The value cache of ValueChain's layer + 1 where value_chain placed it (`at`): K = `positions`,
// one group per head and 64 channels (head h's groups read e from h * positions, as the weighted
// sum's), random bytes first (what earlier sequences left), each group staging in the row after
// its weights; its write at position 0 (fc_value_write). As a sum's weights: e's zero point 0,
// the multipliers made per token, spread per channel (0 for the padding channels).
struct ValueCache {
  compiler::FcValueSum sum;
  compiler::FcValueWrite write;
  uint32_t tiles = 0;
};
ValueCache value_cache(const llm::Config& c, const compiler::FcPlacement& at, int positions,
                       std::mt19937& random) {
  const int hs = c.head_size(), head_groups = compiler::fc_groups(hs);
  ValueCache v;
  compiler::FcLayer& l = v.sum.layer;
  l.n = 64 * c.n_heads * head_groups;
  l.k = positions;
  l.weights.resize(size_t(l.n) * size_t(l.k));
  for (auto& b : l.weights) b = static_cast<int8_t>(static_cast<int>(random() % 256) - 128);
  l.mult.assign(size_t(l.n), 0.0f);
  l.in_zp = 0;
  l.in_scale = 1.0f / 255.0f;
  l.out_zp = 128;
  l.out_scale = 1.0f;
  l.clamp_min = compiler::fc_clamp(1, 128, 1.0f);
  l.clamp_max = compiler::fc_clamp(255, 128, 1.0f);
  l.input_name = "e";
  l.output_name = "a";
  l.signed_input = l.signed_output = false;
  v.sum.at = at;
  v.sum.at.in_at.clear();
  std::vector<int> staging;
  for (size_t g = 0; g < at.tiles.size(); ++g) {
    const int h = int(g) / head_groups, from = 64 * (int(g) % head_groups);
    v.sum.at.in_at.push_back(h * positions);
    for (int j = 0; j < 64; ++j) {
      v.sum.mult_head.push_back(from + j < hs ? h : -1);
      v.sum.mult_base.push_back((0.5f + 0.25f * float(j % 11)) / 255.0f);
    }
    staging.push_back(at.param_units[g] + compiler::fc_units_per_tile(positions, false));
    v.tiles |= compiler::tile_bit(at.tiles[g]);
  }
  v.write = compiler::fc_value_write(l, at, staging, 0);
  return v;
}

// B.3's tail after a chain: v~'s pieces (`groups` of the chain's layer `layer`, v's groups after
// r, where the chain left them) broadcast side by side above the chain's narrow bytes to the
// cache's tiles, each group's window into its staging row, the landings, then the program's end.
// Sets cache.write's places (from_byte, narrow_at) and `pieces` when the generator runs it. Its
// input: a 64-byte block with r at its bytes 4..7, for a chain that takes r from it (FcChain).
compiler::FfnChainTail value_write_tail(int layer, const std::vector<int>& groups,
                                        const llm::Config& c, ValueCache& cache,
                                        std::vector<std::pair<int, int>>& pieces) {
  compiler::FfnChainTail tail;
  tail.input_bytes = 64;
  tail.r_block = 0;
  tail.emit = [layer, &groups, &c, &cache, &pieces](compiler::Emitter& e, int& ordinal,
                                                    const compiler::FfnChainTailAt& at) {
    compiler::FcValueWrite& vw = cache.write;
    for (const int g : groups) {
      const auto [tile, byte] = at.follower_out.at(size_t(layer)).at(size_t(g));
      pieces.emplace_back(tile, byte / 4);
    }
    const int base = (at.narrow_end + 63) / 64 * 64;
    const compiler::ValueVectorsSideBySide side =
        compiler::value_vectors_side_by_side(c.n_heads, c.n_kv_heads, c.head_size(), base);
    vw.from_byte = side.from_byte;
    vw.narrow_at = (side.end + 255) / 256 * 256;
    compiler::emit_value_copies(e, vw);
    compiler::ffn_broadcast(e, cache.tiles, pieces, ordinal, base);
    compiler::emit_value_vectors_from_narrow(e, vw);
    compiler::emit_value_landings(e, vw);
    compiler::tile_fence(e, "units=0x3ff signal=1 f109=3");
    compiler::wait_tokens(e);
    compiler::interrupt(e, 5, 4, 6);
    return compiler::fc_value_write_narrow_bytes(vw);
  };
  return tail;
}

// The write's marked fields (2 a group from marks[from], fc_value_write_fields' order) set for
// position `pos`: each moves from the value its program was generated with as the write's fields
// move from w.position to pos, wherever the generator put the quads.
void patch_value_fields(runtime::Program& p, const std::vector<isa::EncodedField>& marks,
                        size_t from, const compiler::FcValueWrite& w, int pos) {
  const std::vector<int64_t> at = compiler::fc_value_write_fields(w, w.position),
                             to = compiler::fc_value_write_fields(w, pos);
  ASSERT_GE(marks.size(), from + at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    const isa::EncodedField& m = marks[from + i];
    p.patch_field(0, m.offset_bit, m.width, uint64_t(m.value + to[i] - at[i]));
  }
}

// Layer 0's q, k and v as the chip path's first program (FcChain) placed by `tiles`, v's groups
// after r (FcChain::after_r; `resident`: their constants in a row after each group's
// parameters); where q, k and v lie in its output.
compiler::FcChain layer_zero_chain(const llm::Int8Weights& w, bool resident,
                                   llm::TileAllocator& tiles, std::array<int, 3>& out_at) {
  const int dim_padded = llm::whole_groups(w.config.dim);
  const llm::FcProgramPlan plan = qkv_plan(w, 0, dim_padded, out_at);
  const int units = compiler::fc_units_per_tile(dim_padded, false);
  compiler::FcChain chain;
  chain.at.resize(1);
  EXPECT_TRUE(
      tiles.place(compiler::fc_groups(plan.outputs), units + (resident ? 4 : 0), chain.at[0]));
  chain.layers = {llm::fc_layer_of(
      plan, [&w](int id) -> const QuantizedMatmul& { return w.matmul(0, LayerMatmul(id)); })};
  chain.output = {true};
  chain.after_r = wait_for_r(chain.layers[0], out_at[2], w.config.kv_dim(), w.attention[0].v_base,
                             resident ? &chain.at[0] : nullptr, units);
  chain.after_r.layer = 0;
  return chain;
}

// Layer 0's form with v~ (FcChain::after_r, the prep of B.3's layer 0): the chip path's first
// program (generate_fc_chain: q, k and v of layer 0, no RMSNorm on the chip) with v's groups
// waiting for r, which the host sends in a 64-byte block after the input (where the joined
// program's count block carries it). Both test checkpoints, four positions of a story, the
// constants as immediates and resident: v's bytes are the int8 path's v~ under chip_residual
// every byte, q's and k's its q and k, and each v group's multiplier row f32(base_j r).
TEST(FfnChainOnTheChip, LayerZerosValueTildeWithRFromTheInputIsTheInt8PathsEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string&, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Config& c = ck.config;
    llm::ThreadPool pool(2);
    TappedInt8 cpu(ck, pool, llm::calibrate(ck, pool, 8), residual_options());
    const llm::Int8Weights& w = *cpu.weights();
    constexpr int kPositions = 4;
    const int tokens[kPositions] = {llm::kBos, 403, 2501, 29889};
    for (int pos = 0; pos < kPositions; ++pos) {
      cpu.pos = pos;
      cpu.forward(tokens[pos] % c.vocab_size, pos);
    }
    const int dim_padded = llm::whole_groups(c.dim), kv = c.kv_dim();
    const std::vector<float>& base = w.attention[0].v_base;
    const llm::QParams in = w.matmul(0, LayerMatmul::kQ).in;
    auto chip = std::make_shared<chip::VirtualEdgeTpu>();
    auto tpu = runtime::open_virtual_edgetpu({}, chip);
    std::vector<size_t> bytes;  // immediates, resident
    for (const bool resident : {false, true}) {
      SCOPED_TRACE(resident ? "constants resident" : "constants as immediates");
      llm::TileAllocator tiles;
      std::array<int, 3> out_at{};
      const compiler::FcChain chain = layer_zero_chain(w, resident, tiles, out_at);
      const compiler::FfnChainPrograms code = compiler::generate_fc_chain(chain);
      bytes.push_back(code.execution.bitstreams.at(0).data.size());
      for (const container::Executable& e : code.caching)
        tpu->run(nullptr, std::make_shared<runtime::Program>(e));
      auto program = std::make_shared<runtime::Program>(code.execution);
      for (int pos = 0; pos < kPositions; ++pos) {
        SCOPED_TRACE("position " + std::to_string(pos));
        const TappedInt8::Layer& t = cpu.at.at(size_t(pos)).at(0);
        // x padded with its zero point, then r's block last: r at its bytes 4..7 as the chip
        // must see them (the runtime flips every byte of the int8 input).
        std::vector<uint8_t> x(program->input_bytes(0), 0);
        for (int i = 0; i < dim_padded; ++i)
          x[size_t(i)] = uint8_t(i < c.dim ? t.x[size_t(i)] : int8_t(in.zero_point));
        const float want_r = cpu.rms_scale_at(0, pos);
        const size_t r_at = x.size() - 64 + 4;
        for (int i = 0; i < 4; ++i)
          x[r_at + size_t(i)] = uint8_t(std::bit_cast<uint32_t>(want_r) >> 8 * i) ^ 0x80u;
        std::vector<uint8_t> out8 = all_outputs_of(*tpu, program, x);
        const int8_t* out = reinterpret_cast<const int8_t*>(out8.data());
        const int8_t* want = cpu.v_tilde(0, pos);
        for (int j = 0; j < kv; ++j)
          ASSERT_EQ(int(out[out_at[2] + j]), int(want[j])) << "v~ byte " << j;
        for (int j = 0; j < c.dim; ++j)
          ASSERT_EQ(int(out[out_at[0] + j]), int(t.q[size_t(j)])) << "q byte " << j;
        for (int j = 0; j < kv; ++j)
          ASSERT_EQ(int(out[out_at[1] + j]), int(t.k[size_t(j)])) << "k byte " << j;
        const auto [lo, hi] = std::minmax_element(want, want + kv);
        EXPECT_GT(*hi - *lo, 60);
        for (size_t k = 0; k < chain.after_r.groups.size(); ++k) {
          const size_t g = size_t(chain.after_r.groups[k]);
          const auto& wide = chip->tile(chain.at[0].tiles[g]).wide;
          for (int j = 0; j < 64; ++j) {
            const int channel = 64 * int(k) + j;
            uint32_t bits = 0;
            std::memcpy(&bits, &wide[size_t(64 * chain.at[0].param_units[g] + 4 * j)], 4);
            const float m =
                channel < kv ? llm::per_token_multiplier(base[size_t(channel)], want_r) : 0.0f;
            ASSERT_EQ(bits, std::bit_cast<uint32_t>(m)) << "v~ channel " << channel;
          }
        }
      }
    }
    // The resident constants take the loop over them: fewer instruction bytes.
    EXPECT_LT(bytes[1], bytes[0]);
  });
}

// B.3's write in the chain's tail (FfnChainTail): v~'s pieces, where v's follower left them, are
// broadcast side by side to the value cache's tiles (value_vectors_side_by_side) and written into
// each head group's cache rows (FcValueWrite from narrow memory), one program patched per position
// through its marks. Both checkpoints, every chained layer, six positions (past a quad, so the
// cache row's marked address moves too): every channel of every head's rows up to the position is
// the int8 path's v~ of its kv head (+ 128).
TEST(FfnChainOnTheChip, ValueTildeWrittenByTheChainsTailIsTheInt8PathsCache) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_reference_model(data, [](const std::string&, const LoadedModel& model) {
    const llm::Checkpoint& ck = model.ck;
    const llm::Config& c = ck.config;
    llm::ThreadPool pool(2);
    const llm::Calibration cal = llm::calibrate(ck, pool, 8);
    const llm::Int8Options options = residual_options();
    TappedInt8 cpu(ck, pool, cal, options);
    const llm::Int8Weights& w = *cpu.weights();
    constexpr int kPositions = 6, kCacheK = 64;
    const int tokens[kPositions] = {llm::kBos, 403, 2501, 29889, 306, 1183};
    for (int pos = 0; pos < kPositions; ++pos) {
      cpu.pos = pos;
      cpu.forward(tokens[pos] % c.vocab_size, pos);
    }
    const int hs = c.head_size(), head_groups = compiler::fc_groups(hs);
    const int per_kv = c.n_heads / c.n_kv_heads;
    auto chip = std::make_shared<chip::VirtualEdgeTpu>();
    auto tpu = runtime::open_virtual_edgetpu({}, chip);
    std::mt19937 random(41);
    for (int layer = 0; layer + 1 < c.n_layers; ++layer) {
      SCOPED_TRACE("layer " + std::to_string(layer));
      compiler::FcPlacement cache_at;
      const ValueChain v =
          value_chain(w, layer, true, w.attention[size_t(layer + 1)].v_base, &cache_at, kCacheK);
      ValueCache cache = value_cache(c, cache_at, kCacheK, random);
      const compiler::FcValueWrite& vw = cache.write;
      std::vector<std::pair<int, int>> pieces;
      const compiler::FfnChainTail tail =
          value_write_tail(1, v.chain.after_r.groups, c, cache, pieces);
      const compiler::FfnChainPrograms code =
          compiler::generate_ffn_chain(v.chain, v.up_at, v.down_at, &tail);
      ASSERT_EQ(pieces.size(), size_t(compiler::fc_groups(c.kv_dim())));
      ASSERT_EQ(code.marks.size(), 2 * cache_at.tiles.size());
      for (const container::Executable& e : code.caching)
        tpu->run(nullptr, std::make_shared<runtime::Program>(e));
      tpu->run(nullptr,
               std::make_shared<runtime::Program>(compiler::fc_caching(cache.sum.layer, cache_at)));
      auto program = std::make_shared<runtime::Program>(code.execution);
      const QuantizedMatmul& w1 = w.matmul(layer, LayerMatmul::kW1);
      for (int pos = 0; pos < kPositions; ++pos) {
        SCOPED_TRACE("position " + std::to_string(pos));
        patch_value_fields(*program, code.marks, 0, vw, pos);
        const TappedInt8::Layer& t = cpu.at.at(size_t(pos)).at(size_t(layer));
        std::vector<int8_t> in(program->input_bytes(0));
        std::fill(in.begin(), in.begin() + v.k_padded, static_cast<int8_t>(w1.in.zero_point));
        std::copy(t.ffn_in.begin(), t.ffn_in.end(), in.begin());
        std::fill(in.begin() + v.k_padded, in.begin() + v.k_padded + v.dim_padded,
                  static_cast<int8_t>(w.adds[size_t(layer)].x.zero_point));
        std::copy(t.x2.begin(), t.x2.end(), in.begin() + v.k_padded);
        program->set_input(0, std::span(reinterpret_cast<const uint8_t*>(in.data()), in.size()));
        tpu->run(nullptr, program);
        for (size_t g = 0; g < cache_at.tiles.size(); ++g) {
          const int h = int(g) / head_groups, j = int(g) % head_groups, kv = h / per_kv;
          const auto& wide = chip->tile(cache_at.tiles[g]).wide;
          for (int p = 0; p <= pos; ++p) {
            const int8_t* want = cpu.v_tilde(layer + 1, p) + kv * hs + 64 * j;
            const int row = vw.cache_units[g] + 4 * (p / 4);
            for (int ch = 0; ch < 64 && 64 * j + ch < hs; ++ch)
              ASSERT_EQ(int(wide[size_t(64 * row + 4 * ch + p % 4)]), int(want[ch]) + 128)
                  << "head " << h << ", group " << j << ", channel " << ch << ", position " << p;
          }
        }
      }
    }
  });
}

// A chain with v after r and what the joined tests run beside it (check_joined_value_write): the
// value cache's and the scores' placements, where v~'s pieces are, the chain's own input bytes,
// and the chain generated with a tail (B.3's write alone) and joined (generate_*_chain_softmax).
struct JoinedValueWrite {
  compiler::FcPlacement cache_at, scores_at;
  int v_layer = 0;
  std::vector<int> v_groups;
  int chain_in = 0;
  std::function<compiler::FfnChainPrograms(const compiler::FfnChainTail&)> apart;
  std::function<compiler::FfnChainPrograms(const ScoresLayer&, int row_bytes,
                                           const compiler::FcValueSum&,
                                           const compiler::FcChainValueWrite&)>
      joined;
};

// B.3's write inside the joined program (`values` of generate_ffn_chain_softmax and
// generate_fc_chain_softmax): the chain, then in its tail v~ written into the value cache, the
// scores (a random layer over 128 positions, the host's row), the softmax and the weighted sum
// over that cache. On a chip of its own, the programs apart: the chain with B.3's tail writing v~
// (value_write_tail), then the attention program (generate_fc_batch_attention) with the same row;
// each program generated once at position 0 and patched per position through its marks. At n =
// 1, 4, 5, 64 and 65 (a staging row's quad and a 64-position boundary crossed, one cache history
// on both chips), scalar memory left by the attention program at another position before each
// joined run: every byte the joined program returns (the chain's outputs, [r,] the sums) is the
// programs', and the cache rows and staging rows are the same bytes on both chips. r (bytes 4..7
// of the count block, and of B.3's tail's block) is read only by a chain that takes it from there.
void check_joined_value_write(const llm::Config& c, const JoinedValueWrite& t,
                              std::mt19937& random) {
  constexpr int kPositions = 128;
  const int hs = c.head_size();
  // The scores: head h reads 64 bytes of the row from h x head_size.
  const int row_bytes = ((c.n_heads - 1) * hs + 64 + 63) / 64 * 64;
  const ScoresLayer scores = scores_layer(
      {c.n_heads, kPositions, 64, hs, hs, 110,
       [](int o) { return 0.0006f + 0.0002f * float(o % 5); },
       [](int h) { return 0.02f + 0.01f * float(h); }, t.scores_at.tiles, t.scores_at.param_units},
      random);
  ValueCache cache = value_cache(c, t.cache_at, kPositions, random);
  const compiler::FcValueSum& sum = cache.sum;
  std::vector<std::pair<int, int>> pieces;
  const compiler::FfnChainTail tail = value_write_tail(t.v_layer, t.v_groups, c, cache, pieces);
  const compiler::FfnChainPrograms apart = t.apart(tail);
  compiler::FcChainValueWrite values{cache.write, t.v_layer, t.v_groups};
  values.write.from_byte =
      compiler::value_vectors_side_by_side(c.n_heads, c.n_kv_heads, hs, 0).from_byte;
  const compiler::FfnChainPrograms joined = t.joined(scores, row_bytes, sum, values);
  const container::Executable attention =
      compiler::generate_fc_batch_attention(scores.layer, scores.at, row_bytes, scores.exp_mult,
                                            sum, {})
          .execution;
  // The write's marks, the cache rows' w.addr at position 0 its rows' units.
  const size_t groups = t.cache_at.tiles.size();
  ASSERT_EQ(joined.marks.size(), 2 * groups);
  for (size_t g = 0; g < groups; ++g)
    EXPECT_EQ(joined.marks[groups + g].value, cache.write.cache_units[g]);

  // Each chip: the chain's, the scores' and the cache's parameters (the same random cache).
  struct Chip {
    std::shared_ptr<chip::VirtualEdgeTpu> chip = std::make_shared<chip::VirtualEdgeTpu>();
    std::unique_ptr<runtime::EdgeTpu> tpu = runtime::open_virtual_edgetpu({}, chip);
    std::shared_ptr<runtime::Program> attention;
  };
  Chip apart_chip, joined_chip;
  for (Chip* x : {&apart_chip, &joined_chip}) {
    for (const container::Executable& e : apart.caching)
      x->tpu->run(nullptr, std::make_shared<runtime::Program>(e));
    x->tpu->run(nullptr,
                std::make_shared<runtime::Program>(compiler::fc_caching(scores.layer, scores.at)));
    x->tpu->run(nullptr,
                std::make_shared<runtime::Program>(compiler::fc_caching(sum.layer, t.cache_at)));
    x->attention = std::make_shared<runtime::Program>(attention);
  }
  auto chain_p = std::make_shared<runtime::Program>(apart.execution);
  auto joined_p = std::make_shared<runtime::Program>(joined.execution);
  const size_t row_at = (size_t(t.chain_in) + 255) / 256 * 256;
  ASSERT_EQ(chain_p->input_bytes(0), row_at + size_t(compiler::kSoftmaxCountBytes));
  ASSERT_EQ(joined_p->input_bytes(0), row_at + size_t(row_bytes + compiler::kSoftmaxCountBytes));
  // A block of `row` then the count block as the chip must see n and r (the runtime flips int8
  // input bytes).
  const auto count_after = [](std::vector<uint8_t> in, int n, float r) {
    const size_t at = in.size();
    in.resize(at + size_t(compiler::kSoftmaxCountBytes), 0);
    for (int i = 0; i < 4; ++i) {
      in[at + size_t(i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
      in[at + 4 + size_t(i)] = uint8_t(std::bit_cast<uint32_t>(r) >> 8 * i) ^ 0x80u;
    }
    return in;
  };
  std::set<std::vector<uint8_t>> sums;
  const std::vector<int> counts = {1, 4, 5, 64, 65};
  for (const int n : counts) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<uint8_t> in(size_t(t.chain_in)), row(static_cast<size_t>(row_bytes));
    for (uint8_t& b : in) b = static_cast<uint8_t>(random() % 255 + 1);
    for (uint8_t& b : row) b = static_cast<uint8_t>(random() % 255 + 1);
    in.resize(row_at, 0);
    const float r = 0.6f + 0.1f * float(n % 7);
    patch_value_fields(*chain_p, apart.marks, 0, cache.write, n - 1);
    std::vector<uint8_t> want = all_outputs_of(*apart_chip.tpu, chain_p, count_after(in, n, r));
    const std::vector<uint8_t> want_sum =
        all_outputs_of(*apart_chip.tpu, apart_chip.attention, count_after(row, n, r));
    want.insert(want.end(), want_sum.begin(), want_sum.end());
    (void)all_outputs_of(*joined_chip.tpu, joined_chip.attention,
                         count_after(row, n % 64 + 1, 2 * r));
    patch_value_fields(*joined_p, joined.marks, 0, cache.write, n - 1);
    in.insert(in.end(), row.begin(), row.end());
    const std::vector<uint8_t> got =
        all_outputs_of(*joined_chip.tpu, joined_p, count_after(in, n, r));
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
    // The same cache and staging rows: every row of every group.
    for (size_t g = 0; g < groups; ++g) {
      const auto& a = apart_chip.chip->tile(t.cache_at.tiles[g]).wide;
      const auto& b = joined_chip.chip->tile(t.cache_at.tiles[g]).wide;
      const size_t from = 64 * size_t(t.cache_at.param_units[g]);
      const size_t to = 64 * size_t(cache.write.vectors.rows[g].unit + 4);
      ASSERT_TRUE(std::equal(a.begin() + long(from), a.begin() + long(to), b.begin() + long(from)))
          << "cache group " << g;
    }
    // Not trivial: the sums spread, and each position's differ.
    EXPECT_GT(std::set<uint8_t>(want_sum.begin(), want_sum.end()).size(), size_t(16));
    sums.insert(want_sum);
  }
  EXPECT_EQ(sums.size(), counts.size());
}

// The value cache's groups (one row more each for its staging row) and the scores' groups of
// check_joined_value_write, placed after the chain's.
void place_cache_and_scores(const llm::Config& c, llm::TileAllocator& tiles, JoinedValueWrite& t) {
  EXPECT_TRUE(tiles.place(c.n_heads * compiler::fc_groups(c.head_size()),
                          compiler::fc_units_per_tile(128, false) + 4, t.cache_at));
  EXPECT_TRUE(tiles.place(c.n_heads * 2, compiler::fc_units_per_tile(64, false), t.scores_at));
}

// After the chip path's chain (layer 0's FFN, the add with r, layer 1's q, k and v with v after
// r, constants resident): generate_ffn_chain_softmax with the write and the sum.
TEST(FfnChainOnTheChip, ValueWriteAndSumInTheJoinedProgramEqualTheProgramsApartBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    JoinedValueWrite t;
    const ValueChain v =
        value_chain(w, 0, true, w.attention[1].v_base, nullptr, 0,
                    [&](llm::TileAllocator& tiles) { place_cache_and_scores(c, tiles, t); });
    t.v_layer = 1;
    t.v_groups = v.chain.after_r.groups;
    t.chain_in = v.k_padded + v.dim_padded;
    t.apart = [&](const compiler::FfnChainTail& tail) {
      return compiler::generate_ffn_chain(v.chain, v.up_at, v.down_at, &tail);
    };
    t.joined = [&](const ScoresLayer& s, int row_bytes, const compiler::FcValueSum& sum,
                   const compiler::FcChainValueWrite& values) {
      return compiler::generate_ffn_chain_softmax(v.chain, v.up_at, v.down_at, s.layer, s.at,
                                                  row_bytes, s.exp_mult, nullptr, nullptr, {}, &sum,
                                                  &values);
    };
    std::mt19937 random(71);
    check_joined_value_write(c, t, random);
  });
}

// Layer 0's form (the chip path's first program, FcChain::after_r): q, k and v of layer 0 with v
// after r, r the host's in the count block (the chain's and the scores' in the joined program):
// generate_fc_chain_softmax with the write and the sum.
TEST(FfnChainOnTheChip, ValueWriteAndSumAfterLayerZerosChainEqualTheProgramsApartBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    llm::TileAllocator tiles;
    std::array<int, 3> out_at{};
    const compiler::FcChain chain = layer_zero_chain(w, true, tiles, out_at);
    JoinedValueWrite t;
    place_cache_and_scores(c, tiles, t);
    t.v_layer = 0;
    t.v_groups = chain.after_r.groups;
    t.chain_in = llm::whole_groups(c.dim);
    t.apart = [&](const compiler::FfnChainTail& tail) {
      return compiler::generate_fc_chain(chain, &tail);
    };
    t.joined = [&](const ScoresLayer& s, int row_bytes, const compiler::FcValueSum& sum,
                   const compiler::FcChainValueWrite& values) {
      return compiler::generate_fc_chain_softmax(chain, s.layer, s.at, row_bytes, s.exp_mult,
                                                 nullptr, nullptr, {}, &sum, &values);
    };
    std::mt19937 random(79);
    check_joined_value_write(c, t, random);
  });
}

// A random wo after the weighted sum (FcValueSum::out): K = the sum's outputs (uint8, zero point
// 128), dim outputs padded to whole groups on o's grid (`o`: the attention add's f).
compiler::FcLayer random_wo(int k, int dim, llm::QParams o, std::mt19937& random) {
  compiler::FcLayer l;
  l.n = llm::whole_groups(dim);
  l.k = k;
  for (int i = 0; i < l.n * l.k; ++i)
    l.weights.push_back(static_cast<int8_t>(static_cast<int>(random() % 255) - 127));
  for (int j = 0; j < l.n; ++j) l.mult.push_back(0.0004f + 0.0001f * float(j % 7));
  l.in_zp = 128;
  l.in_scale = 1.0f / 255.0f;
  l.out_zp = o.zero_point + 128;
  l.out_scale = o.scale;
  l.clamp_min = float(-128 - o.zero_point);
  l.clamp_max = float(127 - o.zero_point);
  l.input_name = "a";
  l.output_name = "o";
  l.signed_input = false;
  l.signed_output = true;
  return l;
}

// D.1a, the layer's rest after wo in the joined tail (compiler::FcLayerRest): the chip path's
// chain of layer 0 joined with layer 1's attention (the value write, the scores over 128
// positions, the softmax, the sum, a random wo), then x2 = the attention's residual add of x_q
// (the chain's follower 0, which the tail would overwrite) and wo's output o, r_ffn of x2 on the
// scalar core and the FFN's input through the diagonal FC with multipliers from r_ffn. Both
// checkpoints' shapes, at n = 1, 4, 5, 64, 65 with random input bytes: every byte of x2 and of
// the FFN input is the int8 path's (residual_add of the chain's x_q and the returned o,
// rms_input_scale, rms_input), and every other output byte is the joined program's without the
// rest, run on a chip of its own.
// What the layer's rest's tests share (D.1a, D.1b): the chip path's chain of layer 0 with the
// value write, layer 1's scores over 128 positions, its sum, a random wo and the rest of layer 1
// (its attention add and FFN input norm), placed after the chain's; the add first, from tile 0 on.
struct RestCase {
  ValueChain v;
  JoinedValueWrite t;
  compiler::FcPlacement wo_at, add_at, norm_at;
  std::mt19937 random{89};
  int row_bytes = 0;
  ScoresLayer scores;
  ValueCache cache;
  compiler::FcValueSum sum;
  compiler::FcChainValueWrite values;
  compiler::FcLayerRest rest;
  // The joined program with the rest `r` (none: null).
  compiler::FfnChainPrograms joined(const compiler::FcLayerRest* r) const {
    return compiler::generate_ffn_chain_softmax(v.chain, v.up_at, v.down_at, scores.layer,
                                                scores.at, row_bytes, scores.exp_mult, nullptr,
                                                nullptr, {}, &sum, &values, r);
  }
  // The joined program's input at n positions: random chain input and row, then the count block.
  std::vector<uint8_t> input(int n) {
    const int chain_in = v.k_padded + v.dim_padded;
    std::vector<uint8_t> in(static_cast<size_t>(chain_in));
    for (uint8_t& b : in) b = static_cast<uint8_t>(random() % 255 + 1);
    in.resize((size_t(chain_in) + 255) / 256 * 256, 0);
    for (int i = 0; i < row_bytes; ++i) in.push_back(static_cast<uint8_t>(random() % 255 + 1));
    in.resize(in.size() + size_t(compiler::kSoftmaxCountBytes), 0);
    const size_t count = in.size() - size_t(compiler::kSoftmaxCountBytes);
    for (int i = 0; i < 4; ++i) in[count + size_t(i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
    return in;
  }
};

// `more` places what else the test runs after the rest case's groups.
void rest_case(const llm::Config& c, const llm::Int8Weights& w, RestCase& k,
               const std::function<void(llm::TileAllocator&)>& more = nullptr) {
  const int dim_padded = llm::whole_groups(c.dim), groups = compiler::fc_groups(c.dim);
  const int sum_n = 64 * c.n_heads * compiler::fc_groups(c.head_size());
  k.v = value_chain(
      w, 0, true, w.attention[1].v_base, nullptr, 0,
      [&](llm::TileAllocator& tiles) {
        place_cache_and_scores(c, tiles, k.t);
        EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(sum_n, false), k.wo_at));
        EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(128, true), k.add_at));
        EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(64, false), k.norm_at));
        if (more) more(tiles);
      },
      true);
  constexpr int kPositions = 128;
  const int hs = c.head_size();
  k.row_bytes = ((c.n_heads - 1) * hs + 64 + 63) / 64 * 64;
  k.scores = scores_layer({c.n_heads, kPositions, 64, hs, hs, 110,
                           [](int o) { return 0.0006f + 0.0002f * float(o % 5); },
                           [](int h) { return 0.02f + 0.01f * float(h); }, k.t.scores_at.tiles,
                           k.t.scores_at.param_units},
                          k.random);
  k.cache = value_cache(c, k.t.cache_at, kPositions, k.random);
  k.sum = k.cache.sum;
  const llm::QuantizedAdd& add = w.attention_adds[1];
  const llm::QuantizedRmsInput& norm = w.rms_inputs[1];
  k.sum.out = random_wo(sum_n, c.dim, add.f, k.random);
  k.sum.out_at = k.wo_at;
  k.values = {k.cache.write, 1, k.v.chain.after_r.groups};
  k.values.write.from_byte =
      compiler::value_vectors_side_by_side(c.n_heads, c.n_kv_heads, hs, 0).from_byte;
  compiler::FcLayerRest& rest = k.rest;
  rest.add = llm::residual_add_layer(add, c.dim);
  rest.add_at = k.add_at;
  rest.x_follower = 0;
  rest.n = c.dim;
  rest.mean_mult = norm.mean_multiplier;
  rest.norm = llm::rms_input_layer(norm, c.dim);
  rest.norm_at = k.norm_at;
  for (int j = 0; j < dim_padded; ++j) {
    rest.norm_base.push_back(j < c.dim ? norm.base[size_t(j)] : 0.0f);
    rest.norm_padding.push_back(j >= c.dim);
  }
  rest.output_name = "ffn_in_x2";
}

// The rest case's rest with the last FFN after it (D.1b): the chain's own FFN, on its tiles.
compiler::FcLayerRest with_last_ffn(const RestCase& k) {
  compiler::FcLayerRest r = k.rest;
  r.ffn = &k.v.chain.ffn;
  r.ffn_up = k.v.up_at;
  r.ffn_down = k.v.down_at;
  r.ffn_output_name = "y_last";
  return r;
}

// A virtual chip with the rest case's parameters cached: the chain's, the scores', the cache's,
// wo's, the add's and the norm's.
struct RestChip {
  std::shared_ptr<chip::VirtualEdgeTpu> chip = std::make_shared<chip::VirtualEdgeTpu>();
  std::unique_ptr<runtime::EdgeTpu> tpu = runtime::open_virtual_edgetpu({}, chip);
  RestChip(const RestCase& k, const compiler::FfnChainPrograms& programs) {
    for (const container::Executable& e : programs.caching)
      tpu->run(nullptr, std::make_shared<runtime::Program>(e));
    using Placed = std::pair<const compiler::FcLayer*, const compiler::FcPlacement*>;
    for (const auto& [l, at] : {Placed{&k.scores.layer, &k.scores.at},
                                Placed{&k.sum.layer, &k.t.cache_at}, Placed{&k.sum.out, &k.wo_at},
                                Placed{&k.rest.add, &k.add_at}, Placed{&k.rest.norm, &k.norm_at}})
      tpu->run(nullptr, std::make_shared<runtime::Program>(compiler::fc_caching(*l, *at)));
  }
};

TEST(FfnChainOnTheChip, TheLayersRestAfterWoIsTheInt8PathsBytes) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    const int dim_padded = llm::whole_groups(c.dim), groups = compiler::fc_groups(c.dim);
    RestCase k;
    rest_case(c, w, k);
    const ValueChain& v = k.v;
    const compiler::FcPlacement& norm_at = k.norm_at;
    const ScoresLayer& scores = k.scores;
    const int row_bytes = k.row_bytes;
    const ValueCache& cache = k.cache;
    const compiler::FcValueSum& sum = k.sum;
    const compiler::FcChainValueWrite& values = k.values;
    const compiler::FcLayerRest& rest = k.rest;
    const llm::QuantizedAdd& add = w.attention_adds[1];
    const llm::QuantizedRmsInput& norm = w.rms_inputs[1];
    // x_q (the add's outputs) on tile 0, where the tail's e and multipliers pass.
    ASSERT_EQ(v.chain.next_at[0].tiles.front(), 0);
    const auto joined = [&k](const compiler::FcLayerRest* r) { return k.joined(r); };
    const compiler::FfnChainPrograms plain = joined(nullptr), with_rest = joined(&rest);
    ASSERT_EQ(with_rest.marks.size(), plain.marks.size());
    RestChip plain_chip(k, plain), rest_chip(k, plain);
    auto plain_p = std::make_shared<runtime::Program>(plain.execution);
    auto rest_p = std::make_shared<runtime::Program>(with_rest.execution);
    const int chain_in = v.k_padded + v.dim_padded;
    const size_t row_at = (size_t(chain_in) + 255) / 256 * 256;
    ASSERT_EQ(rest_p->input_bytes(0), row_at + size_t(row_bytes + compiler::kSoftmaxCountBytes));
    // The chain's outputs: w2's y first (ValueChain's output_down), then q, k and v~; r; o.
    const size_t o_at = size_t(plain_p->output_bytes(0)) + 4;
    std::set<std::vector<int8_t>> seen;
    for (const int n : {1, 4, 5, 64, 65}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<uint8_t> in = k.input(n);
      patch_value_fields(*plain_p, plain.marks, 0, cache.write, n - 1);
      patch_value_fields(*rest_p, with_rest.marks, 0, cache.write, n - 1);
      const std::vector<uint8_t> want = all_outputs_of(*plain_chip.tpu, plain_p, in);
      const std::vector<uint8_t> got = all_outputs_of(*rest_chip.tpu, rest_p, in);
      ASSERT_EQ(got.size(), want.size() + size_t(2 * dim_padded));
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
      // The int8 path's steps from the chain's x2 (input) and y, and the returned o.
      const auto bytes = [](const std::vector<uint8_t>& b, size_t at) {
        return reinterpret_cast<const int8_t*>(b.data() + at);
      };
      std::vector<int8_t> x_q(size_t(c.dim)), x2(size_t(c.dim)), ffn_in(size_t(c.dim));
      llm::residual_add(w.adds[0], bytes(in, size_t(v.k_padded)), bytes(want, 0), c.dim,
                        x_q.data());
      llm::residual_add(add, x_q.data(), bytes(want, o_at), c.dim, x2.data());
      const float r_ffn = llm::rms_input_scale(norm, x2.data(), c.dim);
      llm::rms_input(norm, x2.data(), c.dim, r_ffn, ffn_in.data());
      const int8_t* rest_out = bytes(got, want.size());
      for (int j = 0; j < c.dim; ++j)
        ASSERT_EQ(int(rest_out[dim_padded + j]), int(x2[size_t(j)])) << "x2 byte " << j;
      for (int j = 0; j < c.dim; ++j)
        ASSERT_EQ(int(rest_out[j]), int(ffn_in[size_t(j)])) << "FFN input byte " << j;
      // The multipliers themselves (the bytes hide one an ulp off): each norm group's multiplier
      // row holds f32(c_j r_ffn), 0 past dim.
      for (int g = 0; g < groups; ++g) {
        const auto& wide = rest_chip.chip->tile(norm_at.tiles[size_t(g)]).wide;
        for (int i = 0; i < 64; ++i) {
          const int j = 64 * g + i;
          uint32_t bits = 0;
          std::memcpy(&bits, &wide[size_t(64 * norm_at.param_units[size_t(g)] + 4 * i)], 4);
          const float m = j < c.dim ? llm::per_token_multiplier(norm.base[size_t(j)], r_ffn) : 0.0f;
          ASSERT_EQ(bits, std::bit_cast<uint32_t>(m)) << "FFN input channel " << j;
        }
      }
      // Not trivial: both spread, and differ from run to run.
      EXPECT_GT(std::set<int8_t>(x2.begin(), x2.end()).size(), size_t(16));
      EXPECT_GT(std::set<int8_t>(ffn_in.begin(), ffn_in.end()).size(), size_t(16));
      seen.insert(ffn_in);
    }
    EXPECT_EQ(seen.size(), size_t(5));
    // Refused, each an Error: the rest without wo, with wo's output name, with a norm of K != 64.
    compiler::FcValueSum no_wo = sum;
    no_wo.out = {};
    EXPECT_NE(error_of([&] {
                compiler::generate_ffn_chain_softmax(v.chain, v.up_at, v.down_at, scores.layer,
                                                     scores.at, row_bytes, scores.exp_mult, nullptr,
                                                     nullptr, {}, &no_wo, &values, &rest);
              }).find("follows wo"),
              std::string::npos);
    compiler::FcLayerRest named = rest, wide = rest;
    named.output_name = sum.out.output_name;
    EXPECT_NE(error_of([&] { joined(&named); }).find("a name of its own"), std::string::npos);
    wide.norm.k = 128;
    EXPECT_NE(error_of([&] { joined(&wide); }).find("needs 64"), std::string::npos);
  });
}

// The rest's norm constants resident (FcLayerRest::norm_const_units: a row on each norm group's
// tile, cached as the chip path caches them with wo's parameters): the multipliers come from a
// loop over them, in fewer bytes than the bundle an output, and every output byte and every
// multiplier row is the immediates' form's, both shapes, n = 1, 5, 65. A chip whose rows hold one
// constant one ulp high gives another multiplier: the loop reads the rows.
TEST(FfnChainOnTheChip, TheNormsResidentConstantsGiveTheImmediatesBytesInFewerBytes) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    const int groups = compiler::fc_groups(c.dim);
    RestCase k;
    std::vector<int> units;
    rest_case(c, w, k, [&](llm::TileAllocator& tiles) {
      units.clear();
      for (const int tile : k.norm_at.tiles) units.push_back(tiles.take(tile, 4));
    });
    ASSERT_EQ(units.size(), size_t(groups));
    for (const int u : units) ASSERT_GE(u, 0);
    compiler::FcLayerRest looped = k.rest;
    looped.norm_const_units = units;
    const compiler::FfnChainPrograms imm = k.joined(&k.rest), loop = k.joined(&looped);
    const auto norm_bytes = [](const compiler::FfnChainPrograms& p) {
      uint64_t bytes = 0;
      for (const auto& [name, b] : p.parts)
        if (name == "rest: norm") bytes += b;
      return bytes;
    };
    // A bundle an output against the loop, its rows' transfer and a fence.
    EXPECT_LT(norm_bytes(loop), norm_bytes(imm));
    const auto rows_of = [&](int off_by_one) {
      compiler::FcRowWrite rows;
      for (int g = 0; g < groups; ++g) {
        rows.rows.push_back({k.norm_at.tiles[size_t(g)], units[size_t(g)]});
        compiler::append_constants_row(rows.bytes, k.rest.norm_base, k.rest.norm_padding,
                                       size_t(64 * g));
      }
      if (off_by_one) rows.bytes[4 * 3] += 1;  // (group 0's output 3, one ulp high)
      return rows;
    };
    RestChip imm_chip(k, imm), loop_chip(k, imm), off_chip(k, imm);
    for (const auto& [chip, off] : {std::pair{&loop_chip, 0}, std::pair{&off_chip, 1}}) {
      const compiler::FcRowWrite rows = rows_of(off);
      chip->tpu->run(nullptr, std::make_shared<runtime::Program>(
                                  compiler::fc_caching(k.rest.norm, k.norm_at, &rows)));
    }
    auto imm_p = std::make_shared<runtime::Program>(imm.execution);
    auto loop_p = std::make_shared<runtime::Program>(loop.execution);
    auto off_p = std::make_shared<runtime::Program>(loop.execution);
    const auto mult_row = [&](const RestChip& chip, int g) {
      const auto& wide = chip.chip->tile(k.norm_at.tiles[size_t(g)]).wide;
      const auto from = wide.begin() + long(64 * k.norm_at.param_units[size_t(g)]);
      return std::vector<uint8_t>(from, from + 256);
    };
    for (const int n : {1, 5, 65}) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<uint8_t> in = k.input(n);
      patch_value_fields(*imm_p, imm.marks, 0, k.cache.write, n - 1);
      patch_value_fields(*loop_p, loop.marks, 0, k.cache.write, n - 1);
      patch_value_fields(*off_p, loop.marks, 0, k.cache.write, n - 1);
      const std::vector<uint8_t> want = all_outputs_of(*imm_chip.tpu, imm_p, in);
      const std::vector<uint8_t> got = all_outputs_of(*loop_chip.tpu, loop_p, in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
      for (int g = 0; g < groups; ++g)
        ASSERT_EQ(mult_row(loop_chip, g), mult_row(imm_chip, g)) << "norm group " << g;
      all_outputs_of(*off_chip.tpu, off_p, in);
      EXPECT_NE(mult_row(off_chip, 0), mult_row(imm_chip, 0));
      for (int g = 1; g < groups; ++g)
        EXPECT_EQ(mult_row(off_chip, g), mult_row(imm_chip, g)) << "norm group " << g;
    }
    // Refused: a row per group, whole rows.
    compiler::FcLayerRest more = looped, odd = looped;
    more.norm_const_units.push_back(units.back());
    odd.norm_const_units[0] += 1;
    EXPECT_NE(error_of([&] { k.joined(&more); }).find("constants' rows for"), std::string::npos);
    EXPECT_NE(error_of([&] { k.joined(&odd); }).find("constants' row at wide unit"),
              std::string::npos);
  });
}

// D.1b, the FFN fed from tiles (FcLayerRest::ffn): after the rest, an FFN (the chain's own w1, w3
// and w2, already cached on its tiles) reads the FFN input's pieces where the norm left them, and
// y leaves last. On one chip that joined program; on another the joined program with the rest
// alone, then generate_ffn's program on the FFN input it returned. Both checkpoints' shapes, at
// n = 1, 4, 5, 64, 65 (1 and 65 under AddressSanitizer): every output byte equal, y included.
TEST(FfnChainOnTheChip, TheLastFfnAfterTheSumEqualsItsOwnProgramBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    const int dim_padded = llm::whole_groups(c.dim);
    RestCase k;
    rest_case(c, w, k);
    const compiler::FfnLayer& ffn = k.v.chain.ffn;
    const compiler::FcLayerRest with_ffn = with_last_ffn(k);
    const compiler::FfnChainPrograms rest = k.joined(&k.rest), joined = k.joined(&with_ffn);
    ASSERT_EQ(joined.marks.size(), rest.marks.size());
    RestChip apart_chip(k, rest), joined_chip(k, rest);
    auto rest_p = std::make_shared<runtime::Program>(rest.execution);
    auto joined_p = std::make_shared<runtime::Program>(joined.execution);
    auto ffn_p = std::make_shared<runtime::Program>(
        compiler::generate_ffn(ffn, k.v.up_at, k.v.down_at).execution);
    ASSERT_EQ(ffn_p->input_bytes(0), size_t(dim_padded));
    ASSERT_EQ(joined_p->num_outputs(), rest_p->num_outputs() + 1);
    ASSERT_EQ(joined_p->output_bytes(joined_p->num_outputs() - 1), size_t(ffn.down.n));
#if TINYCORAL_ASAN
    const std::vector<int> counts = {1, 65};
#else
    const std::vector<int> counts = {1, 4, 5, 64, 65};
#endif
    std::set<std::vector<uint8_t>> seen;
    for (const int n : counts) {
      SCOPED_TRACE("n = " + std::to_string(n));
      const std::vector<uint8_t> in = k.input(n);
      patch_value_fields(*rest_p, rest.marks, 0, k.cache.write, n - 1);
      patch_value_fields(*joined_p, joined.marks, 0, k.cache.write, n - 1);
      std::vector<uint8_t> want = all_outputs_of(*apart_chip.tpu, rest_p, in);
      // [the FFN input; x2] last: the FFN's input is its first dim_padded bytes.
      const auto ffn_in = want.end() - 2 * dim_padded;
      const std::vector<uint8_t> y =
          all_outputs_of(*apart_chip.tpu, ffn_p, std::vector<uint8_t>(ffn_in, ffn_in + dim_padded));
      want.insert(want.end(), y.begin(), y.end());
      const std::vector<uint8_t> got = all_outputs_of(*joined_chip.tpu, joined_p, in);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
      // Not trivial: y spreads, and differs from run to run.
      EXPECT_GT(std::set<uint8_t>(y.begin(), y.end()).size(), size_t(16));
      seen.insert(y);
    }
    EXPECT_EQ(seen.size(), counts.size());
    // Refused: y under the rest's output name.
    compiler::FcLayerRest named = with_ffn;
    named.ffn_output_name = named.output_name;
    EXPECT_NE(error_of([&] { k.joined(&named); }).find("a name of its own"), std::string::npos);
  });
}

// The outputs a program's stages push, seen two ways (D.2a's OutputList): the names of the
// output buffers its bitstream addresses, in the bitstream's order, and the executable's output
// layers and outfeed hints, which the stages recorded as they were emitted. They must agree in
// order (the runtime reads output i from the i-th layer's buffer) and in bytes, for the chain
// alone and the joined programs without the rest, with it and with the last FFN, both shapes.
TEST(FfnChainOnTheChip, EveryProgramListsItsOutputsInTheOrderItsBitstreamPushesThem) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    RestCase k;
    rest_case(c, w, k);
    const compiler::FcLayerRest with_ffn = with_last_ffn(k);
    const std::vector<std::pair<std::string, container::Executable>> programs = {
        {"chain", compiler::generate_ffn_chain(k.v.chain, k.v.up_at, k.v.down_at).execution},
        {"joined", k.joined(nullptr).execution},
        {"rest", k.joined(&k.rest).execution},
        {"ffn", k.joined(&with_ffn).execution}};
    std::set<size_t> counts;
    for (const auto& [what, e] : programs) {
      SCOPED_TRACE(what);
      std::vector<container::FieldOffset> fields = e.bitstreams.at(0).field_offsets;
      std::stable_sort(fields.begin(), fields.end(),
                       [](const auto& a, const auto& b) { return a.offset_bit < b.offset_bit; });
      std::vector<std::string> pushed;
      for (const container::FieldOffset& f : fields)
        if (f.meta.desc == container::BufferKind::kOutput &&
            (pushed.empty() || pushed.back() != f.meta.name))
          pushed.push_back(f.meta.name);
      std::vector<std::string> listed, hinted;
      for (const container::Layer& l : e.output_layers) listed.push_back(l.name);
      const runtime::Program p(e);
      size_t output = 0;
      for (const container::DmaHint& h : e.dma_hints.hints)
        if (h.kind == container::HintKind::kDma && h.direction == container::Direction::kOutfeed) {
          hinted.push_back(h.meta.name);
          ASSERT_LT(output, p.num_outputs());
          EXPECT_EQ(size_t(h.size_in_bytes), p.output_bytes(output++)) << h.meta.name;
        }
      EXPECT_EQ(listed, pushed);
      EXPECT_EQ(hinted, pushed);
      EXPECT_EQ(std::set<std::string>(pushed.begin(), pushed.end()).size(), pushed.size());
      counts.insert(pushed.size());
    }
    // Not trivial: each form adds outputs (the chain's and r; o; the rest's; y).
    EXPECT_EQ(counts, (std::set<size_t>{2, 3, 4, 5}));
  });
}

// The composed program's outputs (got) equal the programs apart's (want) byte for byte, and each
// layer's value cache and staging rows (cache placement, value write) are the same on both chips.
using CacheRows = std::pair<const compiler::FcPlacement*, const compiler::FcValueWrite*>;
void expect_composed_equals_apart(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want,
                                  const RestChip& apart, const RestChip& composed,
                                  std::initializer_list<CacheRows> caches) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(int(got[i]), int(want[i])) << "output byte " << i << " of " << want.size();
  for (const auto& [at, cw] : caches)
    for (size_t g = 0; g < at->tiles.size(); ++g) {
      const auto& x = apart.chip->tile(at->tiles[g]).wide;
      const auto& z = composed.chip->tile(at->tiles[g]).wide;
      const size_t from = 64 * size_t(at->param_units[g]);
      const size_t to = 64 * size_t(cw->vectors.rows[g].unit + 4);
      ASSERT_TRUE(std::equal(x.begin() + long(from), x.begin() + long(to), z.begin() + long(from)))
          << "cache group " << g;
    }
}

// D.2b's two layers: layer 0's joined program (the chip path's first: q, k and v~ of layer 0, r
// the host's in the count block) with its value write, scores, sum, a random wo and its rest
// (x_q: the program's own input, FcLayerRest::x_follower -1), and behind that rest layer 1's
// (RestCase: chain 0 reading the FFN input and x2 from the tiles, layer 1's attention, its rest
// and the last FFN). Each layer's cache, scores, wo, add and norm on tiles of their own.
struct TwoLayerCase {
  RestCase one;
  compiler::FcChain zero;
  JoinedValueWrite t0;
  compiler::FcPlacement wo0_at, add0_at, norm0_at;
  ScoresLayer scores0;
  ValueCache cache0;
  compiler::FcValueSum sum0;
  compiler::FcChainValueWrite values0;
  compiler::FcLayerRest rest0, rest1;
  compiler::FcJoinedLayer next;
  int chain_in = 0;  // layer 0's input bytes

  // Layer 0's program with its rest (`composed`: layer 1's behind it).
  compiler::FfnChainPrograms layer_zero(bool composed) const {
    compiler::FcLayerRest r = rest0;
    if (composed) r.next = &next;
    return compiler::generate_fc_chain_softmax(zero, scores0.layer, scores0.at, one.row_bytes,
                                               scores0.exp_mult, nullptr, nullptr, {}, &sum0,
                                               &values0, &r);
  }
};

void two_layer_case(const llm::Config& c, const llm::Int8Weights& w, TwoLayerCase& k) {
  const int dim_padded = llm::whole_groups(c.dim), groups = compiler::fc_groups(c.dim);
  const int sum_n = 64 * c.n_heads * compiler::fc_groups(c.head_size());
  std::array<int, 3> out_at{};
  rest_case(c, w, k.one, [&](llm::TileAllocator& tiles) {
    k.zero = layer_zero_chain(w, true, tiles, out_at);
    place_cache_and_scores(c, tiles, k.t0);
    EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(sum_n, false), k.wo0_at));
    EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(128, true), k.add0_at));
    EXPECT_TRUE(tiles.place(groups, compiler::fc_units_per_tile(64, false), k.norm0_at));
  });
  k.zero.layers[0].output_name = "qkv0";
  k.chain_in = dim_padded;
  constexpr int kPositions = 128;
  const int hs = c.head_size();
  std::mt19937& random = k.one.random;
  k.scores0 = scores_layer({c.n_heads, kPositions, 64, hs, hs, 110,
                            [](int o) { return 0.0005f + 0.0002f * float(o % 3); },
                            [](int h) { return 0.03f + 0.01f * float(h); }, k.t0.scores_at.tiles,
                            k.t0.scores_at.param_units},
                           random);
  k.scores0.layer.output_name = "e0";
  k.cache0 = value_cache(c, k.t0.cache_at, kPositions, random);
  k.sum0 = k.cache0.sum;
  k.sum0.out = random_wo(sum_n, c.dim, w.attention_adds[0].f, random);
  k.sum0.out.output_name = "o0";
  k.sum0.out_at = k.wo0_at;
  k.values0 = {k.cache0.write, 0, k.zero.after_r.groups};
  k.values0.write.from_byte =
      compiler::value_vectors_side_by_side(c.n_heads, c.n_kv_heads, hs, 0).from_byte;
  compiler::FcLayerRest& r = k.rest0;
  const llm::QuantizedAdd& add = w.attention_adds[0];
  const llm::QuantizedRmsInput& norm = w.rms_inputs[0];
  r.add = llm::residual_add_layer(add, c.dim);
  r.add_at = k.add0_at;
  r.x_follower = -1;
  r.n = c.dim;
  r.mean_mult = norm.mean_multiplier;
  r.norm = llm::rms_input_layer(norm, c.dim);
  r.norm_at = k.norm0_at;
  for (int j = 0; j < dim_padded; ++j) {
    r.norm_base.push_back(j < c.dim ? norm.base[size_t(j)] : 0.0f);
    r.norm_padding.push_back(j >= c.dim);
  }
  r.output_name = "ffn_in_x2_0";
  // Layer 1 (the last): its rest with the last FFN, chain 0's on its tiles.
  const RestCase& one = k.one;
  k.rest1 = with_last_ffn(one);
  k.next = {&one.v.chain,  one.v.up_at,         one.v.down_at, &one.scores.layer, one.scores.at,
            one.row_bytes, one.scores.exp_mult, nullptr,       nullptr,           {},
            &one.sum,      &one.values,         &k.rest1};
}

// Two layers in one program (FcLayerRest::next) against the joined programs apart on a chip of
// their own: layer 0's with its rest (A), then layer 1's (B) on A's [FFN input; x2], the same row
// and count block. Both checkpoints' shapes, at n = 1, 4, 5, 64 and 65 (1 and 65 under
// AddressSanitizer): every output byte (A's then B's), both layers' cache and staging rows, and
// each layer's marks where its own program has them.
TEST(FfnChainOnTheChip, TwoLayersInOneProgramEqualTheJoinedProgramsApartBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    const int dim_padded = llm::whole_groups(c.dim);
    TwoLayerCase k;
    two_layer_case(c, w, k);
    const RestCase& one = k.one;
    const compiler::FfnChainPrograms a = k.layer_zero(false), b = one.joined(&k.rest1),
                                     composed = k.layer_zero(true);
    ASSERT_EQ(composed.marks.size(), a.marks.size() + b.marks.size());
    // One count of ring producers over both layers (the simulator takes a restart as well).
    std::vector<int> ordinals;
    for (const isa::Instruction& i : isa::decode(composed.execution.bitstreams.at(0).data)) {
      const std::string text = isa::print(i);
      const size_t at = text.find("r0.val=");
      if (text.find("ringprod") != std::string::npos && at != std::string::npos)
        ordinals.push_back(std::stoi(text.substr(at + 7)));
    }
    ASSERT_GT(ordinals.size(), size_t(100));
    for (size_t i = 1; i < ordinals.size(); ++i)
      ASSERT_EQ(ordinals[i], ordinals[i - 1] + 1) << "ring producer " << i;
    for (size_t i = 0; i < b.marks.size(); ++i)
      EXPECT_EQ(composed.marks[a.marks.size() + i].value, b.marks[i].value) << "mark " << i;
    // Each chip: both layers' chains, scores, caches, wo, adds and norms.
    const auto make_chip = [&](RestChip& x) {
      for (const container::Executable& e : a.caching)
        x.tpu->run(nullptr, std::make_shared<runtime::Program>(e));
      using Placed = std::pair<const compiler::FcLayer*, const compiler::FcPlacement*>;
      for (const auto& [l, at] :
           {Placed{&k.scores0.layer, &k.scores0.at}, Placed{&k.sum0.layer, &k.t0.cache_at},
            Placed{&k.sum0.out, &k.wo0_at}, Placed{&k.rest0.add, &k.add0_at},
            Placed{&k.rest0.norm, &k.norm0_at}})
        x.tpu->run(nullptr, std::make_shared<runtime::Program>(compiler::fc_caching(*l, *at)));
    };
    RestChip apart_chip(one, b), composed_chip(one, b);
    make_chip(apart_chip);
    make_chip(composed_chip);
    auto a_p = std::make_shared<runtime::Program>(a.execution);
    auto b_p = std::make_shared<runtime::Program>(b.execution);
    auto c_p = std::make_shared<runtime::Program>(composed.execution);
    ASSERT_EQ(c_p->num_outputs(), a_p->num_outputs() + b_p->num_outputs());
    ASSERT_EQ(c_p->input_bytes(0), a_p->input_bytes(0));
    const size_t row_at = (size_t(k.chain_in) + 255) / 256 * 256;
    const size_t b_row_at = (size_t(one.v.k_padded + one.v.dim_padded) + 255) / 256 * 256;
    const size_t tail_bytes = size_t(one.row_bytes + compiler::kSoftmaxCountBytes);
    ASSERT_EQ(a_p->input_bytes(0), row_at + tail_bytes);
    ASSERT_EQ(b_p->input_bytes(0), b_row_at + tail_bytes);
#if TINYCORAL_ASAN
    const std::vector<int> counts = {1, 65};
#else
    const std::vector<int> counts = {1, 4, 5, 64, 65};
#endif
    std::set<std::vector<uint8_t>> seen;
    for (const int n : counts) {
      SCOPED_TRACE("n = " + std::to_string(n));
      // Layer 0's input: x0, the row, the count block with n and the host's r.
      std::vector<uint8_t> in(size_t(k.chain_in));
      for (uint8_t& byte : in) byte = static_cast<uint8_t>(k.one.random() % 255 + 1);
      in.resize(row_at, 0);
      std::vector<uint8_t> tail(size_t(one.row_bytes));
      for (uint8_t& byte : tail) byte = static_cast<uint8_t>(k.one.random() % 255 + 1);
      tail.resize(tail_bytes, 0);
      const float r = 0.6f + 0.1f * float(n % 7);
      for (int i = 0; i < 4; ++i) {
        tail[size_t(one.row_bytes + i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
        tail[size_t(one.row_bytes + 4 + i)] = uint8_t(std::bit_cast<uint32_t>(r) >> 8 * i) ^ 0x80u;
      }
      in.insert(in.end(), tail.begin(), tail.end());
      patch_value_fields(*a_p, a.marks, 0, k.cache0.write, n - 1);
      patch_value_fields(*b_p, b.marks, 0, one.cache.write, n - 1);
      patch_value_fields(*c_p, composed.marks, 0, k.cache0.write, n - 1);
      patch_value_fields(*c_p, composed.marks, a.marks.size(), one.cache.write, n - 1);
      std::vector<uint8_t> want = all_outputs_of(*apart_chip.tpu, a_p, in);
      // B's input: A's [FFN input; x2] (its last output), then the same row and count block.
      std::vector<uint8_t> b_in(want.end() - 2 * dim_padded, want.end());
      b_in.resize(b_row_at, 0);
      b_in.insert(b_in.end(), tail.begin(), tail.end());
      const std::vector<uint8_t> y = all_outputs_of(*apart_chip.tpu, b_p, b_in);
      want.insert(want.end(), y.begin(), y.end());
      const std::vector<uint8_t> got = all_outputs_of(*composed_chip.tpu, c_p, in);
      expect_composed_equals_apart(
          got, want, apart_chip, composed_chip,
          {{&k.t0.cache_at, &k.cache0.write}, {&one.t.cache_at, &one.cache.write}});
      if (::testing::Test::HasFatalFailure()) return;
      // Not trivial: the last FFN's y spreads and differs from run to run.
      const std::vector<uint8_t> last(want.end() - c_p->output_bytes(c_p->num_outputs() - 1),
                                      want.end());
      EXPECT_GT(std::set<uint8_t>(last.begin(), last.end()).size(), size_t(16));
      seen.insert(last);
    }
    EXPECT_EQ(seen.size(), counts.size());
    // Refused: layer 1's wo under layer 0's name; the next layer beside the last FFN.
    compiler::FcValueSum clash = one.sum;
    clash.out.output_name = k.sum0.out.output_name;
    k.next.sum = &clash;
    EXPECT_NE(error_of([&] { k.layer_zero(true); }).find("a name of its own"), std::string::npos);
    k.next.sum = &one.sum;
    k.rest0.ffn = &one.v.chain.ffn;
    k.rest0.ffn_output_name = "y0";
    EXPECT_NE(error_of([&] { k.layer_zero(true); }).find("no FFN"), std::string::npos);
  });
}

// D.3a: three layers in one program (FcLayerRest::next nested twice): layer 0's program with its
// rest, layer 1's behind it with a middle rest (x_q from its chain's add, no FFN) and layer 2's
// behind that with its rest and the last FFN. Layer 2 is layer 1 again on the same tiles (its
// outputs named apart): the programs apart run the same steps in the same order on one chip, so
// sharing its cache and weights changes nothing. Against A (layer 0 with its rest), B (layer 1
// with the middle rest) and C (layer 2 with its rest and FFN) apart, each on the [FFN input; x2]
// of the one before: every output byte, the cache and staging rows, the marks (A's, B's and C's
// in order), ring ordinals counting up by one, at n = 1, 5 and 65.
TEST(FfnChainOnTheChip, ThreeLayersInOneProgramEqualTheJoinedProgramsApartBitForBit) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for_each_residual_model(data, [](const llm::Config& c, const llm::Int8Weights& w) {
    const int dim_padded = llm::whole_groups(c.dim);
    TwoLayerCase k;
    two_layer_case(c, w, k);
    const RestCase& one = k.one;
    // Layer 1's middle rest, alone (B) and with layer 2 behind it.
    compiler::FcLayerRest middle = one.rest;
    middle.output_name = "ffn_in_x2_1";
    compiler::FfnChain chain2 = one.v.chain;
    chain2.next.back().output_name += "2";
    if (chain2.rms.layer >= 0) chain2.rms.output_name += "2";
    compiler::FcLayer scores2 = one.scores.layer;
    scores2.output_name += "2";
    compiler::FcValueSum sum2 = one.sum;
    sum2.layer.output_name += "2";
    sum2.out.output_name += "2";
    const compiler::FcJoinedLayer third{
        &chain2,       one.v.up_at,         one.v.down_at, &scores2, one.scores.at,
        one.row_bytes, one.scores.exp_mult, nullptr,       nullptr,  {},
        &sum2,         &one.values,         &k.rest1};
    compiler::FcLayerRest middle_next = middle;
    middle_next.next = &third;
    compiler::FcJoinedLayer second = k.next;
    second.rest = &middle_next;
    k.next = second;
    const compiler::FfnChainPrograms a = k.layer_zero(false), b = one.joined(&middle),
                                     cc = one.joined(&k.rest1), composed = k.layer_zero(true);
    ASSERT_EQ(composed.marks.size(), a.marks.size() + b.marks.size() + cc.marks.size());
    std::vector<int> ordinals;
    for (const isa::Instruction& i : isa::decode(composed.execution.bitstreams.at(0).data)) {
      const std::string text = isa::print(i);
      const size_t at = text.find("r0.val=");
      if (text.find("ringprod") != std::string::npos && at != std::string::npos)
        ordinals.push_back(std::stoi(text.substr(at + 7)));
    }
    ASSERT_GT(ordinals.size(), size_t(100));
    for (size_t i = 1; i < ordinals.size(); ++i)
      ASSERT_EQ(ordinals[i], ordinals[i - 1] + 1) << "ring producer " << i;
    for (size_t i = 0; i < b.marks.size(); ++i)
      EXPECT_EQ(composed.marks[a.marks.size() + i].value, b.marks[i].value) << "mark " << i;
    for (size_t i = 0; i < cc.marks.size(); ++i)
      EXPECT_EQ(composed.marks[a.marks.size() + b.marks.size() + i].value, cc.marks[i].value)
          << "layer 2's mark " << i;
    const auto make_chip = [&](RestChip& x) {
      for (const container::Executable& e : a.caching)
        x.tpu->run(nullptr, std::make_shared<runtime::Program>(e));
      using Placed = std::pair<const compiler::FcLayer*, const compiler::FcPlacement*>;
      for (const auto& [l, at] :
           {Placed{&k.scores0.layer, &k.scores0.at}, Placed{&k.sum0.layer, &k.t0.cache_at},
            Placed{&k.sum0.out, &k.wo0_at}, Placed{&k.rest0.add, &k.add0_at},
            Placed{&k.rest0.norm, &k.norm0_at}})
        x.tpu->run(nullptr, std::make_shared<runtime::Program>(compiler::fc_caching(*l, *at)));
    };
    RestChip apart_chip(one, cc), composed_chip(one, cc);
    make_chip(apart_chip);
    make_chip(composed_chip);
    auto a_p = std::make_shared<runtime::Program>(a.execution);
    auto b_p = std::make_shared<runtime::Program>(b.execution);
    auto c_p = std::make_shared<runtime::Program>(cc.execution);
    auto all_p = std::make_shared<runtime::Program>(composed.execution);
    ASSERT_EQ(all_p->num_outputs(), a_p->num_outputs() + b_p->num_outputs() + c_p->num_outputs());
    const size_t row_at = (size_t(k.chain_in) + 255) / 256 * 256;
    const size_t b_row_at = (size_t(one.v.k_padded + one.v.dim_padded) + 255) / 256 * 256;
    const size_t tail_bytes = size_t(one.row_bytes + compiler::kSoftmaxCountBytes);
    ASSERT_EQ(all_p->input_bytes(0), row_at + tail_bytes);
#if TINYCORAL_ASAN
    const std::vector<int> counts = {1, 65};
#else
    const std::vector<int> counts = {1, 5, 65};
#endif
    std::set<std::vector<uint8_t>> seen;
    for (const int n : counts) {
      SCOPED_TRACE("n = " + std::to_string(n));
      std::vector<uint8_t> in(size_t(k.chain_in));
      for (uint8_t& byte : in) byte = static_cast<uint8_t>(k.one.random() % 255 + 1);
      in.resize(row_at, 0);
      std::vector<uint8_t> tail(size_t(one.row_bytes));
      for (uint8_t& byte : tail) byte = static_cast<uint8_t>(k.one.random() % 255 + 1);
      tail.resize(tail_bytes, 0);
      const float r = 0.6f + 0.1f * float(n % 7);
      for (int i = 0; i < 4; ++i) {
        tail[size_t(one.row_bytes + i)] = uint8_t(uint32_t(n) >> 8 * i) ^ 0x80u;
        tail[size_t(one.row_bytes + 4 + i)] = uint8_t(std::bit_cast<uint32_t>(r) >> 8 * i) ^ 0x80u;
      }
      in.insert(in.end(), tail.begin(), tail.end());
      patch_value_fields(*a_p, a.marks, 0, k.cache0.write, n - 1);
      patch_value_fields(*b_p, b.marks, 0, one.cache.write, n - 1);
      patch_value_fields(*c_p, cc.marks, 0, one.cache.write, n - 1);
      patch_value_fields(*all_p, composed.marks, 0, k.cache0.write, n - 1);
      patch_value_fields(*all_p, composed.marks, a.marks.size(), one.cache.write, n - 1);
      patch_value_fields(*all_p, composed.marks, a.marks.size() + b.marks.size(), one.cache.write,
                         n - 1);
      std::vector<uint8_t> want = all_outputs_of(*apart_chip.tpu, a_p, in);
      // Each next program's input: the one before's [FFN input; x2], the same row and count.
      for (const auto& p : {b_p, c_p}) {
        std::vector<uint8_t> next_in(want.end() - 2 * dim_padded, want.end());
        next_in.resize(b_row_at, 0);
        next_in.insert(next_in.end(), tail.begin(), tail.end());
        const std::vector<uint8_t> out = all_outputs_of(*apart_chip.tpu, p, next_in);
        want.insert(want.end(), out.begin(), out.end());
      }
      const std::vector<uint8_t> got = all_outputs_of(*composed_chip.tpu, all_p, in);
      expect_composed_equals_apart(
          got, want, apart_chip, composed_chip,
          {{&k.t0.cache_at, &k.cache0.write}, {&one.t.cache_at, &one.cache.write}});
      if (::testing::Test::HasFatalFailure()) return;
      const std::vector<uint8_t> last(want.end() - all_p->output_bytes(all_p->num_outputs() - 1),
                                      want.end());
      EXPECT_GT(std::set<uint8_t>(last.begin(), last.end()).size(), size_t(16));
      seen.insert(last);
    }
    EXPECT_EQ(seen.size(), counts.size());
  });
}

// What the generator refuses, each an Error (not a layout to retry): groups after r of a follower
// that is not after r's, without r, of a group the follower lacks, out of order, with constants
// of the wrong count, or with their constants' row inside a group's parameters or not row-aligned.
TEST(FfnChainOnTheChip, ValueTildeGroupsAfterRAreRefusedWhereTheyCannotBe) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(model->ck, pool, 4);
  const llm::Int8Options options = residual_options();
  const llm::Int8Weights w(model->ck, cal, options);
  const ValueChain good = value_chain(w, 0, true, w.attention[1].v_base);
  EXPECT_NO_THROW(compiler::generate_ffn_chain(good.chain, good.up_at, good.down_at));
  const int own = good.chain.next_at[1].param_units[size_t(good.chain.after_r.groups[0])];
  const std::vector<std::function<void(compiler::FfnChain&)>> bad = {
      [](compiler::FfnChain& c) { c.after_r.layer = 0; },
      [](compiler::FfnChain& c) { c.after_r.layer = 2; },
      [](compiler::FfnChain& c) { c.rms.layer = -1; },
      [](compiler::FfnChain& c) { c.after_r.groups[0] = 99; },
      [](compiler::FfnChain& c) { c.after_r.groups.push_back(1); },
      [](compiler::FfnChain& c) { c.after_r.base.pop_back(); },
      [](compiler::FfnChain& c) { c.after_r.const_units.push_back(0); },
      [own](compiler::FfnChain& c) { c.after_r.const_units[0] = own; },
      [](compiler::FfnChain& c) { c.after_r.const_units[0] += 2; },
  };
  // Layer 0's form: groups after r of a layer it lacks, or with a tail that names no block with
  // r in its input (or one past it).
  llm::TileAllocator tiles;
  std::array<int, 3> out_at{};
  const compiler::FcChain zero = layer_zero_chain(w, true, tiles, out_at);
  EXPECT_NO_THROW(compiler::generate_fc_chain(zero));
  compiler::FfnChainTail tail;
  tail.input_bytes = 64;
  tail.emit = [](compiler::Emitter&, int&, const compiler::FfnChainTailAt&) { return 0; };
  compiler::FcChain past = zero;
  past.after_r.layer = 1;
  EXPECT_NE(error_of([&] { compiler::generate_fc_chain(past); }).find("after r"),
            std::string::npos);
  for (const int block : {-1, 8}) {
    tail.r_block = block;
    EXPECT_NE(error_of([&] { compiler::generate_fc_chain(zero, &tail); }).find("r's block"),
              std::string::npos)
        << block;
  }
  for (size_t i = 0; i < bad.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    compiler::FfnChain chain = good.chain;
    bad[i](chain);
    try {
      compiler::generate_ffn_chain(chain, good.up_at, good.down_at);
      ADD_FAILURE() << "generated";
    } catch (const compiler::LayoutRejected& e) {
      ADD_FAILURE() << "taken for a layout to retry: " << e.what();
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_TRUE(what.find("after r") != std::string::npos ||
                  what.find("constants' row") != std::string::npos)
          << what;
    }
  }
}

}  // namespace
}  // namespace tinycoral::testing
