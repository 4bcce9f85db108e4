// The layer matmuls on the Edge TPU, weights resident (chip_model.h).
#include "llm/chip_model.h"

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <cstring>
#include <numeric>
#include <span>
#include <tuple>

#include "common/error.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_value_write.h"
#include "llm/int8_rms.h"
#include "llm/matmul_plan.h"
#include "llm/rope_sum.h"
#include "llm/value_sum.h"

namespace tinycoral::llm {

namespace {
// A RoPE sum group's aux rows (multipliers, zero points) and its K (rope_sum.h); where the program
// loops over its multipliers' constants (compiler::FcScoresInput::base_rows) a third row holds
// them.
constexpr int kRopeAuxUnits = compiler::kFcAuxUnits;
int rope_aux_units(bool base_rows) {
  return base_rows ? compiler::kMultBaseRowUnit + 4 : kRopeAuxUnits;
}
constexpr int kRopeSumK = 128;

constexpr int kMaxOutputs = kMaxProgramOutputs;

// `bits` at `at` in an int8 input, little-endian: the runtime flips each byte's top bit, so the
// bytes are flipped here to arrive as they are.
void put_word(int8_t* at, uint32_t bits) {
  for (int i = 0; i < 4; ++i)
    at[i] = static_cast<int8_t>(uint8_t((bits >> (8 * i)) & 0xff) ^ 0x80u);
}

// n, the positions a softmax counts, at the start of its count block (compiler::
// kSoftmaxCountBytes) in an int8 input.
void put_count(int8_t* block, int n) { put_word(block, uint32_t(n)); }

// r (RMSNorm's scale, an f32) after n in a count block, for the programs that make multipliers
// from it (v~'s, the RoPE sum's).
void put_r(int8_t* block, float r) { put_word(block + 4, std::bit_cast<uint32_t>(r)); }

// An FC reading the residual stream (dim bytes in 64-byte pieces) holds weights for dim rounded to
// whole words only, the op's K (isa.md 3.4): the pieces' bytes past it met zero weights.
compiler::FcLayer with_dim_weights(compiler::FcLayer l, int dim) {
  l.weight_k = (dim + 3) / 4 * 4;
  return l;
}

// wo after the value cache's weighted sum (join_attention) reads the sum's bytes in one of two
// layouts, for every layer alike. Where a head's sum is one 64-byte piece of whole words
// (head_size <= 64, a multiple of 4), the sum writes head h's piece at byte h x head_size
// (compiler::FcValueSum::out_stride) and wo reads the heads' bytes side by side: K = n_heads x
// head_size padded to 64s, weights for its words only (weight_k), a group 8 + weight_k units.
// Else each head's pieces stay at its padded place (stride 64, K = the sum's outputs).
struct WoAfterSum {
  bool side_by_side = false;
  int stride = 64;   // the sum's pieces this many bytes apart in wo's input
  int head_at = 0;   // head h's columns of wo from byte h x head_at
  int k = 0;         // wo's input bytes (whole 64s)
  int weight_k = 0;  // its weights' K (units a group: fc_units_per_tile(weight_k))
};
WoAfterSum wo_after_sum(const Config& c, const ValueSumShape& shape) {
  const int hs = c.head_size();
  if (hs <= 64 && hs % 4 == 0)
    return {true, hs, hs, whole_groups(c.n_heads * hs),
            with_dim_weights({}, c.n_heads * hs).weight_k};
  return {false, 64, shape.hs_padded(), shape.outputs(), shape.outputs()};
}

}  // namespace

// One execution program of the planner (matmul_plan.h); segment ids are LayerMatmuls.
struct ChipTransformer::Program : FcProgramPlan {
  std::shared_ptr<runtime::Program> execution, caching;
};

// How one matmul is computed: on the host (no programs), or by these programs.
struct ChipTransformer::MatmulPlan {
  std::vector<int> programs;
};

// A layer's whole FFN as one program (compiler::generate_ffn): w1 and w3, the elementwise part,
// w2.
struct ChipTransformer::FfnProgram {
  int k_padded = 0, hidden_padded = 0;
  std::shared_ptr<runtime::Program> execution, caching_up, caching_down;
  compiler::FfnLayer layer;
  compiler::FcPlacement up_at, down_at;
  // fused_layers: the FFN, the residual add and the next layer's q, k, v (generate_ffn_chain).
  // Input [FFN input, K padded; x2 padded to whole groups]; output [w2's; the add's; q, k, v].
  std::shared_ptr<runtime::Program> chain;
  std::vector<std::shared_ptr<runtime::Program>> chain_caching;  // the add's and q, k, v's
  int dim_padded = 0, qkv_outputs = 0;
  std::array<int, 3> qkv_at{};    // output offset of q, k, v in the q, k, v part
  bool values = false;            // the chain computes the next layer's u after q, k, v
  bool rope = false;              // and RoPE's products of its q and k (rope_of)
  compiler::FfnChain chain_desc;  // as generated (keep_rope_products generates it again)
  bool kept = false;              // q's products stay on the chip (keep_rope_products)
  bool v_tilde = false;           // v's groups return v~ (chip_residual: chain_desc.after_r)
};

// The scores of one layer (chip_attention): one program whose segment h holds head h's keys as the
// weights of seq_len outputs (one per position, multiplier and output stage the head's), each group
// reading head h's q~ through in_at (K = head_size padded to 64; the bytes past it meet zero
// weights); a one-row batched FC (fc_batch_codegen.h), since in_at needs the whole row on every
// tile. The keys start as zeros; each token writes its key by caching the groups that hold its
// position again: one caching program per 64-position group, generated at its first token; later
// tokens only replace its parameter bytes (the instructions depend on the placement alone).
struct ChipTransformer::ScoresProgram : FcProgramPlan {
  std::vector<QuantizedMatmul> heads;  // the keys as weights, rows = positions
  int row_bytes = 0, seq_padded = 0;
  // The program also runs the softmax on the scalar core and returns e and 1 / S
  // (compiler::generate_fc_batch_softmax), where scalar memory holds it; else the scores.
  bool softmax = false;
  bool on_chip = false;  // the layer's scores run on the chip (this plan placed them)
  // Without the softmax: the scores program, and [pos / 64] the caching program that writes the
  // key of a position in that group (made when first used).
  std::shared_ptr<runtime::Program> execution;
  std::vector<std::shared_ptr<runtime::Program>> key_writes;
  // With it: [pos / 64] the program that writes the key of a position in that group, then runs
  // the scores and the softmax (made in the constructor at the group's first position, and
  // rewritten to each run's: group_program.h).
  std::vector<GroupProgram> scores_with_key;
  // chip_rope, with the softmax: q~ = the RoPE sum of q's products, in front of the scores
  // (rope_sum_program); the program's input row is then input_bytes long (before the count).
  bool rope = false;
  compiler::FcScoresInput rope_sum;
  RopeSumShape rope_shape;
  int input_bytes = 0;
  // Where the host's row puts each sum group's products (rope_sum_slots; -1: the group reads them
  // from a resident row), empty: group g's at 128 g.
  std::vector<int> row_slots;
  // With chip_key_write: the key's sum in that FC too (rope_shape's keys), its bytes written into
  // the key's column by the program (compiler::FcColumnWrite::from_byte), none from the host.
  bool key_sum = false;
};

// The weighted sum of one layer (WeightedSum::kValueCache; llm/value_sum.h): a one-row batched FC
// (each head's groups read its own exponentials through in_at). One run per token: the program
// first streams every multiplier and the columns up to its position's 64-position group
// (value_sum_prefix) into tile memory, then computes the sum; [pos / 64] such a STAND_ALONE
// program, made at its first token, later tokens replace its parameters.
struct ChipTransformer::ValueSumProgram {
  ValueSumShape shape;
  compiler::FcLayer layer;
  compiler::FcPlacement at;
  std::vector<std::shared_ptr<runtime::Program>> sums;
  bool on_chip = false;
  // Joined to the layer's scores and softmax: [pos / 64] the program that writes the new key and
  // the weight row of pos's v~, computes the scores, the softmax, the multipliers and the sum
  // (made in the constructor; its parameters replaced and its v~ rows' addresses, with
  // chip_key_write its column too, rewritten to each run's position), and the sum it returned,
  // for value_sum_q.
  bool joined = false;
  compiler::FcValueSum join;
  std::vector<GroupProgram> attention;
  std::vector<int8_t> a;
  int a_pos = -1;
  // wo after the sum in that program (join.out, its input laid out as wo_after_sum says: the
  // heads side by side where they can be), which then returns o instead of a.
  bool wo = false;
  // Joined to the chain before it (Joined::values): each group's staging row, a wide unit of its
  // tile (compiler::FcValueWrite), for the chip's write of v~; empty: none.
  std::vector<int> staging;
};

// q, k, v of one layer as one generator layer, and where each sits in its output.
struct ChipTransformer::QkvPart {
  Program program;
  std::array<int, 3> at{};
};

namespace {

// The scores' FULLY_CONNECTED layer of `plan`, its segments over the heads' cached keys: K =
// head_size padded to 64 (plan.k_padded), weights for head_size columns only (weight_k, plan_r15
// L3): a group takes 8 + head_size units and its op reads a head's bytes of q~.
compiler::FcLayer scores_layer(const FcProgramPlan& plan,
                               const std::vector<QuantizedMatmul>& heads) {
  compiler::FcLayer l =
      fc_layer_of(plan, [&](int id) -> const QuantizedMatmul& { return heads[size_t(id)]; });
  l.weight_k = heads.front().cols;
  return l;
}

// `chain` generated with RoPE's products of q and k on the tiles (`rope`, where wanted: its layer
// >= 0) when the generator takes that layout (the products must fit the tiles' output rows:
// compiler::LayoutRejected; any other Error with them is a bug and propagates), else without them;
// false when the chain does not build without them either (the caller's fallback: its programs
// apart). `with_rope` says which; `rejected` (if given) whether the products' layout was.
template <class Chain, class Generate>
bool generate_with_rope(Chain& chain, const compiler::FcTableProducts& rope, Generate generate,
                        compiler::FfnChainPrograms& code, bool& with_rope,
                        bool* rejected = nullptr) {
  if (rejected) *rejected = false;
  if (rope.layer >= 0) {
    chain.products = rope;
    try {
      code = generate(chain);
      with_rope = true;
      return true;
    } catch (const compiler::LayoutRejected&) {
      // e.g. more than 4 output pieces a tile: the chain without the products
      if (rejected) *rejected = true;
    }
  }
  chain.products = {};
  try {
    code = generate(chain);
  } catch (const Error&) {
    return false;  // a chain the generator does not take: its programs run apart
  }
  with_rope = false;
  return true;
}

// u = wo_h v of every head as one generator layer (Int8Transformer::values_of): head h's dim
// outputs at h * dim_padded, each group reading its kv head's slice of v (at v_at in the previous
// layer's output) through in_at, K = head_size padded to 64 (the extra inputs meet zero weights).
// False when the slices are not word-aligned or the groups are too many.
bool values_layer(const Int8Transformer& model, int layer, int v_at, compiler::FcLayer& l,
                  std::vector<int>& in_at) {
  const Config& c = model.config();
  const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
  const int dim_padded = (c.dim + 63) / 64 * 64, k = (hs + 63) / 64 * 64;
  if (hs % 4 != 0 || v_at % 4 != 0 || c.n_heads * dim_padded > 32 * 64) return false;
  l = {};
  l.n = c.n_heads * dim_padded;
  l.k = k;
  l.weights.assign(size_t(l.n) * size_t(k), 0);
  l.mult.assign(size_t(l.n), 0.0f);
  in_at.clear();
  for (int h = 0; h < c.n_heads; ++h) {
    const QuantizedMatmul& q = model.values_of(layer, h);
    for (int r = 0; r < c.dim; ++r) {
      std::copy_n(q.w.data() + size_t(r) * size_t(hs), hs,
                  l.weights.data() + size_t(h * dim_padded + r) * size_t(k));
      l.mult[size_t(h * dim_padded + r)] = q.multiplier[size_t(r)];
    }
    for (int g = 0; g < dim_padded / 64; ++g) {
      l.group_out_zp.push_back(q.out.zero_point + 128);
      l.group_clamp_min.push_back(q.clamp_lo);
      l.group_clamp_max.push_back(q.clamp_hi);
      in_at.push_back(v_at + (h / kv_mul) * hs);
    }
  }
  const QuantizedMatmul& v = model.matmul(layer, LayerMatmul::kV);
  l.in_zp = v.out.zero_point + 128;
  l.in_scale = v.out.scale;
  l.out_zp = l.group_out_zp.front();
  l.out_scale = model.values_of(layer, 0).out.scale;
  l.clamp_min = l.group_clamp_min.front();
  l.clamp_max = l.group_clamp_max.front();
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  return true;
}

}  // namespace

// chip_rope: RoPE's products of layer `layer`'s q and k (at qkv_at in the q, k, v layer's output)
// on the tiles (compiler::FcTableProducts): every group of q, then of k, the table piece of its
// channels; the second table is sin' pair-swapped (rope_input), so that R_j = MUL(x_j, sin'_(j^1))
// is P2 at j^1 (rope_output).
compiler::FcTableProducts ChipTransformer::rope_of(int layer, int rope_layer,
                                                   const std::array<int, 3>& qkv_at) const {
  const QuantizedAttention& a = weights()->attention[size_t(layer)];
  compiler::FcTableProducts rope;
  rope.layer = rope_layer;
  rope.tables = whole_groups(config().dim) / 64;
  for (const int m : {0, 1}) {
    const QuantizedRope& q = m == 0 ? a.rope_q : a.rope_k;
    const int rows = matmul(layer, LayerMatmul(m)).rows;
    for (int g = 0; g < whole_groups(rows) / 64; ++g)
      rope.groups.push_back({qkv_at[size_t(m)] / 64 + g, g, q.in_zero_point + 128, q.mul_mult});
  }
  return rope;
}

int ChipTransformer::rope_input(int pos, int8_t* in, int at) {
  const Config& c = config();
  const int n = whole_groups(c.dim), tables_at = compiler::fc_tables_at(at);
  if (rope_tables_pos_ != pos) {  // every layer's program of this token takes the same tables
    // Piece by piece (compiler::FcTableProducts): 64 bytes of cos, then the same channels' sin'.
    rope_tables_.assign(size_t(2 * n), 0);
    std::vector<int8_t> cos_q(size_t(n), 0), sin_q(size_t(n), 0);
    rope_tables(pos, c.dim, c.head_size(), cos_q.data(), sin_q.data());
    for (int j = 0; j < c.dim; ++j) {
      const size_t byte = size_t(128 * (j / 64) + j % 64);
      rope_tables_[byte] = cos_q[size_t(j)];
      rope_tables_[byte + 64] = sin_q[size_t(j ^ 1)];
    }
    rope_tables_pos_ = pos;
    ++stats_.rope_tables;
  }
  std::fill(in + at, in + tables_at, int8_t{0});
  std::copy(rope_tables_.begin(), rope_tables_.end(), in + tables_at);
  return compiler::fc_tables_bytes(at, n / 64);
}

int ChipTransformer::rope_output_bytes(const compiler::FcTableProducts& products) const {
  int bytes = 0;
  for (const compiler::FcProductGroup& g : products.groups) bytes += g.keep ? 0 : 128;
  return bytes;
}

void ChipTransformer::rope_output(int layer, int pos, const int8_t* out,
                                  const compiler::FcTableProducts& products) {
  const Config& c = config();
  rope_p1_.assign(size_t(c.dim + c.kv_dim()), 0);
  rope_p2_.assign(rope_p1_.size(), 0);
  int at = 0;
  size_t i = 0;  // rope_of's order: q's groups, then k's
  for (const int m : {0, 1}) {
    const int rows = matmul(layer, LayerMatmul(m)).rows, first = m == 0 ? 0 : c.dim;
    for (int g = 0; g < whole_groups(rows) / 64; ++g, ++i) {
      if (products.groups.at(i).keep) continue;  // the scores' program reads them on the chip
      for (int j = 0; j < 64 && 64 * g + j < rows; ++j) {
        rope_p1_[size_t(first + 64 * g + j)] = out[at + j];
        rope_p2_[size_t(first + ((64 * g + j) ^ 1))] = out[at + 64 + j];
      }
      at += 128;
    }
  }
  rope_layer_ = layer;
  rope_pos_ = pos;
}

void ChipTransformer::stash_qkv(int layer, bool rope, const int8_t* out,
                                const std::array<int, 3>& at, int outputs) {
  zeroed_layer_ = rope ? layer : -1;
  if (!rope) {
    stash_.assign(out, out + outputs);
    return;
  }
  // q's and k's bytes stayed on the chip (their products came back): their zero points here, so
  // that what the host derives from them is defined (with the products nothing reads it).
  stash_.assign(size_t(outputs), 0);
  for (size_t m = 0; m < 2; ++m)
    std::fill(stash_.begin() + at[m], stash_.begin() + at[m + 1],
              static_cast<int8_t>(matmul(layer, LayerMatmul(m)).out.zero_point));
  std::copy(out, out + (outputs - at[2]), stash_.begin() + at[2]);
}

void ChipTransformer::qkv(int layer, int pos, const float* x, float* q, float* k, float* v) {
  pos_ = pos;
  Int8Transformer::qkv(layer, pos, x, q, k, v);
}

float ChipTransformer::rms_scale_q(int layer, const int8_t* xq, const float* x) {
  if (r_stash_layer_ != layer) {
    // Where the chain returns r the host has no bytes of its own to take it from (xq is stale).
    if (layer > 0 && ffns_[size_t(layer - 1)].chain &&
        ffns_[size_t(layer - 1)].chain_desc.rms.layer >= 0)
      fail("layer ", layer, "'s RMSNorm scale was not returned by its chain");
    return Int8Transformer::rms_scale_q(layer, xq, x);
  }
  r_stash_layer_ = -1;
  if (r_stash_pos_ != pos_)
    fail("layer ", layer, "'s RMSNorm scale at ", pos_, " was returned at position ", r_stash_pos_);
  return r_stash_;
}

void ChipTransformer::rope_products_q(int layer, int pos, const int8_t* q, const int8_t* k,
                                      int8_t* p1, int8_t* p2) {
  if (rope_layer_ != layer || rope_pos_ != pos) {
    // The host's products from q and k are right only where the program returned q and k; where
    // it returned their products instead, q and k are zero points and a missing hand-off is a bug.
    if (zeroed_layer_ == layer)
      fail("layer ", layer, "'s RoPE products at ", pos, " were not returned by its program");
    Int8Transformer::rope_products_q(layer, pos, q, k, p1, p2);
    return;
  }
  rope_layer_ = -1;
  zeroed_layer_ = -1;
  std::copy(rope_p1_.begin(), rope_p1_.end(), p1);
  std::copy(rope_p2_.begin(), rope_p2_.end(), p2);
}

bool keep_early_placement(const ChipPathStats& plain, const ChipPathStats& early) {
  return early.rest_layers > 0 && early.joined_layers >= plain.joined_layers &&
         early.rope_kept_layers >= plain.rope_kept_layers;
}

ChipTransformer::ChipTransformer(const Checkpoint& ck, ThreadPool& pool,
                                 const Calibration& calibration, runtime::EdgeTpu& tpu,
                                 Int8Options options)
    : Int8Transformer(ck, pool, calibration, options), tpu_(tpu) {
  if (options.layers_per_run < 0)
    fail("layers_per_run = ", options.layers_per_run,
         ": 0 (as many layers a run as fit) or N > 0 (at most N)");
  const Config& c = ck.config;
  TileAllocator tiles;
  int widest = 0;
  plans_.resize(size_t(c.n_layers) * kLayerMatmuls);
  ffns_.resize(size_t(c.n_layers));
  widest = std::max(c.dim, c.hidden_dim) + kMaxOutputs;
  values_on_chip_.assign(size_t(c.n_layers), false);
  // WeightedSum::kValueCache reads v~, not u: the programs leave u out (its weights' room goes to
  // the weighted sums' v~), and the host's u (values_q's fallback) is not read either.
  const bool want_u = !(options.fused_layers && options.chip_attention &&
                        options.weighted_sum == WeightedSum::kValueCache);
  const bool first_built = options.fused_layers && first_layer(tiles, want_u);
  // Each host matmul's reason in the order they run; the first one still on the host once every
  // program is placed is stats_.host_reason (join_attention may move a value cache's wo on).
  struct HostMatmul {
    int layer;
    bool value_cache_wo;
    std::string reason;
  };
  std::vector<HostMatmul> host_matmuls;
  for (int l = 0; l < c.n_layers; ++l) {
    const bool ffn_fused = fuse_ffn(l, tiles);
    if (ffn_fused) {
      stats_.chip_matmuls += 3;
      ++stats_.programs;
      ++stats_.fused_ffns;
      if (options.fused_layers && l + 1 < c.n_layers &&
          ((want_u && chain_ffn(l, tiles, true)) || chain_ffn(l, tiles, false))) {
        ++stats_.chained_layers;
        stats_.rms_layers += ffns_[size_t(l)].chain_desc.rms.layer >= 0;
        stats_.chip_matmuls += 3;  // the next layer's q, k, v
      }
    }
    for (const std::vector<LayerMatmul>& set : input_sets()) {
      if (ffn_fused && (set.front() == LayerMatmul::kW1 || set.front() == LayerMatmul::kW2))
        continue;
      // Computed by the previous layer's chain, or layer 0's program.
      if (set.front() == LayerMatmul::kQ &&
          ((l > 0 && ffns_[size_t(l - 1)].chain) || (l == 0 && first_built)))
        continue;
      // fused_layers: wo is folded into the value cache (u = wo_h v, computed after v).
      if (options.fused_layers && set.front() == LayerMatmul::kO) {
        // WeightedSum::kValueCache: wo reads the weighted sum's bytes, on the host (not built on
        // the chip yet); the u the chain computes is not read.
        const bool value_cache =
            weights()->chip_attention() && options.weighted_sum == WeightedSum::kValueCache;
        const bool on_chip = values_on_chip_[size_t(l)] && !value_cache;
        ++(on_chip ? stats_.chip_matmuls : stats_.host_matmuls);
        if (!on_chip)
          host_matmuls.push_back(
              {l, value_cache,
               value_cache ? cat("layer ", l, " wo after the value cache's weighted sum")
                           : cat("layer ", l, " wo (folded into the value cache): no room")});
        continue;
      }
      std::vector<PlannedMatmul> planned;
      for (LayerMatmul m : set) {
        const QuantizedMatmul& q = matmul(l, m);
        widest = std::max(
            {widest, (q.cols + kKStep - 1) / kKStep * kKStep, whole_groups(q.rows) + kMaxOutputs});
        planned.push_back({int(m), &q, matmul_name(m)});
      }
      InputSetPlan plan = plan_input_set(planned, l, tiles);
      if (!plan.host_reason.empty()) host_matmuls.push_back({l, false, plan.host_reason});
      for (FcProgramPlan& made : plan.programs) {
        Program p;
        static_cast<FcProgramPlan&>(p) = std::move(made);
        const compiler::FcLayer fc = fc_layer(l, p);
        compiler::FcPrograms code;
        if (p.k_padded <= 1024) {
          code = compiler::generate_fc(fc, p.placement);
        } else {  // the same parameters; outputs in the FC's order at one row
          code.execution = compiler::generate_fc_batch(fc, p.placement, 1);
          code.caching = compiler::fc_caching(fc, p.placement);
        }
        stats_.resident_bytes += static_cast<int64_t>(code.caching.parameters.size());
        p.execution = std::make_shared<runtime::Program>(std::move(code.execution));
        p.caching = std::make_shared<runtime::Program>(std::move(code.caching));
        programs_.push_back(std::move(p));
        ++stats_.programs;
        for (const Program::Segment& s : programs_.back().segments) {
          std::vector<int>& list = plans_[size_t(l) * kLayerMatmuls + size_t(s.id)].programs;
          if (list.empty() || list.back() != int(programs_.size()) - 1)
            list.push_back(int(programs_.size()) - 1);
        }
      }
      for (LayerMatmul m : set) {
        const bool host =
            std::find(plan.on_host.begin(), plan.on_host.end(), int(m)) != plan.on_host.end();
        ++(host ? stats_.host_matmuls : stats_.chip_matmuls);
      }
    }
  }
  // Layers whose v~ the chip computes: layer 0's (first_layer) and each chain's next layer's.
  stats_.value_tilde_layers = first_v_tilde_;
  for (const FfnProgram& p : ffns_) stats_.value_tilde_layers += p.chain != nullptr && p.v_tilde;
  if (weights()->chip_attention() && options.chip_scores)
    for (int l = 0; l < c.n_layers; ++l) stats_.scores_layers += scores_program(l, tiles);
  bool late_wo = false;
  const bool value_cache =
      weights()->chip_attention() && options.weighted_sum == WeightedSum::kValueCache;
  if (value_cache) {
    value_sums_.resize(size_t(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) stats_.value_sum_layers += value_sum_program(l, tiles);
    // Where the chains may join the value cache (value_sum_program's staging rows), wo comes
    // last (join_wo): the RoPE sums and q's kept products, which the join needs, first.
    late_wo = std::any_of(value_sums_.begin(), value_sums_.end(),
                          [](const ValueSumProgram& v) { return !v.staging.empty(); });
  }
  // The attention's placements from here on; with `early` the last layer's wo and rest placed
  // first (early_rest).
  const auto place_attention = [&](bool early, bool two_a_tile) {
    if (early && !early_rest(tiles, two_a_tile)) return false;
    if (value_cache)
      for (int l = 0; l < c.n_layers; ++l)
        stats_.attention_layers += join_attention(l, tiles, !late_wo);
    // chip_rope: q's RoPE sum in front of the scores where the softmax runs there, placed after
    // the weighted sums and wo (which save more per byte of tile memory; not wo where the value
    // cache may join the chains: a join saves a run, and needs the sums and q's kept products).
    if (options.chip_rope)
      for (int l = 0; l < int(scores_.size()); ++l)
        if (scores_[size_t(l)].softmax)
          stats_.rope_sum_layers += rope_sum_program(l, scores_[size_t(l)], tiles);
    // Then the key's sum beside q~'s where the chip writes the key's column and room is left.
    if (options.chip_rope && options.chip_key_write)
      for (int l = 0; l < int(scores_.size()); ++l)
        if (scores_[size_t(l)].rope)
          stats_.key_sum_layers += key_sum_program(l, scores_[size_t(l)], tiles);
    // Then q's products kept on the tiles for the sums that read them (a row per tile, shared by
    // the layers).
    if (options.chip_rope && options.keep_rope_products)
      for (int l = 0; l < int(scores_.size()); ++l)
        if (scores_[size_t(l)].rope)
          stats_.rope_kept_layers += keep_rope_products(l, scores_[size_t(l)], tiles);
    for (const ScoresProgram& p : scores_)
      stats_.rope_mult_layers += p.rope && !p.rope_sum.mult_base.empty();
    for (int l = 0; l < int(value_sums_.size()); ++l) join_wo(l, tiles);  // (counted there)
    for (const HostMatmul& h : host_matmuls)
      if (!(h.value_cache_wo && value_sums_[size_t(h.layer)].wo)) {
        stats_.host_reason = h.reason;
        break;
      }
    for (const ScoresProgram& p : scores_)
      if (p.softmax) stats_.scores_row_bytes += p.input_bytes + compiler::kSoftmaxCountBytes;
    // Last, each chain joined to the next layer's scores' program where both have their final form:
    // one run for the two, and the scores' row is the count alone.
    joined_.resize(scores_.size());
    if (options.join_scores && options.chip_rope && options.chip_key_write && options.chip_rms)
      for (int l = 0; l < int(scores_.size()); ++l)
        if (join_scores(l, tiles)) {
          ++stats_.joined_layers;
          --stats_.programs;
          stats_.scores_row_bytes -= scores_[size_t(l)].input_bytes;
        }
    return true;
  };
  // With late_wo the last layer's rest may find no room after the sums (rand15M at R0: no tile
  // had a wo group's 392 units left, docs/llm.md "rand15M's tile fill"): then all of it is placed
  // again with that layer's wo and rest first, and kept only where that gains the rest and costs no
  // layer its join or its kept products (else the first placement stays).
  const bool eligible = late_wo && options.join_layers && options.chip_residual &&
                        options.join_scores && options.chip_rope && options.chip_key_write &&
                        options.chip_rms && options.keep_rope_products;
  // What place_attention changes, kept to place it again and to go back.
  struct PlacementState {
    decltype(ChipTransformer::scores_) scores;
    decltype(ChipTransformer::value_sums_) value_sums;
    decltype(ChipTransformer::ffns_) ffns;
    decltype(ChipTransformer::first_chain_) first_chain;
    decltype(ChipTransformer::first_) first;
    decltype(ChipTransformer::first_kept_) first_kept;
    decltype(ChipTransformer::kept_rows_) kept_rows;
    decltype(ChipTransformer::rope_copies_) rope_copies;
    ChipPathStats stats;
    decltype(ChipTransformer::joined_) joined;
    decltype(ChipTransformer::early_wo_) early_wo;
    decltype(ChipTransformer::early_rest_) early_rest;
    TileAllocator tiles;
  };
  const auto state = [&] {
    return PlacementState{.scores = scores_,
                          .value_sums = value_sums_,
                          .ffns = ffns_,
                          .first_chain = first_chain_,
                          .first = first_,
                          .first_kept = first_kept_,
                          .kept_rows = kept_rows_,
                          .rope_copies = rope_copies_,
                          .stats = stats_,
                          .joined = joined_,
                          .early_wo = early_wo_,
                          .early_rest = early_rest_,
                          .tiles = tiles};
  };
  const auto restore = [&](const PlacementState& from) {
    scores_ = from.scores;
    value_sums_ = from.value_sums;
    ffns_ = from.ffns;
    first_chain_ = from.first_chain;
    first_ = from.first;
    first_kept_ = from.first_kept;
    kept_rows_ = from.kept_rows;
    rope_copies_ = from.rope_copies;
    stats_ = from.stats;
    joined_ = from.joined;
    early_wo_ = from.early_wo;
    early_rest_ = from.early_rest;
    tiles = from.tiles;
  };
  if (eligible) {
    const PlacementState before = state();
    place_attention(false, true);
    if (stats_.rest_layers == 0) {
      const PlacementState plain = state();
      restore(before);
      early_rest_refused_ = false;
      bool placed = place_attention(true, true);
      // Where the generator refused the early rest's two groups of one FC on a tile, all of it
      // again from the tiles as they were, the early rest one group a tile.
      if (placed && early_rest_refused_) {
        restore(before);
        placed = place_attention(true, false);
      }
      if (!placed || !keep_early_placement(plain.stats, stats_)) restore(plain);
    }
  } else {
    place_attention(false, true);
  }
  // Then layer 1's joined program behind layer 0's rest: one run a token for two layers.
  if (options.layers_per_run != 1) {
    const int composed = compose(tiles);
    stats_.composed_layers += composed;
    stats_.programs -= composed;
  }
  for_each_placed_rest_fc([&](const compiler::FcLayer&, const compiler::FcPlacement& p) {
    for (const int w : p.weight_units) stats_.rest_shared_groups += w >= 0;
  });
  stats_.max_tile_units = tiles.max_fill();
  stats_.tile_units = tiles.fills();
  stats_.rope_kept_rows =
      int(std::count_if(kept_rows_.begin(), kept_rows_.end(), [](int row) { return row >= 0; }));
  // A chain returns at most w2 output, q + k + v (1024) and u (32 groups).
  widest = std::max(widest, 4096 + whole_groups(c.dim));
  xq_.resize(size_t(widest));
  yq_.resize(size_t(widest));
  for (Pending& p : pending_) p.yq.resize(size_t(std::max(c.dim, c.hidden_dim)));
  for (int l = 0; l < int(scores_.size()); ++l) key_group_programs(l);
  // The programs writing the key made here (the first ones as trials, the joined ones; a joined
  // layer's trial never runs).
  for (size_t l = 0; l < scores_.size(); ++l)
    for (const GroupProgram& made : scores_[l].scores_with_key)
      stats_.key_programs += made.program != nullptr && !is_joined(int(l));
  for (size_t l = 0; l < value_sums_.size(); ++l)
    for (const GroupProgram& made : value_sums_[l].attention)
      stats_.key_programs += made.program != nullptr && !is_joined(int(l));
  stats_.key_programs += stats_.joined_programs;
  rest_caching_ = rest_caching();  // (the rests' placement is final here)
  cache_all();
}

ChipTransformer::~ChipTransformer() = default;

// The layer's FFN as one program when w1, w3 and w2 all fit the generator (the hidden size padded
// to whole groups is w2's K: at most 1024) and their weights fit in tile memory; else false and
// nothing is placed.
bool ChipTransformer::fuse_ffn(int layer, TileAllocator& tiles) {
  const QuantizedMatmul &w1 = matmul(layer, LayerMatmul::kW1),
                        &w2 = matmul(layer, LayerMatmul::kW2);
  const int k_padded = (w1.cols + kKStep - 1) / kKStep * kKStep;
  const int hidden = whole_groups(w1.rows), groups = compiler::fc_groups(hidden);
  if (!compiler::fc_unsupported(std::min(2 * hidden, 1024), k_padded).empty() ||
      !compiler::fc_unsupported(w2.rows <= 1024 ? w2.rows : 0, hidden).empty() || 2 * groups > 32)
    return false;
  TileAllocator trial = tiles;
  compiler::FcPlacement up_at, down_at;
  const int up_k = with_dim_weights({}, w1.cols).weight_k;
  if (!trial.place_pairs(groups, compiler::fc_units_per_tile(up_k, false), up_at) ||
      !trial.place(compiler::fc_groups(w2.rows), compiler::fc_units_per_tile(hidden, false),
                   down_at))
    return false;
  tiles = trial;
  // w1's and w3's groups side by side, then w2, as the generator's two layers.
  const FfnPlan plan = plan_ffn(k_padded, w1.rows, w2.rows);
  Program up, down;
  static_cast<FcProgramPlan&>(up) = plan.up;
  static_cast<FcProgramPlan&>(down) = plan.down;
  compiler::FfnLayer f;
  f.up = with_dim_weights(fc_layer(layer, up), w1.cols);
  f.down = fc_layer(layer, down);
  set_ffn_gate(gate_of(layer), f);
  compiler::FfnPrograms code = compiler::generate_ffn(f, up_at, down_at);
  FfnProgram& p = ffns_[size_t(layer)];
  p.k_padded = k_padded;
  p.hidden_padded = hidden;
  p.layer = f;
  p.up_at = up_at;
  p.down_at = down_at;
  stats_.resident_bytes +=
      static_cast<int64_t>(code.caching_up.parameters.size() + code.caching_down.parameters.size());
  p.execution = std::make_shared<runtime::Program>(std::move(code.execution));
  p.caching_up = std::make_shared<runtime::Program>(std::move(code.caching_up));
  p.caching_down = std::make_shared<runtime::Program>(std::move(code.caching_down));
  return true;
}

// fused_layers: the layer's fused FFN, the residual add (a pairwise matmul: output i reads x2[i]
// and w2's output i, weights a and b, the zero points' difference as its bias) and the next
// layer's q, k, v as one program, when the generator and the tile memory take them; else false and
// nothing is placed (the add then runs on the host and q, k, v as their own program).
ChipTransformer::QkvPart ChipTransformer::qkv_part(int layer) const {
  QkvPart part;
  part.program.k_padded = whole_groups(config().dim);
  for (LayerMatmul m : {LayerMatmul::kQ, LayerMatmul::kK, LayerMatmul::kV}) {
    const int rows = matmul(layer, m).rows;
    part.at[size_t(m)] = part.program.outputs;
    part.program.segments.push_back({int(m), 0, rows, part.program.outputs});
    part.program.outputs += whole_groups(rows);
  }
  return part;
}

compiler::FcChainAfterR ChipTransformer::value_tilde_groups(int layer, int v_at,
                                                            compiler::FcLayer& fc,
                                                            const compiler::FcPlacement& at,
                                                            TileAllocator& tiles) const {
  compiler::FcChainAfterR after;
  if (!options().chip_residual) return after;
  const int kv = config().kv_dim();
  const std::vector<float>& base = weights()->attention[size_t(layer)].v_base;
  TileAllocator trial = tiles;
  bool resident = true;
  for (int g = v_at / 64; g < compiler::fc_groups(fc.n); ++g) {
    fc.group_out_zp[size_t(g)] = 128;  // v~'s zero point 0 in the chip's uint8
    fc.group_clamp_min[size_t(g)] = -kSymmetricClamp;
    fc.group_clamp_max[size_t(g)] = kSymmetricClamp;
    after.groups.push_back(g);
    for (int j = 64 * g - v_at; j < 64 * g - v_at + 64; ++j) {
      after.base.push_back(j < kv ? base[size_t(j)] : 0.0f);
      after.padding.push_back(j >= kv);
    }
    const int unit = resident ? trial.take(at.tiles[size_t(g)], 4) : -1;
    resident = unit >= 0;
    after.const_units.push_back(unit);
  }
  if (resident) {
    tiles = trial;
  } else {
    after.const_units.clear();
  }
  return after;
}

// fused_layers: layer 0's q, k, v and u as one program (the chains compute the later layers').
bool ChipTransformer::first_layer(TileAllocator& tiles, bool with_values) {
  const QkvPart part = qkv_part(0);
  const Program& qkv = part.program;
  if (!compiler::fc_unsupported(qkv.outputs, qkv.k_padded).empty()) return false;
  compiler::FcChain chain;
  chain.layers.push_back(with_dim_weights(fc_layer(0, qkv), config().dim));
  compiler::FcLayer u;
  std::vector<int> in_at;
  if (with_values && !values_layer(*this, 0, part.at[2], u, in_at)) return false;
  TileAllocator trial = tiles;
  compiler::FcPlacement qkv_at, u_at;
  if (!trial.place(compiler::fc_groups(qkv.outputs), compiler::fc_units_per_tile(chain.layers[0]),
                   qkv_at) ||
      (with_values && !trial.place(compiler::fc_groups(u.n), compiler::fc_units_per_tile(u), u_at)))
    return false;
  chain.at = {qkv_at};
  chain.output = {true};
  if (with_values) {
    u_at.in_at = in_at;
    chain.layers.push_back(u);
    chain.at.push_back(u_at);
    chain.output.push_back(true);
  }
  // chip_residual: v's groups wait for r (the host's, in a block after the input) and return v~
  // (with u they do not: u reads v); where the generator does not take that, v as before (the host
  // computes v~).
  const compiler::FcChain plain = chain;
  const TileAllocator plain_tiles = trial;
  if (!with_values)
    chain.after_r = value_tilde_groups(0, part.at[2], chain.layers[0], qkv_at, trial);
  if (!chain.after_r.groups.empty()) chain.after_r.layer = 0;
  const compiler::FcTableProducts rope =
      want_rope() ? rope_of(0, 0, part.at) : compiler::FcTableProducts{};
  const auto generate = [](const compiler::FcChain& c) { return compiler::generate_fc_chain(c); };
  compiler::FfnChainPrograms code;
  if (!generate_with_rope(chain, rope, generate, code, first_rope_)) {
    if (chain.after_r.layer < 0) return false;
    chain = plain;
    trial = plain_tiles;
    if (!generate_with_rope(chain, rope, generate, code, first_rope_)) return false;
  }
  first_v_tilde_ = chain.after_r.layer >= 0;
  first_chain_ = std::move(chain);
  stats_.rope_layers += first_rope_;
  tiles = trial;
  first_ = std::make_shared<runtime::Program>(std::move(code.execution));
  for (container::Executable& e : code.caching) {
    stats_.resident_bytes += static_cast<int64_t>(e.parameters.size());
    first_caching_.push_back(std::make_shared<runtime::Program>(std::move(e)));
  }
  values_on_chip_[0] = with_values;
  stats_.chip_matmuls += 3;
  ++stats_.programs;
  return true;
}

bool ChipTransformer::chain_ffn(int layer, TileAllocator& tiles, bool with_values) {
  const Config& c = config();
  FfnProgram& p = ffns_[size_t(layer)];
  const int dim_padded = whole_groups(c.dim);
  const QuantizedAdd& add = add_of(layer);
  const QkvPart part = qkv_part(layer + 1);
  const Program& qkv = part.program;
  if (!compiler::fc_unsupported(qkv.outputs, dim_padded).empty() ||
      !compiler::fc_unsupported(dim_padded, 2 * dim_padded).empty() ||
      p.k_padded + dim_padded > 1024)
    return false;
  TileAllocator trial = tiles;
  compiler::FcPlacement add_at, qkv_at, u_at;
  compiler::FcLayer u;
  if (with_values && !values_layer(*this, layer + 1, part.at[2], u, u_at.in_at)) return false;
  if (!trial.place(compiler::fc_groups(dim_padded), compiler::fc_units_per_tile(128, true),
                   add_at) ||
      !trial.place(compiler::fc_groups(qkv.outputs),
                   compiler::fc_units_per_tile(with_dim_weights({}, c.dim).weight_k, false),
                   qkv_at))
    return false;
  const TileAllocator before_u = trial;
  if (with_values) {
    const std::vector<int> in_at = u_at.in_at;
    if (!trial.place(compiler::fc_groups(u.n), compiler::fc_units_per_tile(u), u_at)) return false;
    u_at.in_at = in_at;
  }
  const compiler::FcLayer a = residual_add_layer(add, c.dim);
  compiler::FfnChain chain;
  chain.ffn = p.layer;
  chain.extra_k = dim_padded;
  chain.next = {a, with_dim_weights(fc_layer(layer + 1, qkv), c.dim)};
  // chip_residual: v's groups wait for the chain's r and return v~ (with u they do not: u reads v).
  const TileAllocator plain_tiles = trial;
  if (!with_values && options().chip_rms)
    chain.after_r = value_tilde_groups(layer + 1, part.at[2], chain.next[1], qkv_at, trial);
  if (!chain.after_r.groups.empty()) chain.after_r.layer = 1;
  chain.next_at = {add_at, qkv_at};
  chain.next_output = {false, true};
  if (with_values) {
    chain.next.push_back(u);
    chain.next_at.push_back(u_at);
    chain.next_output.push_back(true);
  }
  chain.output_down = true;
  chain.pairwise = true;
  if (options().chip_rms) {
    // r of the add's bytes, which the next layer's q, k and v read (Int8Transformer::rms_scale_q).
    const QParams in = matmul(layer + 1, LayerMatmul::kQ).in;
    chain.rms = {0, c.dim, in.zero_point + 128, rms_mean_multiplier(in.scale, c.dim), "r"};
  }
  compiler::FfnChainPrograms code;
  const auto generate = [&](const compiler::FfnChain& c) {
    return compiler::generate_ffn_chain(c, p.up_at, p.down_at);
  };
  const compiler::FcTableProducts rope =
      want_rope() ? rope_of(layer + 1, 1, part.at) : compiler::FcTableProducts{};
  bool rejected = false;
  if (!generate_with_rope(chain, rope, generate, code, p.rope, &rejected)) {
    if (chain.after_r.layer < 0) return false;
    // Without v~ on the chip (the host computes it from the add's bytes).
    chain.after_r = {};
    chain.next[1] = with_dim_weights(fc_layer(layer + 1, qkv), c.dim);
    trial = plain_tiles;
    if (!generate_with_rope(chain, rope, generate, code, p.rope, &rejected)) return false;
  }
  // Where the next layer's scores can join this chain (the products on the tiles are a condition;
  // alone they cost more than they save, docs/llm.md) and the products did not fit the tiles'
  // output rows where u's groups fill them (placed by memory alone): u again, each tile taking no
  // more groups than the rows w2's pieces, q's, k's and v's (two pieces a multiplied group) leave
  // there; kept only where the chain then builds with them.
  const Int8Options& o = options();
  if (rejected && with_values && o.join_scores && o.chip_scores && o.chip_key_write && o.chip_rms &&
      o.keep_rope_products) {
    std::array<int, kPlanTiles> room;
    room.fill(compiler::kChainOutPieces);
    for (const int t : p.down_at.tiles) --room[size_t(t)];
    for (const int t : qkv_at.tiles) --room[size_t(t)];
    for (const compiler::FcProductGroup& pg : rope.groups)  // two products for the group's piece
      --room[size_t(qkv_at.tiles.at(size_t(pg.group)))];
    for (int& r : room) r = std::max(r, 0);
    TileAllocator retrial = before_u;
    compiler::FcPlacement at;
    compiler::FfnChain again = chain;
    compiler::FfnChainPrograms more;
    bool with_rope = false;
    if (retrial.place(compiler::fc_groups(u.n), compiler::fc_units_per_tile(u), at, room)) {
      at.in_at = u_at.in_at;
      again.next_at.back() = at;
      if (generate_with_rope(again, rope, generate, more, with_rope) && with_rope) {
        chain = std::move(again);
        code = std::move(more);
        trial = retrial;
        p.rope = true;
      }
    }
  }
  p.v_tilde = chain.after_r.layer >= 0;
  p.chain_desc = std::move(chain);
  stats_.rope_layers += p.rope;
  tiles = trial;
  p.dim_padded = dim_padded;
  p.qkv_outputs = qkv.outputs;
  p.qkv_at = part.at;
  p.values = with_values;
  values_on_chip_[size_t(layer + 1)] = with_values;
  p.chain = std::make_shared<runtime::Program>(std::move(code.execution));
  for (size_t i = 2; i < code.caching.size(); ++i) {  // up's and down's are the FFN's
    stats_.resident_bytes += static_cast<int64_t>(code.caching[i].parameters.size());
    p.chain_caching.push_back(std::make_shared<runtime::Program>(std::move(code.caching[i])));
  }
  return true;
}

bool ChipTransformer::scores_program(int layer, TileAllocator& tiles) {
  const Config& c = ck_.config;
  const int hs = c.head_size();
  // Weights for head_size columns (a multiple of 4, checked below; scores_layer): each group's op
  // reads its head's bytes of q~, the last head's within the row.
  const int k = whole_groups(hs), seq_padded = whole_groups(c.seq_len);
  const int row_bytes = whole_groups(std::max(c.dim, c.n_heads * hs));
  const QuantizedAttention& a = weights()->attention[size_t(layer)];
  ScoresProgram p;
  p.k_padded = k;
  p.row_bytes = row_bytes;
  p.seq_padded = seq_padded;
  for (int h = 0; h < c.n_heads; ++h) {
    QuantizedMatmul m;
    m.rows = c.seq_len;
    m.cols = hs;
    m.w.assign(size_t(c.seq_len) * size_t(hs), 0);
    m.w_scale.assign(size_t(c.seq_len), 1.0f);
    m.w_rowsum.assign(size_t(c.seq_len), 0);
    m.in = a.q[size_t(h)];
    m.out = a.score[size_t(h)];
    m.multiplier.assign(size_t(c.seq_len), a.score_mult[size_t(h)]);
    m.clamp_lo = a.score_lo[size_t(h)];
    m.clamp_hi = a.score_hi[size_t(h)];
    p.heads.push_back(std::move(m));
    p.segments.push_back({h, 0, c.seq_len, p.outputs});
    p.outputs += seq_padded;
    for (int g = 0; g < seq_padded / 64; ++g) p.placement.in_at.push_back(h * hs);
  }
  const int groups = compiler::fc_groups(p.outputs), slots = groups > kPlanTiles ? 2 : 1;
  if (hs % 4 != 0 || p.outputs > kMaxOutputs) return false;
  const compiler::FcLayer fc = scores_layer(p, p.heads);
  TileAllocator trial = tiles;
  if (!compiler::fc_batch_unsupported(fc, 1, slots, row_bytes).empty() ||
      !trial.place(groups, compiler::fc_units_per_tile(fc), p.placement))
    return false;
  tiles = trial;
  p.softmax = compiler::fc_batch_softmax_unsupported(c.n_heads, seq_padded).empty() &&
              compiler::fc_batch_unsupported(fc, 1, slots, row_bytes + compiler::kSoftmaxCountBytes)
                  .empty();
  if (!p.softmax)
    p.execution = std::make_shared<runtime::Program>(
        compiler::generate_fc_batch(fc, p.placement, 1, row_bytes));
  p.on_chip = true;
  stats_.resident_bytes +=
      static_cast<int64_t>(compiler::fc_caching(fc, p.placement).parameters.size());
  ++stats_.programs;
  stats_.softmax_layers += p.softmax;
  stats_.key_write_layers += p.softmax && options().chip_key_write;
  p.input_bytes = row_bytes;
  p.key_writes.resize(size_t(p.seq_padded / 64));
  p.scores_with_key.assign(size_t(p.seq_padded / 64), {});
  scores_.resize(size_t(c.n_layers));
  scores_[size_t(layer)] = std::move(p);
  return true;
}

// q~ from q's products in front of the scores (llm/rope_sum.h), where its groups fit.
bool ChipTransformer::rope_sum_program(int layer, ScoresProgram& p, TileAllocator& tiles) {
  const Config& c = ck_.config;
  p.rope_sum.at = {};
  p.rope_shape = {c.dim};
  compiler::FcLayer& l = p.rope_sum.layer;
  l = rope_sum_layer(weights()->attention[size_t(layer)].rope_q, p.rope_shape, p.rope_sum.at.in_at);
  const int outputs = l.n, groups = compiler::fc_groups(outputs);
  int slots_end = 0;  // (every group reads the host's row until keep_rope_products moves some)
  rope_sum_slots(groups, {}, slots_end);
  const int row = rope_scores_row_bytes(p.row_bytes, outputs, slots_end);
  TileAllocator trial = tiles;
  std::array<int, kPlanTiles> copies = rope_copies_;
  // Where q's products can stay on the tiles, each group on the tile that computes its products
  // (keep_rope_products reads them there); else the least-filled tiles.
  std::vector<int> on;
  for (const auto& [tile, byte] : q_product_places(layer)) on.push_back(tile);
  const int copy_units = compiler::fc_units_per_tile(l);
  // The multipliers' form first: their constants' rows take aux units only where it loops.
  rope_multipliers_from_r(p, layer);
  const auto place = [&] {
    trial = tiles;
    copies = rope_copies_;
    const int aux = rope_aux_units(p.rope_sum.base_rows);
    if (options().keep_rope_products && int(on.size()) == groups) {
      TileAllocator there = trial;
      std::array<int, kPlanTiles> c = copies;
      if (there.place_sharing_on(on, aux, copy_units, c, p.rope_sum.at)) {
        trial = there;
        copies = c;
        return true;
      }
    }
    return trial.place_sharing(groups, aux, copy_units, copies, p.rope_sum.at);
  };
  const auto refused = [&] {
    p.rope = false;
    p.input_bytes = p.row_bytes;
    p.rope_sum.mult_base.clear();
    p.rope_sum.mult_padding.clear();
    p.rope_sum.base_rows = false;
    return false;
  };
  if (groups > kPlanTiles ||
      !compiler::fc_batch_unsupported(l, 1, 2, row + compiler::kSoftmaxCountBytes).empty() ||
      !place())
    return refused();
  p.rope = true;
  p.input_bytes = row;
  const bool placed_rows = p.rope_sum.base_rows;
  if (!first_sum_program(layer, p)) return refused();
  // The multipliers from r refused after all (the host streams them): placed again without the
  // constants' rows, the program built again there.
  if (placed_rows && !p.rope_sum.base_rows && (!place() || !first_sum_program(layer, p)))
    return refused();
  tiles = trial;
  stats_.resident_bytes += rope_resident_bytes(groups, p.rope_sum.base_rows, copies);
  rope_copies_ = copies;
  return true;
}

// The position-0 program with the sum in front, as the first token runs it (the joined one's
// narrow memory must still hold it, the scores read a longer row): a layout the generator
// rejects keeps the sum on the host instead of failing at the first token. Where it rejects only
// the multipliers from r (mult_base), the host streams them as without chip_rms.
bool ChipTransformer::first_sum_program(int layer, ScoresProgram& p) {
  const auto build = [&] {
    try {
      if (size_t(layer) < value_sums_.size() && value_sums_[size_t(layer)].joined) {
        ValueSumProgram& v = value_sums_[size_t(layer)];
        v.attention[0] = attention_program(layer, p, v, 0, attention_values(layer, p, v, 0));
      } else {
        p.scores_with_key[0] = softmax_program(layer, p, 0, rope_multipliers(p, layer));
      }
    } catch (const Error&) {
      return false;
    }
    return true;
  };
  if (build()) return true;
  if (p.rope_sum.mult_base.empty()) return false;
  p.rope_sum.mult_base.clear();
  p.rope_sum.mult_padding.clear();
  p.rope_sum.base_rows = false;
  return build();
}

bool ChipTransformer::join_scores(int layer, TileAllocator& tiles) {
  const ScoresProgram& s = scores_[size_t(layer)];
  const bool first = layer == 0;
  // The program before: layer 0's (r from the host's bytes, in the count block), or the chain
  // ending the layer before (r where its RMSNorm left it).
  const FfnProgram* f = first ? nullptr : &ffns_[size_t(layer - 1)];
  if (first ? !(first_ && first_kept_) : !(f->chain && f->kept && f->chain_desc.rms.layer >= 0))
    return false;
  const compiler::FcTableProducts& products =
      first ? first_chain_.products : f->chain_desc.products;
  const size_t q_groups = size_t(whole_groups(config().dim) / 64);
  // The scores read q's products from the rows kept in the same run, and write the key their own
  // sum computes.
  if (!s.softmax || !s.rope || !s.key_sum || s.rope_sum.mult_base.empty() ||
      !s.rope_shape.packed_keys || s.rope_sum.resident.size() != q_groups ||
      s.rope_sum.at.tiles.size() != products.groups.size())
    return false;
  // The value cache joins with v~ from the program before (chip_residual), which the joined
  // program writes into the cache before the sum reads it; without v~ on the chip the host's v~
  // comes after the run: the programs run apart.
  ValueSumProgram* v = size_t(layer) < value_sums_.size() && value_sums_[size_t(layer)].on_chip
                           ? &value_sums_[size_t(layer)]
                           : nullptr;
  TileAllocator trial = tiles;
  if (v) {
    if (!v->joined || !(first ? first_v_tilde_ : f->v_tilde)) return false;
    // Each cache group's staging row on its own tile (4 units, outside every parameter), placed
    // with the cache where value_sum_program reserved it, else taken now.
    for (size_t g = v->staging.size(); g < v->at.tiles.size(); ++g) {
      const int unit = trial.take(v->at.tiles[g], 4);
      if (unit < 0) {
        v->staging.clear();
        return false;
      }
      v->staging.push_back(unit);
    }
  }
  // Sum group g reads product group g (rope_of's order, q's then k's; with packed keys the key's
  // sum groups are k's groups): q's from their kept rows, the key's moved over the ring.
  Joined& j = joined_[size_t(layer)];
  j.moved.assign(products.groups.size(), -1);
  for (size_t g = q_groups; g < j.moved.size(); ++g) j.moved[g] = int(g);
  j.values = v != nullptr;
  // One program per 64-position group (its column's groups are on other tiles), generated at
  // the group's first position; joined_run rewrites its column (and the value write) for the
  // others.
  // The last layer's rest and FFN after wo where they are placed and generate; else (a
  // generator's refusal) the layer joins without them, as before.
  // (Placed with two groups a tile sharing a weight copy first, else one: place_rest.)
  std::vector<GroupProgram> groups;
  TileAllocator without_rest = trial;
  for (const bool two_a_tile : {true, false}) {
    if (!v || layer != config().n_layers - 1 || !layer_rest(layer, trial, two_a_tile)) break;
    try {
      groups = joined_groups(layer);
      break;
    } catch (const Error&) {
      // Placed again only where a tile held two groups of one FC (else the same layout); the
      // early rest's by the constructor, from the tiles before early_rest.
      const bool again = j.two_a_tile && !early_rest_;
      if (j.two_a_tile && early_rest_) early_rest_refused_ = true;
      groups.clear();
      j.with_rest = false;
      j.rest = {};
      j.two_a_tile = false;
      trial = without_rest;
      if (!again) break;
    }
  }
  try {
    if (groups.empty()) groups = joined_groups(layer);
  } catch (const Error&) {
    j = {};
    return false;
  }
  j.groups = std::move(groups);
  if (j.with_rest) {
    ++stats_.rest_layers;
    --stats_.programs;  // (the FFN's own run goes)
    stats_.resident_bytes += rest_resident_bytes(j.rest);
  }
  stats_.joined_programs += int(j.groups.size());
  if (v) {
    tiles = trial;  // (the rows taken here, and the rest's groups)
    stats_.resident_bytes += int64_t{256} * int64_t(v->staging.size());
    v->attention.clear();  // (the attention program's trial never runs)
  }
  return true;
}

bool ChipTransformer::early_rest(TileAllocator& tiles, bool two_a_tile) {
  const Config& c = config();
  const int last = c.n_layers - 1;
  // (Only with the heads side by side, as R1 placed it: K = 288 not 384 on rand15M.)
  if (!ffns_[size_t(last)].execution || !value_sums_[size_t(last)].on_chip) return false;
  const WoAfterSum side = wo_after_sum(c, value_sums_[size_t(last)].shape);
  if (!side.side_by_side) return false;
  TileAllocator trial = tiles;
  compiler::FcPlacement wo;
  RestPlacement at;
  const int groups = compiler::fc_groups(c.dim);
  if (!trial.place(groups, compiler::fc_units_per_tile(side.weight_k, false), wo) ||
      !place_rest(last, trial, at, two_a_tile))
    return false;
  tiles = trial;
  early_wo_ = wo;
  early_rest_ = at;
  return true;
}

bool ChipTransformer::layer_rest(int layer, TileAllocator& tiles, bool two_a_tile) {
  const ValueSumProgram& v = value_sums_[size_t(layer)];
  FfnProgram& f = ffns_[size_t(layer)];
  const Config& c = config();
  const Int8Weights& w = *weights();
  // Past the last layer the next layer's chain computes the FFN (compose); layer 0's add reads
  // x_q where its program's input left it: the host's quantized x0, q's input.
  const bool last = layer == c.n_layers - 1;
  if (!options().join_layers || !options().chip_residual || !v.wo || (last && !f.execution))
    return false;
  const QParams x = w.attention_adds[size_t(layer)].x, in = matmul(layer, LayerMatmul::kQ).in;
  // (Layer 0's add reads the program's input: q's grid, last layer or not.)
  if (layer == 0 && (x.scale != in.scale || x.zero_point != in.zero_point)) return false;
  const int dim_padded = whole_groups(c.dim);
  Joined& j = joined_[size_t(layer)];
  compiler::FcLayerRest& rest = j.rest;
  rest = {};
  TileAllocator trial = tiles;
  RestPlacement at;
  if (early_rest_ && last) {  // (placed first: early_rest)
    at = *early_rest_;
  } else if (!place_rest(layer, trial, at, two_a_tile)) {
    return false;
  }
  j.two_a_tile = at.two_a_tile;
  rest.add_at = std::move(at.add_at);
  rest.norm_at = std::move(at.norm_at);
  const QuantizedRmsInput& norm = w.rms_inputs[size_t(layer)];
  rest.add = residual_add_layer(w.attention_adds[size_t(layer)], c.dim);
  rest.x_follower = layer == 0 ? -1 : 0;  // the program's input, or the chain's add: this layer's x
  rest.n = c.dim;
  rest.mean_mult = norm.mean_multiplier;
  rest.norm = rms_input_layer(norm, c.dim);
  for (int i = 0; i < dim_padded; ++i) {
    rest.norm_base.push_back(i < c.dim ? norm.base[size_t(i)] : 0.0f);
    rest.norm_padding.push_back(i >= c.dim);
  }
  // The norm's constants resident where the loop over them pays: a row on each group's tile
  // (cached with wo's parameters), else, where one does not fit, the immediates for this rest.
  if (compiler::fc_multipliers_loop_pays(rest.norm_padding, 0)) {
    TileAllocator with_rows = trial;
    for (const int tile : rest.norm_at.tiles) {
      const int unit = with_rows.take(tile, 4);
      if (unit < 0) {
        rest.norm_const_units.clear();
        break;
      }
      rest.norm_const_units.push_back(unit);
    }
    if (!rest.norm_const_units.empty()) trial = with_rows;
  }
  rest.output_name = last ? "ffn_in_x2" : "ffn_in_x2_" + std::to_string(layer);
  if (last) {
    rest.ffn = &f.layer;
    rest.ffn_up = f.up_at;
    rest.ffn_down = f.down_at;
    rest.ffn_output_name = "y_last";
  }
  j.with_rest = last;
  tiles = trial;
  return true;
}

namespace {

// Units of a rest FC's group: its aux rows, and with its weights.
int rest_aux_units(const compiler::FcLayer& l) {
  return compiler::fc_units_per_tile(0, !l.bias.empty());
}
int rest_group_units(const compiler::FcLayer& l) {
  return compiler::fc_units_per_tile(l.k, !l.bias.empty());
}
// Group g holds its own weights right after its aux rows (no weight_units, or -1).
bool rest_owner(const compiler::FcPlacement& at, size_t g) {
  return at.weight_units.empty() || at.weight_units[g] < 0;
}

// A rest FC's parameters (fc_parameters') group by group: each group's aux rows, then its weight
// block.
struct RestGroups {
  explicit RestGroups(const compiler::FcLayer& l)
      : aux(rest_aux_units(l)), units(rest_group_units(l)), params(compiler::fc_parameters(l)) {}
  int aux, units;
  std::vector<uint8_t> params;
  // Group g's first parameter byte (its aux rows': aux * 64 bytes).
  std::vector<uint8_t>::const_iterator group(size_t g) const {
    return params.begin() + long(g) * units * 64;
  }
  // Group g's weight block: its bytes after the aux rows.
  std::vector<uint8_t> block(size_t g) const {
    return std::vector<uint8_t>(group(g) + aux * 64, group(g) + units * 64);
  }
};

}  // namespace

bool ChipTransformer::place_rest(int layer, TileAllocator& tiles, RestPlacement& at,
                                 bool two_a_tile) const {
  const Config& c = config();
  const Int8Weights& w = *weights();
  std::vector<RestBlock> resident = rest_blocks();
  TileAllocator trial = tiles;
  RestPlacement placed;
  const auto place = [&](const compiler::FcLayer& l, compiler::FcPlacement& p) {
    const int groups = compiler::fc_groups(l.n),
              per_tile = groups > kPlanTiles ? compiler::kFcMaxGroupsATile : 1;
    const RestGroups params(l);
    const int aux = params.aux, units = params.units;
    p = {};
    std::array<int, kPlanTiles> used{};
    bool shares = false;
    for (int g = 0; g < groups; ++g) {
      const std::vector<uint8_t> bytes = params.block(size_t(g));
      const auto copy_on = [&](int t) {
        for (const RestBlock& b : resident)
          if (b.tile == t && b.bytes == bytes) return b.unit;
        return -1;
      };
      const std::array<int, kPlanTiles>& fill = trial.fills();
      // The least-filled tile holding the block with room for the aux rows, else the least-filled
      // one with room for a whole group.
      int best = -1;
      for (int t = 0; t < kPlanTiles; ++t)
        if (used[size_t(t)] < (two_a_tile ? compiler::kFcMaxGroupsATile : per_tile) &&
            copy_on(t) >= 0 && fill[size_t(t)] + aux <= compiler::kFcParamUnits &&
            (best < 0 || fill[size_t(t)] < fill[size_t(best)]))
          best = t;
      const int copy = best >= 0 ? copy_on(best) : -1;
      if (best < 0)
        for (int t = 0; t < kPlanTiles; ++t)
          if (used[size_t(t)] < per_tile && fill[size_t(t)] + units <= compiler::kFcParamUnits &&
              (best < 0 || fill[size_t(t)] < fill[size_t(best)]))
            best = t;
      if (best < 0) return false;
      const int base = trial.take(best, copy >= 0 ? aux : units);
      if (base < 0) return false;
      if (copy < 0) resident.push_back({best, base + aux, bytes});
      shares = shares || copy >= 0;
      p.tiles.push_back(best);
      p.param_units.push_back(base);
      p.weight_units.push_back(copy);
      ++used[size_t(best)];
    }
    if (!shares) p.weight_units.clear();  // (each group's weights after its aux rows)
    placed.two_a_tile = placed.two_a_tile ||
                        std::any_of(used.begin(), used.end(), [&](int u) { return u > per_tile; });
    return true;
  };
  if (!place(residual_add_layer(w.attention_adds[size_t(layer)], c.dim), placed.add_at) ||
      !place(rms_input_layer(w.rms_inputs[size_t(layer)], c.dim), placed.norm_at))
    return false;
  tiles = trial;
  at = std::move(placed);
  return true;
}

std::vector<ChipTransformer::RestBlock> ChipTransformer::rest_blocks() const {
  std::vector<RestBlock> out;
  for_each_placed_rest_fc([&](const compiler::FcLayer& l, const compiler::FcPlacement& p) {
    const RestGroups params(l);
    for (size_t g = 0; g < p.tiles.size(); ++g)
      if (rest_owner(p, g))
        out.push_back({p.tiles[g], p.param_units[g] + params.aux, params.block(g)});
  });
  return out;
}

std::vector<std::shared_ptr<runtime::Program>> ChipTransformer::rest_caching() const {
  // Per kind (the adds, the norms: one K and aux layout each) programs holding at most
  // kFcMaxGroupsATile owners a tile (the compiler's FC geometry takes no more; the owners' units on
  // a tile never overlap, TileAllocator's); the sharing groups' aux rows ride in the first program.
  struct Carrier {
    compiler::FcLayer layer;
    compiler::FcPlacement at;
  };
  std::vector<Carrier> carriers;
  compiler::FcRowWrite rows;
  constexpr int kGroup = compiler::kFcGroupOutputs;
  for_each_placed_rest_fc([&](const compiler::FcLayer& l, const compiler::FcPlacement& p) {
    const RestGroups params(l);
    for (size_t g = 0; g < p.tiles.size(); ++g) {
      if (!rest_owner(p, g)) {
        for (int r = 0; r < params.aux / 4; ++r) {
          rows.rows.push_back({p.tiles[g], p.param_units[g] + 4 * r});
          rows.bytes.insert(rows.bytes.end(), params.group(g) + r * 256,
                            params.group(g) + (r + 1) * 256);
        }
        continue;
      }
      const auto takes = [&](const Carrier& to) {
        return to.layer.k == l.k && to.layer.bias.empty() == l.bias.empty() &&
               std::count(to.at.tiles.begin(), to.at.tiles.end(), p.tiles[g]) <
                   compiler::kFcMaxGroupsATile;
      };
      auto in = std::find_if(carriers.begin(), carriers.end(), takes);
      if (in == carriers.end()) {
        carriers.emplace_back();
        carriers.back().layer.k = l.k;
        in = carriers.end() - 1;
      }
      compiler::FcLayer& to = in->layer;
      const auto o = long(g) * kGroup;
      to.n += kGroup;
      to.mult.insert(to.mult.end(), l.mult.begin() + o, l.mult.begin() + o + kGroup);
      if (!l.bias.empty())
        to.bias.insert(to.bias.end(), l.bias.begin() + o, l.bias.begin() + o + kGroup);
      to.weights.insert(to.weights.end(), l.weights.begin() + o * l.k,
                        l.weights.begin() + (o + kGroup) * l.k);
      in->at.tiles.push_back(p.tiles[g]);
      in->at.param_units.push_back(p.param_units[g]);
    }
  });
  if (carriers.empty() && !rows.rows.empty())
    fail("the rests' ", rows.rows.size(), " aux rows of groups sharing weights with no owner");
  std::vector<std::shared_ptr<runtime::Program>> out;
  for (size_t i = 0; i < carriers.size(); ++i)
    out.push_back(std::make_shared<runtime::Program>(compiler::fc_caching(
        carriers[i].layer, carriers[i].at, i == 0 && !rows.rows.empty() ? &rows : nullptr)));
  return out;
}

compiler::FcRowWrite ChipTransformer::rest_constants(size_t layer) const {
  compiler::FcRowWrite rows;
  if (layer >= joined_.size()) return rows;
  const Joined& j = joined_[layer];
  if (!j.with_rest && !j.composed) return rows;
  const compiler::FcLayerRest& r = j.rest;
  for (size_t g = 0; g < r.norm_const_units.size(); ++g) {
    rows.rows.push_back({r.norm_at.tiles[g], r.norm_const_units[g]});
    compiler::append_constants_row(rows.bytes, r.norm_base, r.norm_padding,
                                   g * size_t(compiler::kFcGroupOutputs));
  }
  return rows;
}

int64_t ChipTransformer::rest_resident_bytes(const compiler::FcLayerRest& rest) {
  int64_t units = 0;
  for_each_rest_fc(rest, [&](const compiler::FcLayer& l, const compiler::FcPlacement& p) {
    for (size_t g = 0; g < p.tiles.size(); ++g)
      units += rest_owner(p, g) ? rest_group_units(l) : rest_aux_units(l);
  });
  units += 4 * int64_t(rest.norm_const_units.size());  // (the norm's constants' rows)
  return units * 64;
}

int ChipTransformer::compose(TileAllocator& tiles) {
  int composed = 0;
  const int layers = int(joined_.size());
  for (int l = 0; l + 1 < layers; ++l) {
    Joined& j = joined_[size_t(l)];
    const Joined& next = joined_[size_t(l + 1)];
    // (The last layer behind the others only with its rest and FFN, as D.2 composed it.)
    if (!is_joined(l) || !j.values || !is_joined(l + 1) || (l + 1 == layers - 1 && !next.with_rest))
      continue;
    // layers_per_run N > 1: at most N layers in one program (its head's to layer l + 1).
    const int cap = options().layers_per_run;
    if (cap > 1 && l + 2 - head_of(l) > cap) continue;
    const Joined before = j;
    const int head = head_of(l);
    TileAllocator trial = tiles;
    std::vector<GroupProgram> groups;
    // (With two groups a tile sharing a weight copy first, else one: place_rest.)
    for (const bool two_a_tile : {true, false}) {
      trial = tiles;
      if (!layer_rest(l, trial, two_a_tile)) {
        j = before;
        break;
      }
      j.composed = true;
      try {
        groups = joined_groups(head);
        break;
      } catch (const Error&) {  // LayoutRejected among them: layer l + 1's program runs apart
        const bool again = j.two_a_tile;  // (else placing again gives the same layout)
        j = before;
        if (!again) break;
      }
    }
    if (groups.empty()) continue;
    // Each layer's outputs by name (joined_names).
    const container::Executable& e = groups.front().program->executable();
    const auto index = [&e](const std::string& name) {
      for (size_t i = 0; i < e.output_layers.size(); ++i)
        if (e.output_layers[i].name == name) return int(i);
      return -1;
    };
    // Where one is not found (a generator naming them otherwise: not expected, the names are
    // joined_parts' own), the boundary runs apart as with the other refusals, the program before
    // and every layer's outputs in it as they were.
    std::vector<JoinedOutputs> outs;
    for (int k = head; k <= l + 1; ++k) {
      const JoinedNames n = joined_names(k);
      const JoinedOutputs o = {index(n.chain), index(n.r), index(n.sum), index(n.y)};
      if (o.chain < 0 || o.sum < 0 || (k > 0 && !n.r.empty() && o.r < 0) ||
          (!n.y.empty() && o.y < 0) || (k == 0 && o.chain != 0))
        break;
      outs.push_back(o);
    }
    if (int(outs.size()) != l + 2 - head) {
      j = before;
      continue;
    }
    for (int k = head; k <= l + 1; ++k) joined_[size_t(k)].out = outs[size_t(k - head)];
    joined_[size_t(head)].groups = std::move(groups);
    // Layer l + 1's own programs never run now (its head's carry it): dropped, and no longer
    // counted as joined programs (nor as programs writing the key).
    stats_.joined_programs -= int(joined_[size_t(l + 1)].groups.size());
    joined_[size_t(l + 1)].groups = {};
    tiles = trial;
    stats_.resident_bytes += rest_resident_bytes(j.rest);
    ++composed;
  }
  return composed;
}

compiler::FcChainValueWrite ChipTransformer::value_write(int layer, int first) const {
  const ValueSumProgram& v = value_sums_[size_t(layer)];
  const Config& c = config();
  compiler::FcChainValueWrite w;
  w.write = compiler::fc_value_write(v.layer, v.at, v.staging, first);
  // v~'s pieces side by side from the first piece's byte (the generator places them).
  w.write.from_byte =
      compiler::value_vectors_side_by_side(c.n_heads, c.n_kv_heads, c.head_size(), 0).from_byte;
  if (layer == 0) {
    w.layer = 0;
    w.groups = first_chain_.after_r.groups;
  } else {
    w.layer = 1;  // the chain's q, k, v follower (chain_ffn's next[1])
    w.groups = ffns_[size_t(layer - 1)].chain_desc.after_r.groups;
  }
  return w;
}

compiler::FcRowWrite ChipTransformer::staging_rows(const ValueSumProgram& p) const {
  compiler::FcRowWrite rows;
  const int quad = 4 * (pos_ / 4), k = p.layer.k;
  for (size_t g = 0; g < p.staging.size(); ++g) {
    rows.rows.push_back({p.at.tiles[g], p.staging[g]});
    for (int b = 0; b < 4; ++b)
      for (int c = 0; c < 64; ++c) {
        const int8_t w =
            quad + b < k ? p.layer.weights[size_t(64 * int(g) + c) * size_t(k) + size_t(quad + b)]
                         : int8_t{0};
        rows.bytes.push_back(uint8_t(int(w) + 128));  // stored as the cache's rows are
      }
  }
  return rows;
}

std::vector<GroupProgram> ChipTransformer::joined_groups(int layer) const {
  if (rest_check_for_tests) {
    std::vector<const compiler::FcLayerRest*> rests;
    for (int k = layer; size_t(k) < joined_.size(); ++k) {
      const Joined& j = joined_[size_t(k)];
      if (j.with_rest || j.composed) rests.push_back(&j.rest);
      if (!j.composed) break;
    }
    if (!rests.empty()) rest_check_for_tests(rests);
  }
  std::vector<GroupProgram> groups;
  for (int pos = 0; pos < scores_[size_t(layer)].seq_padded; pos += 64)
    groups.push_back(joined_program(layer, pos));
  return groups;
}

bool ChipTransformer::is_joined(int layer) const {
  return size_t(layer) < joined_.size() && (!joined_[size_t(layer)].groups.empty() ||
                                            (layer > 0 && joined_[size_t(layer - 1)].composed));
}

int ChipTransformer::head_of(int layer) const {
  while (layer > 0 && joined_[size_t(layer - 1)].composed) --layer;
  return layer;
}

namespace {
// In one program for several layers, those behind the head take names of their own.
std::string joined_suffix(int layer, int head) {
  return layer == head ? "" : std::to_string(layer);
}
}  // namespace

// What joined_program hands the generator for one layer, kept while it generates.
struct ChipTransformer::JoinedParts {
  compiler::FcScoresInput sum;
  compiler::FcColumnWrite column;
  compiler::FcLayer scores;
  compiler::FcChainValueWrite values;
  compiler::FcValueSum named;
  const compiler::FcValueSum* value_sum = nullptr;
  const compiler::FcChainValueWrite* write = nullptr;
  // Behind a head: the chain with its outputs named for the layer, the layer as the rest before
  // it takes it (FcLayerRest::next), and this layer's rest with the next layer behind it.
  compiler::FfnChain chain;
  compiler::FcJoinedLayer joined;
  compiler::FcLayerRest rest;
};

ChipTransformer::JoinedNames ChipTransformer::joined_names(int layer) const {
  const Joined& j = joined_[size_t(layer)];
  const bool wo = j.values && value_sums_[size_t(layer)].wo;
  JoinedNames n;
  // In one program for several layers, layer 0's chain and the outputs of the layers behind the
  // head take names of their own.
  const std::string suffix = joined_suffix(layer, head_of(layer));
  n.sum = (j.values ? (wo ? "o" : "a") : "e") + suffix;
  if (layer == 0) {
    n.chain = j.composed ? "y0" : first_chain_.layers.back().output_name;
  } else {
    const compiler::FfnChain& chain = ffns_[size_t(layer - 1)].chain_desc;
    n.chain = chain.next.back().output_name + suffix;
    n.r = chain.rms.layer >= 0 ? chain.rms.output_name + suffix : "";
  }
  if (j.with_rest && j.rest.ffn) n.y = j.rest.ffn_output_name;
  return n;
}

void ChipTransformer::joined_parts(int layer, int first, JoinedParts& p) const {
  const ScoresProgram& s = scores_[size_t(layer)];
  const Joined& j = joined_[size_t(layer)];
  p.sum = s.rope_sum;
  if (layer > 0) p.sum.r_word = compiler::kChainRmsRWord;
  p.column = key_column(s, key_part(s, first), first);
  p.scores = scores_layer(s, s.heads);
  const int head = head_of(layer);
  const std::string suffix = joined_suffix(layer, head);
  p.scores.output_name = "e" + suffix;  // its own name beside the chain's outputs
  // With the value cache: the sum (and wo) after the softmax, v~ written before it.
  if (j.values) {
    p.values = value_write(layer, first);
    p.write = &p.values;
    p.named = value_sums_[size_t(layer)].join;  // the sum's (or wo's) output beside the chain's
    p.named.layer.output_name = "a" + suffix;
    p.named.out.output_name = "o" + suffix;
    p.value_sum = &p.named;
  }
}

GroupProgram ChipTransformer::joined_program(int layer, int first) const {
  if (first % 64 != 0) fail("a joined program is generated at a group's first position");
  const ScoresProgram& s = scores_[size_t(layer)];
  const Joined& j = joined_[size_t(layer)];
  const std::vector<float>& exp_mult = weights()->attention[size_t(layer)].exp_mult;
  // The layers in this program: `layer` and each one behind a composed layer's rest.
  int end = layer;
  while (joined_[size_t(end)].composed) ++end;
  std::vector<JoinedParts> all(size_t(end - layer + 1));  // (not resized: pointers into it)
  for (int l = layer; l <= end; ++l) joined_parts(l, first, all[size_t(l - layer)]);
  // From the last: each layer behind the head as the rest before it takes it, its own rest (with
  // the next layer behind it where composed).
  const auto rest_of = [&](int l) -> const compiler::FcLayerRest* {
    const Joined& jl = joined_[size_t(l)];
    JoinedParts& q = all[size_t(l - layer)];
    if (jl.composed) {
      q.rest = jl.rest;
      q.rest.next = &all[size_t(l + 1 - layer)].joined;
      return &q.rest;
    }
    return jl.with_rest ? &jl.rest : nullptr;
  };
  for (int l = end; l > layer; --l) {
    JoinedParts& q = all[size_t(l - layer)];
    const FfnProgram& f = ffns_[size_t(l - 1)];
    const std::string suffix = joined_suffix(l, layer);
    q.chain = f.chain_desc;
    q.chain.next.back().output_name += suffix;
    if (q.chain.rms.layer >= 0) q.chain.rms.output_name += suffix;
    const ScoresProgram& sl = scores_[size_t(l)];
    q.joined = {&q.chain,
                f.up_at,
                f.down_at,
                &q.scores,
                sl.placement,
                sl.input_bytes,
                weights()->attention[size_t(l)].exp_mult,
                &q.sum,
                &q.column,
                joined_[size_t(l)].moved,
                q.value_sum,
                q.write,
                rest_of(l)};
  }
  JoinedParts& p0 = all.front();
  compiler::FfnChainPrograms p;
  if (layer == 0) {  // r in the count block
    compiler::FcChain chain = first_chain_;
    chain.layers.back().output_name = joined_names(0).chain;
    p = compiler::generate_fc_chain_softmax(chain, p0.scores, s.placement, s.input_bytes, exp_mult,
                                            &p0.sum, &p0.column, j.moved, p0.value_sum, p0.write,
                                            rest_of(0));
  } else {
    const FfnProgram& f = ffns_[size_t(layer - 1)];
    p = compiler::generate_ffn_chain_softmax(
        f.chain_desc, f.up_at, f.down_at, p0.scores, s.placement, s.input_bytes, exp_mult, &p0.sum,
        &p0.column, j.moved, p0.value_sum, p0.write, rest_of(layer));
  }
  if (p.execution.bitstreams.size() != 1) fail("a joined program in more than one bitstream");
  // Each layer's program marks the column write's scatters (one per group it writes), then with
  // the value write its landings and its rows (one each per cache group); a composed program the
  // next layer's after them.
  GroupProgram g{std::make_shared<runtime::Program>(std::move(p.execution)),
                 first,
                 {},
                 {},
                 {},
                 std::move(p.parts)};
  const auto mark = [&](size_t at) { return p.marks.begin() + long(at); };
  size_t at = 0;
  for (const JoinedParts& part : all) {
    const JoinedParts* q = &part;
    const size_t columns = q->column.words.rows.size(),
                 cache_groups = q->write ? q->values.write.cache_units.size() : 0;
    if (p.marks.size() < at + columns + 2 * cache_groups)
      fail("a joined program marks ", p.marks.size(), " fields, not ", columns,
           " column groups and ", cache_groups, " cache groups from ", at);
    g.columns.insert(g.columns.end(), mark(at), mark(at + columns));
    g.landings.insert(g.landings.end(), mark(at + columns), mark(at + columns + cache_groups));
    g.rows.insert(g.rows.end(), mark(at + columns + cache_groups),
                  mark(at + columns + 2 * cache_groups));
    // Each row mark must be its cache group's row address at `first` (a landing's value depends
    // on where the generator put the quads: those move by differences alone).
    for (size_t i = 0; i < cache_groups; ++i) {
      const int64_t want = q->values.write.cache_units[i] + compiler::fc_weight_row_unit(first);
      if (p.marks[at + columns + cache_groups + i].value != want)
        fail("a joined program's row mark ", i, " holds ",
             p.marks[at + columns + cache_groups + i].value, ", not cache row ", want);
    }
    at += columns + 2 * cache_groups;
  }
  if (at != p.marks.size())
    fail("a joined program marks ", p.marks.size(), " fields, its layers ", at);
  return g;
}

const std::shared_ptr<runtime::Program>& ChipTransformer::rewritten(const GroupProgram& g,
                                                                    int pos) {
  const auto start = std::chrono::steady_clock::now();
  const std::shared_ptr<runtime::Program>& p = at_position(g, pos);
  stats_.key_program_build_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return p;
}

void ChipTransformer::key_group_programs(int layer) {
  ScoresProgram& s = scores_[size_t(layer)];
  if (!s.softmax || is_joined(layer)) return;
  ValueSumProgram* v = size_t(layer) < value_sums_.size() && value_sums_[size_t(layer)].joined
                           ? &value_sums_[size_t(layer)]
                           : nullptr;
  // (Group 0's trial, made before the plan was final, is made again with the others.)
  for (int first = 0; first < s.seq_padded; first += 64) {
    const size_t g = size_t(first / 64);
    if (v)
      v->attention.at(g) =
          attention_program(layer, s, *v, first, attention_values(layer, s, *v, first / 4));
    else
      s.scores_with_key.at(g) = softmax_program(layer, s, first, rope_multipliers(s, layer));
  }
}

std::shared_ptr<runtime::Program> ChipTransformer::joined_run(int layer, int8_t* in, int& in_bytes,
                                                              float r) {
  // The count block (n = pos + 1, and r for layer 0's multipliers) after the program's own input,
  // from the next whole 256-byte packet.
  const int count_at = (in_bytes + 255) / 256 * 256;
  std::fill(in + in_bytes, in + count_at + compiler::kSoftmaxCountBytes, int8_t{0});
  put_count(in + count_at, pos_ + 1);
  if (layer == 0) put_r(in + count_at, r);
  in_bytes = count_at + compiler::kSoftmaxCountBytes;
  // The group's program with its scatters at column pos_ % 64: the program generated at pos_
  // bit for bit (its last run's column is overwritten; a recovery runs it again as it is).
  const GroupProgram& g = joined_[size_t(layer)].groups.at(size_t(pos_ / 64));
  for (const auto& part : g.parts) {
    auto& all = stats_.joined_part_bytes;
    // (No structured binding here: clang 14 does not capture one in a lambda.)
    auto it = std::find_if(all.begin(), all.end(),
                           [&part](const auto& q) { return q.first == part.first; });
    if (it == all.end()) it = all.insert(all.end(), {part.first, 0});
    it->second += part.second;
  }
  return rewritten(g, pos_);
}

void ChipTransformer::stash_softmax(int layer, const runtime::Program& program, int output) {
  const ScoresProgram& s = scores_[size_t(layer)];
  e_stash_layer_ = layer;
  e_stash_pos_ = pos_;
  if (joined_[size_t(layer)].values) {  // the sum's bytes, or wo's o
    ValueSumProgram& v = value_sums_[size_t(layer)];
    v.a.resize(size_t(v.wo ? whole_groups(config().dim) : v.layer.n));
    program.get_output(output, std::span(reinterpret_cast<uint8_t*>(v.a.data()), v.a.size()));
    v.a_pos = pos_;
    return;
  }
  e_stash_.resize(size_t(config().n_heads * (s.seq_padded + 4)));
  program.get_output(output, std::span(e_stash_.data(), e_stash_.size()));
}

// The key's sum joins q~'s (its groups after q~'s, placed where tile memory is left), where the
// program writes the key's column itself and the generator takes the layout; else the host adds
// the key's products as before.
bool ChipTransformer::key_sum_program(int layer, ScoresProgram& p, TileAllocator& tiles) {
  const Config& c = ck_.config;
  const ScoresProgram before = p;
  // The key's channels one after the other in kv_dim's groups (fewer groups than one per kv head
  // where head_size is not a whole group) where each head starts at a whole word, which the
  // column write reads from; else each kv head from a group boundary.
  p.rope_shape = {c.dim, c.n_kv_heads, c.head_size(), c.head_size() % 4 == 0};
  // The multipliers' form for q~'s and the key's outputs together, before the key's groups are
  // placed; their constants' rows only where q~'s groups have theirs too.
  rope_multipliers_from_r(p, layer);
  p.rope_sum.base_rows = p.rope_sum.base_rows && before.rope_sum.base_rows;
  const bool placed_rows = p.rope_sum.base_rows;
  compiler::FcPlacement keys;
  std::vector<int> in_at;
  compiler::FcLayer l =
      rope_sum_layer(weights()->attention[size_t(layer)].rope_q, p.rope_shape, in_at);
  const int key_groups = compiler::fc_groups(l.n) - compiler::fc_groups(before.rope_sum.layer.n);
  TileAllocator trial = tiles;
  std::array<int, kPlanTiles> copies = rope_copies_;
  int slots_end = 0;
  rope_sum_slots(compiler::fc_groups(l.n), {}, slots_end);
  const int row = rope_scores_row_bytes(p.row_bytes, l.n, slots_end);
  if (!compiler::fc_batch_unsupported(l, 1, 2, row + compiler::kSoftmaxCountBytes).empty() ||
      !trial.place_sharing(key_groups, rope_aux_units(p.rope_sum.base_rows),
                           compiler::fc_units_per_tile(l), copies, keys)) {
    p = before;
    return false;
  }
  compiler::FcPlacement& at = p.rope_sum.at;
  at.tiles.insert(at.tiles.end(), keys.tiles.begin(), keys.tiles.end());
  at.param_units.insert(at.param_units.end(), keys.param_units.begin(), keys.param_units.end());
  at.weight_units.insert(at.weight_units.end(), keys.weight_units.begin(), keys.weight_units.end());
  at.in_at = in_at;
  p.rope_sum.layer = std::move(l);
  p.input_bytes = row;
  p.key_sum = true;
  if (!first_sum_program(layer, p)) {
    p = before;  // (a rejected trial replaced no program)
    return false;
  }
  tiles = trial;
  // (Where the multipliers from r were refused after all, the key's groups keep the units placed.)
  stats_.resident_bytes += rope_resident_bytes(key_groups, placed_rows, copies);
  stats_.key_sum_groups += key_groups;
  rope_copies_ = copies;
  return true;
}

std::vector<std::pair<int, int>> ChipTransformer::q_product_places(int layer) const {
  const bool first = layer == 0;
  if (first ? !(first_ && first_rope_)
            : !(size_t(layer - 1) < ffns_.size() && ffns_[size_t(layer - 1)].chain &&
                ffns_[size_t(layer - 1)].rope))
    return {};
  const compiler::FcTableProducts& products =
      first ? first_chain_.products : ffns_[size_t(layer - 1)].chain_desc.products;
  const std::vector<int>& tile_of =
      first ? first_chain_.at[size_t(products.layer)].tiles
            : ffns_[size_t(layer - 1)].chain_desc.next_at[size_t(products.layer)].tiles;
  std::vector<std::pair<int, int>> places = compiler::fc_product_bytes(products, tile_of);
  // q's groups come first (rope_of); fewer places than q's groups: none kept (a padded place
  // would send a group to tile 0's first byte).
  const size_t q_groups = size_t(whole_groups(config().dim) / 64);
  if (places.size() < q_groups) return {};
  places.resize(q_groups);
  return places;
}

bool ChipTransformer::keep_rope_products(int layer, ScoresProgram& s, TileAllocator& tiles) {
  const std::vector<std::pair<int, int>> places = q_product_places(layer);
  const int q_groups = whole_groups(config().dim) / 64;
  if (int(places.size()) != q_groups) return false;
  const bool first = layer == 0;
  compiler::FcTableProducts products =
      first ? first_chain_.products : ffns_[size_t(layer - 1)].chain_desc.products;
  // Sum group g reads q's group g's P1 and R where they are computed: on its own tile.
  TileAllocator trial = tiles;
  std::array<int, kPlanTiles> rows = kept_rows_;
  std::vector<compiler::FcResidentInput> resident;
  // Where a sum group could not go to its products' tile, those products still come back.
  for (int g = 0; g < q_groups; ++g) {
    const auto [tile, byte] = places[size_t(g)];
    if (s.rope_sum.at.tiles[size_t(g)] != tile) continue;
    int& row = rows[size_t(tile)];
    if (row < 0 && (row = trial.take(tile, 4)) < 0) continue;
    products.groups[size_t(g)].keep = true;
    resident.push_back({g, row, byte});
  }
  if (resident.empty()) return false;
  products.kept_row = rows;
  // Both programs again: the producer without q's products among its outputs, the scores' reading
  // them (its position-0 program as a trial); either rejected leaves both as they were.
  std::shared_ptr<runtime::Program> producer;
  try {
    if (first) {
      compiler::FcChain chain = first_chain_;
      chain.products = products;
      producer = std::make_shared<runtime::Program>(compiler::generate_fc_chain(chain).execution);
    } else {
      const FfnProgram& f = ffns_[size_t(layer - 1)];
      compiler::FfnChain chain = f.chain_desc;
      chain.products = products;
      producer = std::make_shared<runtime::Program>(
          compiler::generate_ffn_chain(chain, f.up_at, f.down_at).execution);
    }
  } catch (const Error&) {
    return false;
  }
  const ScoresProgram before = s;
  ValueSumProgram* joined = size_t(layer) < value_sums_.size() && value_sums_[size_t(layer)].joined
                                ? &value_sums_[size_t(layer)]
                                : nullptr;
  const GroupProgram before_joined = joined ? joined->attention[0] : GroupProgram{};
  s.rope_sum.resident = resident;
  // The host's row ends after the groups that still read it: the kept groups take no slot.
  std::vector<int> kept;
  for (const compiler::FcResidentInput& r : resident) kept.push_back(r.group);
  int slots_end = 0;
  s.row_slots = rope_sum_slots(int(s.rope_sum.at.tiles.size()), kept, slots_end);
  s.rope_sum.at.in_at = s.row_slots;
  for (int& at : s.rope_sum.at.in_at) at = std::max(at, 0);  // (the generator moves kept ones)
  s.input_bytes = rope_scores_row_bytes(s.row_bytes, s.rope_sum.layer.n, slots_end);
  if (!first_sum_program(layer, s)) {
    s = before;
    if (joined) joined->attention[0] = before_joined;
    return false;
  }
  tiles = trial;
  kept_rows_ = rows;
  if (first) {
    first_ = producer;
    first_chain_.products = products;
    first_kept_ = true;
  } else {
    FfnProgram& f = ffns_[size_t(layer - 1)];
    f.chain = producer;
    f.chain_desc.products = products;
    f.kept = true;
  }
  return true;
}

int64_t ChipTransformer::rope_resident_bytes(int groups, bool base_rows,
                                             const std::array<int, kPlanTiles>& copies) const {
  int64_t units = int64_t{groups} * rope_aux_units(base_rows);
  for (size_t t = 0; t < copies.size(); ++t)
    if (copies[t] >= 0 && rope_copies_[t] < 0)
      units += compiler::fc_units_per_tile(kRopeSumK, false);
  return units * 64;
}

std::shared_ptr<runtime::Program> ChipTransformer::rope_caching() const {
  compiler::FcPlacement at;
  for (int t = 0; t < kPlanTiles; ++t)
    if (rope_copies_[size_t(t)] >= 0) {
      at.tiles.push_back(t);
      at.param_units.push_back(rope_copies_[size_t(t)]);
    }
  if (at.tiles.empty()) return nullptr;
  compiler::FcRowWrite aux;
  for (const ScoresProgram& p : scores_)
    if (p.rope) {
      const compiler::FcRowWrite w = rope_sum_aux_rows(
          p.rope_sum.at, p.rope_sum.base_rows ? p.rope_sum.mult_base : std::vector<float>{});
      aux.rows.insert(aux.rows.end(), w.rows.begin(), w.rows.end());
      aux.bytes.insert(aux.bytes.end(), w.bytes.begin(), w.bytes.end());
    }
  return std::make_shared<runtime::Program>(
      compiler::fc_caching(rope_sum_weight_copies(int(at.tiles.size())), at, &aux));
}

compiler::FcRowWrite ChipTransformer::rope_multipliers(const ScoresProgram& p, int layer) const {
  if (!p.rope_sum.mult_base.empty()) return {};  // the program makes them from r
  const QuantizedAttention& a = weights()->attention[size_t(layer)];
  return rope_sum_multipliers(a.rope_q, &a.rope_k, p.rope_shape, rope_r_, p.rope_sum.at);
}

// With chip_rms the program forms the sum's multipliers f32(base_j r) itself from the r in its
// input row (FcScoresInput::mult_base; docs/llm.md "The RoPE multipliers from r on the scalar
// core"); else the host streams them.
void ChipTransformer::rope_multipliers_from_r(ScoresProgram& p, int layer) const {
  p.rope_sum.mult_base.clear();
  p.rope_sum.mult_padding.clear();
  p.rope_sum.base_rows = false;
  if (!options().chip_rms) return;
  const QuantizedAttention& a = weights()->attention[size_t(layer)];
  const compiler::ScalarRopeMultipliers m =
      rope_sum_scalar_multipliers(a.rope_q, &a.rope_k, p.rope_shape);
  p.rope_sum.mult_base = m.base;
  p.rope_sum.mult_padding = m.padding;
  // The form decided here, before the groups are placed: where the loop pays, their constants are
  // cached beside the aux rows (rope_aux_units) and the program loops over them.
  // (Counted with r's piece pending, as where r comes with the row: a program after a chain,
  // nothing pending, decides again when it is generated and may leave the rows unread.)
  p.rope_sum.base_rows = compiler::fc_multipliers_loop_pays(m.padding, 1);
}

void ChipTransformer::rope_sum_q(int layer, int pos, float r, const int8_t* p1, const int8_t* p2,
                                 int8_t* q_rot) {
  if (size_t(layer) >= scores_.size() || !scores_[size_t(layer)].rope) {
    Int8Transformer::rope_sum_q(layer, pos, r, p1, p2, q_rot);
    return;
  }
  // The scores' program adds them: keep the products (the key's too) and r for its input and
  // multipliers.
  const int dim = ck_.config.dim, n = dim + ck_.config.kv_dim();
  rope_q_p1_.assign(p1, p1 + n);
  rope_q_p2_.assign(p2, p2 + n);
  rope_r_ = r;
  rope_sum_layer_ = layer;
  rope_sum_pos_ = pos;
  std::fill_n(q_rot, dim, int8_t{0});
}

// The scores' input: [q~; zeros to row_bytes; n = pos + 1 as an int32], or with the RoPE sum in
// front [P1 and R (P2 pair-swapped) of each 64 channels side by side, in the slots of the groups
// that read the host's row (ScoresProgram::row_slots); zeros to input_bytes; n]. The
// input is signed (q~'s or the products' bytes): the runtime flips each byte's top bit, so n's
// bytes are flipped here to arrive as they are.
std::vector<int8_t> ChipTransformer::scores_row(const ScoresProgram& p, int layer, int pos,
                                                const int8_t* q8) {
  const Config& c = ck_.config;
  std::vector<int8_t> row(size_t(p.input_bytes + compiler::kSoftmaxCountBytes), 0);
  if (p.rope) {
    if (rope_sum_layer_ != layer || rope_sum_pos_ != pos)
      fail("layer ", layer, "'s scores at ", pos, " before its RoPE products");
    rope_sum_layer_ = -1;
    const int8_t *p1 = rope_q_p1_.data(), *p2 = rope_q_p2_.data();
    if (p.row_slots.empty())
      rope_sum_input(p.rope_shape, p1, p2, p1 + c.dim, p2 + c.dim, row.data());
    else
      rope_sum_input(p.rope_shape, p.row_slots, p1, p2, p1 + c.dim, p2 + c.dim, row.data());
  } else {
    std::copy_n(q8, c.dim, row.begin());
  }
  put_count(row.data() + p.input_bytes, pos + 1);
  // r after n where the program makes the RoPE sum's multipliers from it.
  if (p.rope && !p.rope_sum.mult_base.empty()) put_r(row.data() + p.input_bytes, rope_r_);
  return row;
}

bool ChipTransformer::value_sum_program(int layer, TileAllocator& tiles) {
  const Config& c = ck_.config;
  ValueSumProgram p;
  p.shape = {c.n_heads, c.n_kv_heads, c.head_size(), c.seq_len};
  p.layer = value_sum_layer(p.shape, p.at.in_at);
  const int groups = compiler::fc_groups(p.layer.n), slots = groups > kPlanTiles ? 2 : 1;
  // Where the chain before may write v~ into the cache (the joined program, join_scores), each
  // group's staging row after its weights, placed with them (later placements fill the tiles).
  const Int8Options& o = options();
  const bool staging = o.chip_residual && o.join_scores && o.chip_scores && o.chip_rope &&
                       o.chip_key_write && o.chip_rms && o.fused_layers;
  const int units = compiler::fc_units_per_tile(p.layer);
  TileAllocator trial = tiles;
  if (p.layer.n > kMaxOutputs ||
      !compiler::fc_batch_unsupported(p.layer, 1, slots, p.shape.row_bytes()).empty() ||
      !trial.place(groups, units + (staging ? 4 : 0), p.at))
    return false;
  tiles = trial;
  if (staging)
    for (const int unit : p.at.param_units) p.staging.push_back(unit + units);
  p.sums.resize(size_t(p.layer.k / 64));
  p.on_chip = true;
  stats_.resident_bytes += static_cast<int64_t>(compiler::fc_parameters(p.layer).size());
  ++stats_.programs;
  value_sums_[size_t(layer)] = std::move(p);
  return true;
}

bool ChipTransformer::join_attention(int layer, TileAllocator& tiles, bool with_wo) {
  if (size_t(layer) >= scores_.size() || !scores_[size_t(layer)].softmax ||
      !value_sums_[size_t(layer)].on_chip)
    return false;
  const Config& c = ck_.config;
  const ScoresProgram& s = scores_[size_t(layer)];
  ValueSumProgram& p = value_sums_[size_t(layer)];
  if (!compiler::fc_batch_attention_unsupported(c.n_heads, s.seq_padded, p.layer.n).empty())
    return false;
  // The multipliers' constants: output i of head h is f32(att_base[h hs + i] (1 / S_h)).
  const std::vector<float>& base = weights()->attention[size_t(layer)].att_base;
  const int hs = c.head_size();
  p.join = {p.layer, p.at, {}, {}};
  for (int o = 0; o < p.layer.n; ++o) {
    const int h = o / p.shape.hs_padded(), i = o % p.shape.hs_padded();
    p.join.mult_head.push_back(i < hs ? h : -1);
    p.join.mult_base.push_back(i < hs ? base[size_t(h * hs + i)] : 0.0f);
  }
  // wo after the sum where its weights fit: its columns where the sum's bytes land (wo_after_sum:
  // the heads side by side, or head h's at h x hs_padded with zero columns between), the int8
  // path's rows, multipliers and output stage. The last layer's wo may be placed already
  // (early_rest).
  const QuantizedMatmul& wo = weights()->attention[size_t(layer)].wo;
  const bool early = early_wo_ && layer == c.n_layers - 1;
  const WoAfterSum side = wo_after_sum(c, p.shape);
  QuantizedMatmul padded = wo;
  padded.cols = side.k;
  padded.w.assign(size_t(wo.rows) * size_t(padded.cols), 0);
  for (int r = 0; r < wo.rows; ++r)
    for (int h = 0; h < c.n_heads; ++h)
      std::copy_n(wo.w.begin() + long(r) * wo.cols + long(h) * hs, hs,
                  padded.w.begin() + long(r) * padded.cols + long(h) * side.head_at);
  FcProgramPlan plan;
  plan.k_padded = padded.cols;
  plan.segments.push_back({0, 0, wo.rows, 0});
  plan.outputs = whole_groups(wo.rows);
  const int wo_groups = compiler::fc_groups(plan.outputs);
  TileAllocator trial = tiles;
  if (early) plan.placement = *early_wo_;
  const bool wo_fits =
      (with_wo || early) && plan.outputs <= kMaxOutputs &&
      compiler::fc_batch_unsupported(plan.outputs, plan.k_padded, 1, wo_groups > kPlanTiles ? 2 : 1)
          .empty() &&
      (early ||
       trial.place(wo_groups, compiler::fc_units_per_tile(side.weight_k, false), plan.placement));
  // The first program now: what does not fit (narrow memory) stays two programs.
  const compiler::FcRowWrite values = attention_values(layer, s, p, 0);
  p.attention.assign(size_t(s.seq_padded / 64), {});
  for (const bool with_wo : {true, false}) {
    if (with_wo && !wo_fits) continue;
    p.join.out = {};
    p.join.out_at = {};
    p.join.out_stride = 64;
    if (with_wo) {
      p.join.out = fc_layer_of(plan, [&](int) -> const QuantizedMatmul& { return padded; });
      // The heads side by side: weights for their n_heads x head_size bytes only.
      if (side.side_by_side) p.join.out.weight_k = side.weight_k;
      p.join.out_at = plan.placement;
      p.join.out_stride = side.stride;
    }
    try {
      p.attention[0] = attention_program(layer, s, p, 0, values);
    } catch (const Error&) {
      continue;
    }
    p.joined = true;
    p.wo = with_wo;
    --stats_.programs;  // the sum runs inside the scores' program
    if (with_wo) {
      tiles = trial;
      ++stats_.wo_layers;
      ++stats_.chip_matmuls;
      --stats_.host_matmuls;
      const auto wo_bytes = static_cast<int64_t>(compiler::fc_parameters(p.join.out).size());
      stats_.resident_bytes += wo_bytes;
      stats_.wo_resident_bytes += wo_bytes;
    }
    return true;
  }
  p.attention.clear();
  p.join.out = {};
  return false;
}

bool ChipTransformer::join_wo(int layer, TileAllocator& tiles) {
  ValueSumProgram& p = value_sums_[size_t(layer)];
  if (!p.joined || p.wo) return false;
  // join_attention again with wo, from the same program count: kept where it places wo, else the
  // layer as it was.
  const ValueSumProgram before = p;
  const ChipPathStats stats = stats_;
  TileAllocator trial = tiles;
  ++stats_.programs;
  if (join_attention(layer, trial, true) && p.wo) {
    tiles = trial;
    return true;
  }
  p = before;
  stats_ = stats;
  return false;
}

compiler::FcRowWrite ChipTransformer::attention_values(int layer, const ScoresProgram& s,
                                                       const ValueSumProgram& p, int unit) const {
  compiler::FcRowWrite values = compiler::fc_weight_rows(p.layer, p.at, unit);
  if (s.rope) {  // this token's multipliers of the RoPE sum (r from rope_sum_q)
    const compiler::FcRowWrite m = rope_multipliers(s, layer);
    values.rows.insert(values.rows.end(), m.rows.begin(), m.rows.end());
    values.bytes.insert(values.bytes.end(), m.bytes.begin(), m.bytes.end());
  }
  return values;
}

GroupProgram ChipTransformer::attention_program(int layer, const ScoresProgram& s,
                                                const ValueSumProgram& p, int pos,
                                                const compiler::FcRowWrite& values) const {
  const compiler::FcParameterWrite key = key_part(s, pos);
  const bool column = options().chip_key_write;
  const compiler::FcColumnWrite words =
      column ? key_column(s, key, pos) : compiler::FcColumnWrite{};
  compiler::FcScoresProgram made = compiler::generate_fc_batch_attention(
      scores_layer(s, s.heads), s.placement, s.input_bytes,
      weights()->attention[size_t(layer)].exp_mult, p.join,
      column ? std::vector<const compiler::FcParameterWrite*>{}
             : std::vector<const compiler::FcParameterWrite*>{&key},
      &values, s.rope ? &s.rope_sum : nullptr, column ? &words : nullptr);
  // The v~ rows come first in `values` (one per sum group's tile); the RoPE multipliers' rows
  // after them do not move with the position. Each kept mark must be its v~ row's wide address
  // (2 + unit, fc_batch_codegen.h), or at_position would rewrite some other field.
  const compiler::FcRowWrite v_rows = compiler::fc_weight_rows(p.layer, p.at, pos / 4);
  if (made.row_marks.size() < v_rows.rows.size())
    fail("the attention program marks ", made.row_marks.size(), " rows, not its ",
         v_rows.rows.size(), " v~ rows");
  for (size_t i = 0; i < v_rows.rows.size(); ++i)
    if (made.row_marks[i].value != 2 + v_rows.rows[i].unit)
      fail("the attention program's row mark ", i, " holds ", made.row_marks[i].value,
           ", not v~ row ", i, "'s address ", 2 + v_rows.rows[i].unit);
  made.row_marks.resize(v_rows.rows.size());
  return {std::make_shared<runtime::Program>(std::move(made.execution)), pos,
          std::move(made.column_marks), std::move(made.row_marks)};
}

compiler::FcColumnWrite ChipTransformer::key_column(const ScoresProgram& p,
                                                    const compiler::FcParameterWrite& key,
                                                    int pos) const {
  compiler::FcColumnWrite w = compiler::fc_column_write(key.layer, key.at, pos % 64);
  if (p.key_sum) {  // head h's group (key_part's h-th) takes its kv head's key from the sum
    const int kv_mul = ck_.config.n_heads / ck_.config.n_kv_heads;
    for (int h = 0; h < ck_.config.n_heads; ++h)
      w.from_byte.push_back(p.rope_shape.key_at(h / kv_mul));
    // Packed keys: the bytes after a head's are the next head's key, not its zero padding.
    if (p.rope_shape.packed_keys) w.scattered_rows = p.rope_shape.head_size / 4;
  }
  return w;
}

std::vector<uint8_t> ChipTransformer::key_parameters(const ScoresProgram& p, int pos) const {
  const compiler::FcParameterWrite key = key_part(p, pos);
  if (p.key_sum) return {};  // the program computes the key
  return options().chip_key_write ? key_column(p, key, pos).words.bytes
                                  : compiler::fc_parameters(key.layer);
}

void ChipTransformer::attention_q(int layer, int pos, const int8_t* q8) {
  ScoresProgram& s = scores_[size_t(layer)];
  ValueSumProgram& p = value_sums_[size_t(layer)];
  const Config& c = ck_.config;
  const auto start = std::chrono::steady_clock::now();
  // One run: the program streams the new key's groups and the one weight row per group that
  // holds pos's v~ (the multipliers are computed on the chip), then computes the scores, the
  // softmax, the multipliers and the sum. One program per 64-position group (the row's unit is a
  // marked field of its instructions), made in the constructor; each run sets its parameters and
  // rewrites the row's address (and the column's) to its position.
  add_key(s, layer, pos);
  set_value_column(p.shape, pos, value_q(layer, pos), p.layer);
  const compiler::FcRowWrite values = attention_values(layer, s, p, pos / 4);
  const std::vector<int8_t> row = scores_row(s, layer, pos, q8);
  const GroupProgram& group = p.attention.at(size_t(pos / 64));
  std::vector<uint8_t> parameters = key_parameters(s, pos);
  parameters.insert(parameters.end(), values.bytes.begin(), values.bytes.end());
  group.program->set_parameters(parameters);
  const std::shared_ptr<runtime::Program>& program = rewritten(group, pos);
  const int out_bytes = p.wo ? whole_groups(c.dim) : p.layer.n;  // o, or wo's input
  p.a.resize(size_t(out_bytes));
  run(program, row.data(), int(row.size()), p.a.data(), out_bytes, !s.rope_sum.resident.empty());
  p.a_pos = pos;
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ChipTransformer::value_sum_q(int layer, int pos, const uint8_t* e, const float* inv_sum,
                                  int8_t* a) {
  if (size_t(layer) >= value_sums_.size() || !value_sums_[size_t(layer)].on_chip) {
    Int8Transformer::value_sum_q(layer, pos, e, inv_sum, a);
    return;
  }
  ValueSumProgram& p = value_sums_[size_t(layer)];
  const Config& c = ck_.config;
  if (p.joined) {  // softmax_q's run computed it
    if (p.a_pos != pos) fail("layer ", layer, "'s weighted sum at ", pos, " before its scores");
    if (p.wo) return;  // the run returned o: wo_q hands it over
    for (int h = 0; h < c.n_heads; ++h)
      std::copy_n(p.a.begin() + long(h) * p.shape.hs_padded(), c.head_size(),
                  a + size_t(h) * size_t(c.head_size()));
    p.a_pos = -1;
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // The new position's v~ and this token's multipliers, which the program writes first.
  set_value_column(p.shape, pos, value_q(layer, pos), p.layer);
  set_value_multipliers(p.shape, weights()->attention[size_t(layer)].att_base.data(), inv_sum,
                        p.layer);
  compiler::FcParameterWrite write{value_sum_prefix(p.layer, pos + 1), p.at};
  std::shared_ptr<runtime::Program>& program = p.sums[size_t(pos / 64)];
  if (!program)
    program = std::make_shared<runtime::Program>(
        compiler::generate_fc_batch(p.layer, p.at, 1, p.shape.row_bytes(), &write));
  else
    program->set_parameters(compiler::fc_parameters(write.layer));
  std::vector<uint8_t> row(size_t(p.shape.row_bytes()));
  value_sum_input(p.shape, e, size_t(c.seq_len), pos + 1, row.data());
  std::vector<int8_t> out(size_t(p.layer.n));
  run(program, reinterpret_cast<const int8_t*>(row.data()), int(row.size()), out.data(), p.layer.n);
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int hs = c.head_size();
  for (int h = 0; h < c.n_heads; ++h)
    std::copy_n(out.begin() + long(h) * p.shape.hs_padded(), hs, a + size_t(h) * size_t(hs));
}

void ChipTransformer::wo_q(int layer, const int8_t* a, int8_t* o) {
  if (size_t(layer) >= value_sums_.size() || !value_sums_[size_t(layer)].wo) {
    Int8Transformer::wo_q(layer, a, o);
    return;
  }
  ValueSumProgram& p = value_sums_[size_t(layer)];
  if (p.a_pos < 0) fail("layer ", layer, "'s wo before its attention program ran");
  std::copy_n(p.a.begin(), ck_.config.dim, o);
  p.a_pos = -1;
}

std::shared_ptr<runtime::Program> ChipTransformer::scores_caching(const ScoresProgram& p) const {
  return std::make_shared<runtime::Program>(
      compiler::fc_caching(scores_layer(p, p.heads), p.placement));
}

compiler::FcParameterWrite ChipTransformer::key_part(const ScoresProgram& p, int pos) const {
  // The group holding `pos` in every head: a plan of those groups alone, at their tiles and units.
  ScoresProgram part;
  part.k_padded = p.k_padded;
  const int first_row = pos / 64 * 64, rows = std::min(64, int(p.heads.front().rows) - first_row);
  for (size_t h = 0; h < p.heads.size(); ++h) {
    part.segments.push_back({int(h), first_row, rows, part.outputs});
    part.outputs += 64;
    const size_t g = (h * size_t(p.seq_padded) + size_t(first_row)) / 64;
    part.placement.tiles.push_back(p.placement.tiles[g]);
    part.placement.param_units.push_back(p.placement.param_units[g]);
  }
  return {scores_layer(part, p.heads), part.placement};
}

std::shared_ptr<runtime::Program> ChipTransformer::key_write(ScoresProgram& p, int pos) const {
  const compiler::FcParameterWrite part = key_part(p, pos);
  std::shared_ptr<runtime::Program>& write = p.key_writes[size_t(pos / 64)];
  if (!write)
    write = std::make_shared<runtime::Program>(compiler::fc_caching(part.layer, part.at));
  else
    write->set_parameters(compiler::fc_parameters(part.layer));
  return write;
}

void ChipTransformer::add_key(ScoresProgram& p, int layer, int pos) {
  const Config& c = ck_.config;
  const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
  // This position's key becomes row `pos` of every head's weights.
  const int8_t* key = key_q(layer, pos);
  for (int h = 0; h < c.n_heads; ++h)
    std::copy_n(key + (h / kv_mul) * hs, hs, p.heads[size_t(h)].w.begin() + long(pos) * hs);
}

void ChipTransformer::write_key(ScoresProgram& p, int layer, int pos) {
  add_key(p, layer, pos);
  const std::shared_ptr<runtime::Program> caching = key_write(p, pos);
  tpu_.run(nullptr, caching);
  if (tpu_.recoveries() != recoveries_seen_) cache_all();
  stats_.modeled += runtime::stick_time(tpu_.last_run().inference);
  stats_.bytes_to_device += tpu_.last_run().inference.bytes_to_device;
  stats_.bytes_from_device += tpu_.last_run().inference.bytes_from_device;
  ++stats_.runs;
}

void ChipTransformer::scores_q(int layer, int pos, const int8_t* q8, int8_t* scores) {
  if (size_t(layer) >= scores_.size() || !scores_[size_t(layer)].execution) {
    Int8Transformer::scores_q(layer, pos, q8, scores);
    return;
  }
  ScoresProgram& p = scores_[size_t(layer)];
  const Config& c = ck_.config;
  const auto start = std::chrono::steady_clock::now();
  write_key(p, layer, pos);
  std::vector<int8_t> row(size_t(p.row_bytes), 0), out(size_t(p.outputs));
  std::copy_n(q8, c.dim, row.begin());
  run(p.execution, row.data(), p.row_bytes, out.data(), p.outputs);
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int h = 0; h < c.n_heads; ++h)
    std::copy_n(out.begin() + long(h) * p.seq_padded, pos + 1,
                scores + size_t(h) * size_t(c.seq_len));
}

GroupProgram ChipTransformer::softmax_program(int layer, const ScoresProgram& p, int pos,
                                              const compiler::FcRowWrite& mults) const {
  const compiler::FcParameterWrite key = key_part(p, pos);
  const bool column = options().chip_key_write;
  const compiler::FcColumnWrite words =
      column ? key_column(p, key, pos) : compiler::FcColumnWrite{};
  compiler::FcScoresProgram made = compiler::generate_fc_batch_softmax(
      scores_layer(p, p.heads), p.placement, p.input_bytes,
      weights()->attention[size_t(layer)].exp_mult, column ? nullptr : &key,
      p.rope ? &p.rope_sum : nullptr, p.rope && !mults.rows.empty() ? &mults : nullptr,
      column ? &words : nullptr);
  // (The RoPE multipliers' rows do not move with the position: their marks are not kept.)
  return {std::make_shared<runtime::Program>(std::move(made.execution)),
          pos,
          std::move(made.column_marks),
          {}};
}

void ChipTransformer::softmax_q(int layer, int pos, const int8_t* q8, uint8_t* e, float* inv_sum) {
  if (size_t(layer) >= scores_.size() || !scores_[size_t(layer)].softmax) {
    Int8Transformer::softmax_q(layer, pos, q8, e, inv_sum);
    return;
  }
  ScoresProgram& p = scores_[size_t(layer)];
  const Config& c = ck_.config;
  if (is_joined(layer)) {
    // The program before ran the scores and wrote the key's column: the host's copy of the keys
    // takes the key now (after that run, whose recovery re-caches the keys before pos).
    if (e_stash_layer_ != layer || e_stash_pos_ != pos)
      fail("layer ", layer, "'s softmax at ", pos, " was not computed by the program before it");
    e_stash_layer_ = -1;
    rope_sum_layer_ = -1;
    add_key(p, layer, pos);
    if (joined_[size_t(layer)].values) {
      // It wrote v~ into the cache and ran the sum too (value_sum_q hands it over): the host's
      // copy of the cache takes v~ for a recovery's caching.
      ValueSumProgram& v = value_sums_[size_t(layer)];
      set_value_column(v.shape, pos, value_q(layer, pos), v.layer);
      return;
    }
    const size_t e_bytes = size_t(c.n_heads) * size_t(p.seq_padded);
    for (int h = 0; h < c.n_heads; ++h) {
      std::memcpy(e + size_t(h) * size_t(c.seq_len),
                  e_stash_.data() + size_t(h) * size_t(p.seq_padded), size_t(pos + 1));
      std::memcpy(inv_sum + h, e_stash_.data() + e_bytes + 4 * size_t(h), 4);
    }
    return;
  }
  if (size_t(layer) < value_sums_.size() && value_sums_[size_t(layer)].joined) {
    // e and 1 / S stay on the chip: the same run computes the weighted sum (value_sum_q).
    attention_q(layer, pos, q8);
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // One run: the program streams the new key's groups (or column) into tile memory before the
  // scores (a STAND_ALONE program per 64-position group, made in the constructor; each run sets
  // its parameters and rewrites its marked fields).
  add_key(p, layer, pos);
  const std::vector<int8_t> row = scores_row(p, layer, pos, q8);
  // With the RoPE sum in front: this token's multipliers after the key's parameters.
  const compiler::FcRowWrite mults = p.rope ? rope_multipliers(p, layer) : compiler::FcRowWrite{};
  const GroupProgram& group = p.scores_with_key.at(size_t(pos / 64));
  std::vector<uint8_t> parameters = key_parameters(p, pos);
  parameters.insert(parameters.end(), mults.bytes.begin(), mults.bytes.end());
  group.program->set_parameters(parameters);
  const std::shared_ptr<runtime::Program>& program = rewritten(group, pos);
  const int e_bytes = c.n_heads * p.seq_padded, out_bytes = e_bytes + 4 * c.n_heads;
  std::vector<int8_t> out(static_cast<size_t>(out_bytes));
  run(program, row.data(), int(row.size()), out.data(), out_bytes, !p.rope_sum.resident.empty());
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int h = 0; h < c.n_heads; ++h) {
    std::memcpy(e + size_t(h) * size_t(c.seq_len), out.data() + size_t(h) * size_t(p.seq_padded),
                size_t(pos + 1));
    std::memcpy(inv_sum + h, out.data() + e_bytes + 4 * h, 4);
  }
}

compiler::FcLayer ChipTransformer::fc_layer(int layer, const Program& p) const {
  return fc_layer_of(
      p, [&](int id) -> const QuantizedMatmul& { return matmul(layer, LayerMatmul(id)); });
}

void ChipTransformer::cache_all() {
  stats_.caching = {};
  std::vector<std::shared_ptr<runtime::Program>> caching;
  for (const Program& p : programs_) caching.push_back(p.caching);
  caching.insert(caching.end(), first_caching_.begin(), first_caching_.end());
  for (const FfnProgram& p : ffns_) {
    caching.push_back(p.caching_up);
    caching.push_back(p.caching_down);
    caching.insert(caching.end(), p.chain_caching.begin(), p.chain_caching.end());
  }
  // The scores' keys as they are now (zeros where no token wrote one yet).
  for (const ScoresProgram& p : scores_) {
    if (p.on_chip) caching.push_back(scores_caching(p));
  }
  caching.push_back(rope_caching());
  // The weighted sums' v~ and multipliers as the last token wrote them.
  // With the chip's value write, each group's staging row holds the current quad's positions
  // (the next write puts them back into the cache row with the new one).
  // (wo's program also writes its layer's rest's norm constants, where they are resident.)
  for (size_t l = 0; l < value_sums_.size(); ++l) {
    const ValueSumProgram& p = value_sums_[l];
    const compiler::FcRowWrite staging = staging_rows(p);
    if (p.on_chip)
      caching.push_back(std::make_shared<runtime::Program>(
          compiler::fc_caching(p.layer, p.at, p.staging.empty() ? nullptr : &staging)));
    if (p.wo) {
      const compiler::FcRowWrite norm = rest_constants(l);
      caching.push_back(std::make_shared<runtime::Program>(
          compiler::fc_caching(p.join.out, p.join.out_at, norm.rows.empty() ? nullptr : &norm)));
    }
  }
  caching.insert(caching.end(), rest_caching_.begin(), rest_caching_.end());
  for (const std::shared_ptr<runtime::Program>& p : caching) {
    if (!p) continue;
    tpu_.run(nullptr, p);
    stats_.caching += runtime::stick_time(tpu_.last_run().inference);
  }
  recoveries_seen_ = tpu_.recoveries();
}

void ChipTransformer::run(const std::shared_ptr<runtime::Program>& p, const int8_t* in,
                          int in_bytes, int8_t* out, int out_bytes, bool reads_kept) {
  // A recovered stick was re-opened: its tile memory no longer holds the weights, nor the
  // products p reads, which their program computes again. Recoveries in a run before p (another
  // program's, or the products' own second run) count as much as one in p's run.
  for (int attempt = 0;; ++attempt) {
    if (attempt == kRunsPerRecovery) fail("the stick recovered ", attempt, " times in a row");
    if (tpu_.recoveries() != recoveries_seen_) cache_all();
    if (reads_kept) restore_kept();
    const int recoveries = tpu_.recoveries();
    p->set_input(0, std::span(reinterpret_cast<const uint8_t*>(in), size_t(in_bytes)));
    tpu_.run(nullptr, p);
    if (tpu_.recoveries() == recoveries) break;
  }
  stats_.modeled += runtime::stick_time(tpu_.last_run().inference);
  stats_.bytes_to_device += tpu_.last_run().inference.bytes_to_device;
  stats_.bytes_from_device += tpu_.last_run().inference.bytes_from_device;
  ++stats_.runs;
  p->get_output(0, std::span(reinterpret_cast<uint8_t*>(out), size_t(out_bytes)));
}

void ChipTransformer::restore_kept() {
  if (!kept_run_.program) fail("a program reads kept RoPE products that no run left");
  for (int attempt = 0; tpu_.recoveries() != kept_run_.recoveries; ++attempt) {
    if (attempt == kRunsPerRecovery) fail("the stick recovered ", attempt, " times in a row");
    if (tpu_.recoveries() != recoveries_seen_) cache_all();
    const int recoveries = tpu_.recoveries();
    kept_run_.program->set_input(
        0, std::span(reinterpret_cast<const uint8_t*>(kept_run_.in.data()), kept_run_.in.size()));
    tpu_.run(nullptr, kept_run_.program);
    kept_run_.recoveries = recoveries;  // unchanged by this run: the products are there
  }
}

void ChipTransformer::kept_by(const std::shared_ptr<runtime::Program>& p, const int8_t* in,
                              int in_bytes) {
  kept_run_.program = p;
  kept_run_.in.assign(in, in + in_bytes);
  kept_run_.recoveries = tpu_.recoveries();
}

void ChipTransformer::ffn_q(int layer, const int8_t* xq, int8_t* yq) {
  FfnProgram& p = ffns_[size_t(layer)];
  if (size_t(layer) < joined_.size() && joined_[size_t(layer)].with_rest) {
    // The joined run before computed this FFN after the layer's rest, from the same bytes as the
    // host's xq (the int8 path's chip_residual steps): its y.
    if (ffn_stash_layer_ != layer || ffn_stash_pos_ != pos_)
      fail("layer ", layer, "'s FFN at ", pos_, " was not computed by the joined run before it");
    ffn_stash_layer_ = -1;
    std::copy_n(ffn_stash_.begin(), matmul(layer, LayerMatmul::kW2).rows, yq);
    return;
  }
  if (!p.execution) {
    Int8Transformer::ffn_q(layer, xq, yq);
    return;
  }
  const QuantizedMatmul &w1 = matmul(layer, LayerMatmul::kW1),
                        &w2 = matmul(layer, LayerMatmul::kW2);
  std::copy_n(xq, w1.cols, xq_.begin());
  std::fill(xq_.begin() + w1.cols, xq_.begin() + p.k_padded, static_cast<int8_t>(w1.in.zero_point));
  const auto start = std::chrono::steady_clock::now();
  run(p.execution, xq_.data(), p.k_padded, yq_.data(), whole_groups(w2.rows));
  std::copy_n(yq_.begin(), w2.rows, yq);
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ChipTransformer::ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq,
                                int8_t* next) {
  FfnProgram& p = ffns_[size_t(layer)];
  if (!p.chain) {
    Int8Transformer::ffn_add_q(layer, xq, x2q, yq, next);
    return;
  }
  const Config& c = config();
  const QuantizedMatmul& w1 = matmul(layer, LayerMatmul::kW1);
  // Padded inputs meet zero weights.
  std::copy_n(xq, w1.cols, xq_.begin());
  std::fill(xq_.begin() + w1.cols, xq_.begin() + p.k_padded, static_cast<int8_t>(w1.in.zero_point));
  std::copy_n(x2q, c.dim, xq_.begin() + p.k_padded);
  std::fill(xq_.begin() + p.k_padded + c.dim, xq_.begin() + p.k_padded + p.dim_padded,
            static_cast<int8_t>(add_of(layer).x.zero_point));
  // chip_rope: the position's tables after x2.
  const int tables = p.rope ? rope_input(pos_, xq_.data(), p.k_padded + p.dim_padded) : 0;
  const auto start = std::chrono::steady_clock::now();
  // Out: w2's output, q + k + v, [u], [RoPE's products].
  const int u_bytes = p.values ? c.n_heads * p.dim_padded : 0;
  const int rope_bytes = p.rope ? rope_output_bytes(p.chain_desc.products) : 0;
  // With the products, q and k stay on the chip: only v's groups come back.
  const int qkv_bytes = p.rope ? p.qkv_outputs - p.qkv_at[2] : p.qkv_outputs;
  const int in_bytes = p.k_padded + p.dim_padded + tables,
            out_bytes = p.dim_padded + qkv_bytes + u_bytes + rope_bytes;
  const bool joined = is_joined(layer + 1);
  int run_bytes = in_bytes;
  // Joined: the next layer's scores and softmax in the same run, its count block after the input
  // (it keeps q's products and reads them in the same run).
  if (joined && xq_.size() < size_t(in_bytes + 256 + compiler::kSoftmaxCountBytes))
    xq_.resize(size_t(in_bytes + 256 + compiler::kSoftmaxCountBytes));
  // Composed: the head's run computed this chain and layer + 1 behind layer's rest; its outputs
  // are taken instead of a run. A head (layer + 1 composed with the next) keeps its run for them.
  const bool composed = joined && joined_[size_t(layer)].composed;
  const bool head = joined && !composed && joined_[size_t(layer + 1)].composed;
  std::shared_ptr<runtime::Program> program;
  JoinedOutputs idx;
  if (composed) {
    if (composed_pos_ != pos_ || !composed_program_)
      fail("layer ", layer + 1, " at ", pos_, " was not computed by the composed run before it");
    program = composed_program_;
    if (!joined_[size_t(layer + 1)].composed) {  // (the program's last layer)
      composed_program_.reset();
      composed_pos_ = -1;
    }
    idx = joined_[size_t(layer + 1)].out;
    program->get_output(size_t(idx.chain),
                        std::span(reinterpret_cast<uint8_t*>(yq_.data()), size_t(out_bytes)));
  } else {
    program = joined ? joined_run(layer + 1, xq_.data(), run_bytes, 0.0f) : p.chain;
    run(program, xq_.data(), run_bytes, yq_.data(), out_bytes);
    if (head) {
      idx = joined_[size_t(layer + 1)].out;
      composed_program_ = program;
      composed_pos_ = pos_;
    } else {
      idx.y = int(program->num_outputs()) - 1;
    }
  }
  if (p.kept && !joined) kept_by(p.chain, xq_.data(), in_bytes);
  if (joined) stash_softmax(layer + 1, *program, idx.sum);  // e and 1 / S (or a, o)
  if (joined && joined_[size_t(layer + 1)].with_rest)       // y of layer + 1's FFN
    stash_ffn(layer + 1, *program, idx.y);
  if (p.rope)
    rope_output(layer + 1, pos_, yq_.data() + p.dim_padded + qkv_bytes + u_bytes,
                p.chain_desc.products);
  std::copy_n(yq_.begin(), c.dim, yq);
  // chip_residual: the add's bytes are the next layer's x, which attention's residual add reads
  // (and v~ where the chain did not compute it): the int8 path's add of the same bytes, on the
  // host (w2's output is back anyway; the chain's add is that arithmetic).
  if (options().chip_residual) residual_add(add_of(layer), x2q, yq, c.dim, next);
  // q, k, v come from the chip; the add's bytes stay there, and so does chip_rms's r of them: the
  // program's second output.
  if (p.chain_desc.rms.layer >= 0) {
    program->get_output(size_t(idx.r),
                        std::span(reinterpret_cast<uint8_t*>(&r_stash_), sizeof r_stash_));
    r_stash_layer_ = layer + 1;
    r_stash_pos_ = pos_;
  }
  const auto qkv = yq_.begin() + p.dim_padded;
  stash_qkv(layer + 1, p.rope, &*qkv, p.qkv_at, p.qkv_outputs);
  stash_layer_ = layer + 1;
  v_tilde_layer_ = p.v_tilde ? layer + 1 : -1;
  if (p.values) {
    u_stash_.assign(qkv + qkv_bytes, qkv + qkv_bytes + u_bytes);
    u_stash_layer_ = layer + 1;
  }
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ChipTransformer::stash_ffn(int layer, const runtime::Program& program, int output) {
  ffn_stash_.resize(program.output_bytes(size_t(output)));
  program.get_output(size_t(output),
                     std::span(reinterpret_cast<uint8_t*>(ffn_stash_.data()), ffn_stash_.size()));
  ffn_stash_layer_ = layer;
  ffn_stash_pos_ = pos_;
}

void ChipTransformer::qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) {
  const Config& c = config();
  if (layer == 0 && first_) {
    const QkvPart part = qkv_part(0);
    const int dim_padded = whole_groups(c.dim),
              u_bytes = values_on_chip_[0] ? c.n_heads * dim_padded : 0;
    std::copy_n(xq, c.dim, xq_.begin());
    std::fill(xq_.begin() + c.dim, xq_.begin() + dim_padded,
              static_cast<int8_t>(matmul(0, LayerMatmul::kQ).in.zero_point));
    const int tables = first_rope_ ? rope_input(pos_, xq_.data(), dim_padded) : 0;
    const int rope_bytes = first_rope_ ? rope_output_bytes(first_chain_.products) : 0;
    const int qkv_bytes = first_rope_ ? part.program.outputs - part.at[2] : part.program.outputs;
    const auto start = std::chrono::steady_clock::now();
    int in_bytes = dim_padded + tables;
    const int out_bytes = qkv_bytes + u_bytes + rope_bytes;
    const bool joined = is_joined(0);
    if (first_v_tilde_ && !joined) {
      // v's groups wait for r, the host's (chip_rms: of these bytes), in a count block from the
      // next whole packet.
      const int block = compiler::fc_tables_at(in_bytes);
      std::fill(xq_.begin() + in_bytes, xq_.begin() + block + compiler::kSoftmaxCountBytes,
                int8_t{0});
      put_r(xq_.data() + block, Int8Transformer::rms_scale_q(0, xq, nullptr));
      in_bytes = block + compiler::kSoftmaxCountBytes;
    }
    int run_bytes = in_bytes;
    if (joined && xq_.size() < size_t(in_bytes + 256 + compiler::kSoftmaxCountBytes))
      xq_.resize(size_t(in_bytes + 256 + compiler::kSoftmaxCountBytes));
    // Joined: layer 0's scores in the same run; their multipliers take the r the host computes
    // from these bytes later (chip_rms: the same function of xq, so the same bits).
    const std::shared_ptr<runtime::Program> program =
        joined ? joined_run(0, xq_.data(), run_bytes, Int8Transformer::rms_scale_q(0, xq, nullptr))
               : first_;
    run(program, xq_.data(), run_bytes, yq_.data(), out_bytes);
    if (first_kept_ && !joined) kept_by(first_, xq_.data(), in_bytes);
    // The second output: e and 1 / S (or a, o; composed: found by name).
    if (joined) stash_softmax(0, *program, joined_[0].composed ? joined_[0].out.sum : 1);
    // One layer: its rest and FFN in this run (its last output y).
    if (joined && joined_[0].with_rest && !joined_[0].composed)
      stash_ffn(0, *program, int(program->num_outputs()) - 1);
    if (joined && joined_[0].composed) {  // the next layers' outputs too, for their seams
      composed_program_ = program;
      composed_pos_ = pos_;
    }
    if (first_rope_) rope_output(0, pos_, yq_.data() + qkv_bytes + u_bytes, first_chain_.products);
    stats_.chip_wall_s +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (u_bytes > 0) {
      u_stash_.assign(yq_.begin() + qkv_bytes, yq_.begin() + qkv_bytes + u_bytes);
      u_stash_layer_ = 0;
    }
    stash_qkv(0, first_rope_, yq_.data(), part.at, part.program.outputs);
    v_tilde_layer_ = first_v_tilde_ ? 0 : -1;
    int8_t* outs[3] = {q, k, v};
    for (size_t i = 0; i < 3; ++i)
      std::copy_n(stash_.begin() + part.at[i], matmul(0, LayerMatmul(i)).rows, outs[i]);
    return;
  }
  if (stash_layer_ != layer) {
    v_tilde_layer_ = -1;
    Int8Transformer::qkv_q(layer, xq, q, k, v);
    return;
  }
  stash_layer_ = -1;
  const FfnProgram& p = ffns_[size_t(layer - 1)];
  int8_t* outs[3] = {q, k, v};
  for (size_t i = 0; i < 3; ++i)
    std::copy_n(stash_.begin() + p.qkv_at[i], matmul(layer, LayerMatmul(i)).rows, outs[i]);
}

void ChipTransformer::value_tilde_q(int layer, const int8_t* xq, const int8_t* v, float r,
                                    int8_t* v_tilde) {
  if (v_tilde_layer_ != layer) {
    Int8Transformer::value_tilde_q(layer, xq, v, r, v_tilde);
    return;
  }
  v_tilde_layer_ = -1;
  std::copy_n(v, config().kv_dim(), v_tilde);
}

void ChipTransformer::values_q(int layer, const int8_t* v, int8_t* u) {
  if (u_stash_layer_ != layer) {
    Int8Transformer::values_q(layer, v, u);
    return;
  }
  u_stash_layer_ = -1;
  const Config& c = config();
  const int dim_padded = whole_groups(c.dim);
  for (int h = 0; h < c.n_heads; ++h)
    std::copy_n(u_stash_.begin() + h * dim_padded, c.dim, u + size_t(h) * size_t(c.dim));
}

void ChipTransformer::run_program(Program& p, int layer, LayerMatmul called, int8_t* yq) {
  run(p.execution, xq_.data(), p.k_padded, yq_.data(), p.outputs);
  for (const Program::Segment& s : p.segments) {
    const QuantizedMatmul& q = matmul(layer, LayerMatmul(s.id));
    int8_t* dest = yq;
    if (s.id != int(called)) {
      // Kept only for a matmul this program computes whole (a chunk alone would be a half result).
      if (plans_[size_t(layer) * kLayerMatmuls + size_t(s.id)].programs.size() != 1) continue;
      Pending& pending = pending_[size_t(s.id)];
      pending.layer = layer;
      pending.xq.assign(xq_.begin(), xq_.begin() + q.cols);
      dest = pending.yq.data();
    }
    std::copy_n(yq_.begin() + s.out_at, s.rows, dest + s.row0);
  }
}

void ChipTransformer::matmul_q(int layer, LayerMatmul m, const int8_t* xq, int8_t* yq) {
  const MatmulPlan& plan = plans_[size_t(layer) * kLayerMatmuls + size_t(m)];
  if (plan.programs.empty()) {
    Int8Transformer::matmul_q(layer, m, xq, yq);
    return;
  }
  const QuantizedMatmul& q = matmul(layer, m);
  std::copy_n(xq, q.cols, xq_.begin());
  Pending& pending = pending_[size_t(m)];
  // Computed already by the program of an earlier matmul of this input: the same quantized input
  // gives the same result.
  if (pending.layer == layer &&
      std::equal(pending.xq.begin(), pending.xq.end(), xq_.begin(), xq_.begin() + q.cols)) {
    pending.layer = -1;
    std::copy_n(pending.yq.data(), q.rows, yq);
    return;
  }
  // Padded inputs meet zero weights; the zero point keeps them out of the sum either way.
  const int k_padded = programs_[size_t(plan.programs.front())].k_padded;
  std::fill(xq_.begin() + q.cols, xq_.begin() + k_padded, static_cast<int8_t>(q.in.zero_point));
  const auto start = std::chrono::steady_clock::now();
  for (int p : plan.programs) run_program(programs_[size_t(p)], layer, m, yq);
  stats_.chip_wall_s +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tinycoral::llm
