// The int8 path: every layer matmul computed the way the Edge TPU computes a FULLY_CONNECTED op,
// the rest (embedding, RMSNorm, RoPE, attention, SiLU, residuals, classifier) in float32 on the
// host exactly as the float path does. It is the oracle of the chip path's first step (issue 14,
// 5a): the host quantizes the matmul's input, the chip multiplies and requantizes, the host
// dequantizes.
//
// Per matmul y = W x (docs/llm.md "The int8 path"):
//  - W: int8, symmetric per output row (zero point 0, scale s_w[r] = max|W[r]| / 127, values
//    rounded half to even);
//  - x: int8 with a scale and zero point calibrated from float activations (min/max over a greedy
//    float run from BOS), quantized on the host: clamp(rint(x / s_x) + z_x, -128, 127);
//  - acc[r] = sum_j (x_q[j] - z_x) * W_q[r][j], exact in int32;
//  - y_q[r] = the chip's output stage (host::edgetpu::requantize): f32(acc) * f32(f32(s_x * s_w[r])
//    * f32(1 / s_y)), clamped in float32 to the int8 range, rounded half to even, plus z_y;
//  - y = (y_q - z_y) * s_y on the host.
// The FFN's elementwise part, m = SiLU(h1) * h3 with h1 = w1 x and h3 = w3 x, is the chip's ops on
// the int8 values (a fused FFN program computes it on the tiles; docs/llm.md):
//  - g = LOGISTIC(h1) (isa.md 2.1.5): x = clamp(f32(h1_q - z_h1) * s_h1, +-10.396732), the
//    non-linear unit's spline (chip/ops/nlu.h), rounded half to even; scale 1/256, zero point -128;
//  - a = MUL(h1, g), m = MUL(a, h3): f32((p_q - z_p)(r_q - z_r)) * f32(f32(s_p s_r) f32(1 / s_y)),
//    the output stage's clamps, rounding and zero point, with a's range calibrated and m's scale
//    w2's input scale, so w2 takes m's bytes as they are.
// With Int8Options::fused_layers (the default; issue 14 step c: a layer's FFN, the residual add and
// the next layer's q, k, v in one chip program), q, k and v read the residual stream itself:
//  - wq, wk, wv are quantized with RMSNorm's weight folded into their columns (W diag(g)), their
//    input is x quantized with the residual's calibrated range, their output W diag(g) x has its
//    own calibrated range, and the host multiplies the dequantized result by RMSNorm's scale
//    1 / sqrt(mean(x^2) + 1e-5) (a scalar per token, computed from its float residual stream);
//  - past layer 0, that quantized x is the chip's residual add of the FFN's residual x2 (quantized
//    by the host) and w2's output, as a matmul: acc = a (x2_q - z_x2) + b (f_q - z_f) with
//    integer weights a, b (the larger 127, the other its ratio of the scales, rounded),
//    f32(acc) * f32(f32(s_f * f32(1 / b)) * f32(1 / s_y)), clamps, rounding, zero point.
//  The residual stream itself stays float32 on the host; only what q, k, v read is quantized
//  (with Int8Options::chip_residual the stream is int8 too: int8_residual.h).
//  - wo is folded into the value cache: o = sum_h sum_t p_ht wo_h v_ht, with wo_h the columns of
//    wo for head h (v of its kv head). u_ht = wo_h v_ht is an int8 matmul of v's quantized bytes
//    (per (layer, head), its output range calibrated on wo_h of the unnormalized v); the host
//    keeps u and RMSNorm's scale r_t per position and computes
//    o_i = sum_h sum_t f32(p_ht r_t) (f32(u_hti - z) s), heads then positions in order.
//  - With Int8Options::chip_attention (the default with fused_layers), attention itself is the
//    chip's arithmetic too (docs/llm.md "Attention in the chip's arithmetic"); every scale is
//    static (calibrated), so a program's multipliers are constants and a new token only writes
//    bytes: k (after RMSNorm's scale and RoPE, on the host) int8 symmetric per pair of channels,
//    kept in an int8 key cache; q (likewise) times its channel's key scale, int8 per head; the
//    scores q.k / sqrt(head_size) one int8 matmul per head with the keys as weights and the chip's
//    output stage to int8; softmax on the scalar core in float32 (scalar_core_softmax): the
//    exponentials as bytes e = rint(255 exp(score - max)) and 1 / S per head; u' = r_t u_t
//    quantized symmetric per output channel; per head the int32 sum over positions of e_ht u'_ht (a
//    matmul with e as the input and u' as the weights), which the scalar core weighs with its
//    head's 1 / S and adds over heads, then the output stage to int8; the host dequantizes o into
//    its float residual.
// Storing bytes as uint8 with every zero point + 128 (the chip's view) gives the same integers.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "llm/int8_rope.h"
#include "llm/transformer.h"

namespace tinycoral::llm {

// An int8 affine quantization: real = (q - zero_point) * scale.
struct QParams {
  float scale = 1.0f;
  int32_t zero_point = 0;
};
// The smallest int8 quantization covering [lo, hi] and 0 (zero is exact).
QParams qparams_for_range(float lo, float hi);
// Host-side quantization of activations (round half to even, saturate to int8).
void quantize(const float* x, int n, QParams q, int8_t* out);

// One layer matmul in the chip's form.
struct QuantizedMatmul {
  int rows = 0, cols = 0;
  std::vector<int8_t> w;          // [rows][cols]
  std::vector<float> w_scale;     // [rows]
  std::vector<int32_t> w_rowsum;  // sum_j w[r][j], for the input zero point
  QParams in, out;
  std::vector<float> multiplier;  // [rows] f32(f32(s_x * s_w) * f32(1 / s_y))
  float clamp_lo = 0, clamp_hi = 0;
};

// Observed float ranges of every layer matmul's input and output, and of SiLU(w1 x).
struct Calibration {
  struct Range {
    float lo = 0, hi = 0;
  };
  std::vector<std::array<Range, kLayerMatmuls>> in, out;  // [layer][matmul]
  std::vector<Range> silu;                                // [layer]
  // For Int8Options::fused_layers: x entering each layer, x after attention's residual add, and
  // W diag(g) x of wq, wk, wv (before RMSNorm's scale).
  std::vector<Range> residual, residual_mid;  // [layer]
  std::vector<std::array<Range, 3>> qkv_raw;  // [layer][q, k, v]
  std::vector<Range> values;                  // [layer]: wo_h of the unnormalized v, all heads
  // For Int8Options::chip_attention: q and k after RoPE ([layer][dim], [layer][kv_dim]), the
  // scores q.k / sqrt(head_size) ([layer][head]), max |wo_h v| per output over heads
  // ([layer][dim], v as the float path has it) and attention's output after wo ([layer]).
  std::vector<std::vector<Range>> query, key, scores;
  std::vector<std::vector<float>> weighted_abs;
  std::vector<Range> attention;
  // For Int8Options::weighted_sum: per head the range of wo_h (sum_t p_ht v_ht), head h's share of
  // attention's output ([layer][head], kPerHeadBytes), and max |v| per channel ([layer][kv_dim],
  // v as the float path caches it, kValueCache).
  std::vector<std::vector<Range>> head_out;
  std::vector<std::vector<float>> value_abs;
  std::vector<std::vector<float>> attention_in_abs;  // [layer][dim]: max |a_j| of wo's input a
  Range final_residual;  // x after the last layer, before the final RMSNorm (chip_residual)
  int positions = 0;
};
// Runs the float model greedily from BOS for `positions` positions (at most seq_len) and records
// the ranges.
Calibration calibrate(const Checkpoint& ck, ThreadPool& pool, int positions);
QuantizedMatmul quantize_matmul(const MatrixRef& w, Calibration::Range in, Calibration::Range out);
// The chip's output stage for output row r of `q`: acc = sum_j x_q[j] w_q[r][j] (the input zero
// point not yet taken off) to the int8 output.
int8_t requantize_row(const QuantizedMatmul& q, int r, int32_t acc);
// The output stage's float32 clamps for an int8 output: its range, dequantized and brought back
// through f32(1 / s_y), relative to the zero point (reference isa.md 2.1.4 out_clamps).
void output_clamps(QParams out, float& lo, float& hi);

// The FFN's elementwise part of one layer in the chip's ops (see the top of this file).
struct QuantizedGate {
  QParams h1, h3, g, a, m;
  float mult_a = 0, mult_m = 0;  // MUL(h1, g) -> a, MUL(a, h3) -> m
  float a_lo = 0, a_hi = 0, m_lo = 0, m_hi = 0;
};
QuantizedGate quantize_gate(QParams h1, QParams h3, Calibration::Range a, QParams m);
// The LOGISTIC spline's input clamp (f32 0x41265904).
constexpr float kLogisticClamp = 10.396732f;
// m[i] = SiLU(h1[i]) * h3[i] in the chip's ops, for i < n.
void gate(const QuantizedGate& q, const int8_t* h1, const int8_t* h3, int n, int8_t* m);

// The residual add as the chip's matmul (see the top of this file).
struct QuantizedAdd {
  QParams x, f, out;  // the FFN's residual x2, w2's output, the sum
  int32_t a = 0, b = 0;
  float mult = 0, lo = 0, hi = 0;
};
QuantizedAdd quantize_add(Calibration::Range x, QParams f, Calibration::Range out);
void residual_add(const QuantizedAdd& q, const int8_t* x, const int8_t* f, int n, int8_t* out);
// Int8Options::chip_residual: RMSNorm before the FFN as a diagonal FC of x2's bytes
// (int8_residual.h).
struct QuantizedRmsInput {
  QParams in, out;            // x2's grid; the FFN input's (w1's input)
  std::vector<int8_t> sign;   // [dim] the diagonal's weights: sign(g_j), 0 where g_j is 0
  std::vector<float> base;    // [dim] c_j = f32(f32(s_x2 |g_j|) f32(1 / s_out))
  float lo = 0, hi = 0;       // out's output clamps
  float mean_multiplier = 0;  // rms_mean_multiplier(s_x2, dim): r_ffn's constant
};
// RMSNorm's scale of x: 1 / sqrt(mean(x^2) + 1e-5), in float32.
float rms_scale(const float* x, int n);

// Where attention's weighted sum meets 1 / S (with chip_attention; docs/llm.md "The weighted sum
// in ops with evidence").
enum class WeightedSum {
  // Per head the exact int32 sum over positions of e_ht u'_ht, weighed with 1 / S_h and added over
  // heads in float32 on the scalar core, then one output stage (the default: the chip would have to
  // hand the scalar core int32 sums, which no op with evidence does).
  kScalarCore,
  // A: per head an FC over positions (e the input, the u' cache the weights) whose output stage
  // has the per-token multiplier f32(c_hi (1 / S_h)): int8 bytes y_h (dim wide) per head; then
  // the sum over heads as an FC with integer weights per head (the residual add's form) to o.
  kPerHeadBytes,
  // B: the cache holds v~ = r v (kv_dim bytes per position) instead of u'; per head an FC over
  // positions (e the input, v~ the weights) with the per-token multiplier to wo's int8 input
  // (head_size bytes per head, heads side by side); then wo as the int8 path's FC to o.
  kValueCache,
};

// (An option the int8 CPU path reads is its arithmetic: tests/llm/chip_path_test.cpp's arithmetic()
// lists those, so that chip paths share one CPU run per arithmetic; add a new one there.)
struct Int8Options {
  // Issue 14 step c's arithmetic (top of this file), the default; false: RMSNorm before q, k, v
  // and wo after attention, as the float path (the CLI's --unfused-layers).
  bool fused_layers = true;
  // With fused_layers: attention (scores, softmax, the weighted sum) in the chip's arithmetic (top
  // of this file); false: the float path's scores and softmax over the u cache.
  bool chip_attention = true;
  // With chip_attention, on the chip path (ChipTransformer): the scores run on the Edge TPU, the
  // keys resident in tile memory and written as tokens arrive (docs/llm.md); the CLI's
  // --scores-on-chip.
  bool chip_scores = false;
  // With chip_scores, on the chip path: the scores' program writes the new key into its column of
  // the resident keys itself (compiler/fc_column_write.h: the host streams 256 bytes per head
  // instead of the key's 64-position groups; one program per 64-position group, its column
  // rewritten per run: llm/group_program.h); the CLI's --key-column-write.
  bool chip_key_write = false;
  // With chip_attention: how the weighted sum is computed (the int8 path only; the chip and batch
  // paths compute it on the host through the inherited attend()).
  WeightedSum weighted_sum = WeightedSum::kScalarCore;
  // With chip_attention: RoPE and RMSNorm's scale r on the chain's int8 q and k in the chip's
  // elementwise ops (int8_rope.h: MUL by cos, MUL of the pair-swapped bytes by sin', ADD with a
  // per-token multiplier r), straight to the key cache's bytes and q~; false: the host dequantizes
  // q and k, scales by r, rotates in float32 and quantizes (docs/llm.md "RoPE in the chip's ops").
  bool chip_rope = false;
  // With chip_rope and the RoPE sum in the scores' program, on the chip path: the program that
  // computes q leaves q's products in a resident row of each tile instead of returning them, and
  // the scores' program reads them from there (docs/llm.md "q's products kept on the tiles");
  // false: they make the round trip through the host (the form before; for comparisons).
  bool keep_rope_products = true;
  // With fused_layers: RMSNorm's scale r of each layer's input from the int8 bytes q, k and v read
  // (the residual add's output; the host's quantized x at layer 0) in the scalar core's float32
  // ops (int8_rms.h: an exact int32 sum of squares, then a Newton reciprocal square root), where
  // r is otherwise the float32 scale of the host's residual stream; everything r multiplies (q,
  // k, v, u', v~, RoPE's per-token multipliers) takes this r (docs/llm.md "RMSNorm's scale from
  // the chip's bytes"); the CLI's --chip-rms.
  bool chip_rms = false;
  // With chip_rope, chip_key_write and chip_rms, on the chip path: each layer's chain runs the
  // next layer's scores and softmax in the same program where it can (ChipPathStats::
  // joined_layers; docs/llm.md "The joined program in the chip path"); false: the two programs
  // run apart (for comparisons).
  bool join_scores = true;
  // With join_scores and chip_residual, on the chip path: the last layer's joined program goes on
  // after wo with the layer's rest (attention add, r_ffn, the FFN's input norm) and its FFN
  // (compiler::FcLayerRest), where they fit (ChipPathStats::rest_layers); false: the FFN runs
  // apart (for comparisons).
  bool join_layers = true;
  // With join_layers, on the chip path: how many layers' joined programs one run holds (D.2: layer
  // 1's behind layer 0's rest; ChipPathStats::composed_layers): 0 as many as fit, N > 0 at most N
  // (a boundary where composing would put more layers in one program runs apart; 1: each layer its
  // own, for comparisons); negative: refused (ChipTransformer throws Error).
  int layers_per_run = 0;
  // With chip_rms, chip_rope and WeightedSum::kValueCache, the int8 path only: the residual
  // stream in int8 between attention and the FFN and between layers, as a chip program of the
  // whole layer would compute it (int8_residual.h; docs/llm.md "The residual stream in int8"):
  // v~ from wv's output stage, x2 the residual add of x's bytes and wo's output, the FFN's
  // RMSNorm from x2's bytes, the next add reading x2's bytes, the final RMSNorm the last add's;
  // the CLI's --chip-residual.
  bool chip_residual = false;
};

// Attention of one layer in the chip's arithmetic (Int8Options::chip_attention).
struct QuantizedAttention {
  // [kv_dim]: k after RoPE, symmetric (zero point 0: the scores' weights), one scale per RoPE pair
  // of channels, from the calibrated pair lengths with kHeadroom (int8_model.cpp)
  std::vector<float> k_scale;
  // [head]: q~_j = q_j k_scale_j after RoPE (the key scale moved to the query), the scores' input;
  // symmetric (zero point 0), so one program can take every head's q~ as one input
  std::vector<QParams> q;
  // [head]: the scores q.k / sqrt(hs) in int8, from the calibrated range with kHeadroom; the
  // output stage's multiplier f32(f32(s_q~ f32(1 / sqrt(hs))) f32(1 / s_score)) and clamps
  std::vector<QParams> score;
  std::vector<float> score_mult, score_lo, score_hi;
  std::vector<float> exp_mult;  // [head]: f32(s_score log2 e), score bytes to base-2 exponents
  std::vector<float> u_scale;   // [dim]: u' = r u, symmetric per output channel (the weights)
  QParams out;                  // attention's output o
  std::vector<float> out_mult;  // [dim]: f32(f32(1/255 u_scale) f32(1 / s_o))
  float out_lo = 0, out_hi = 0;
  // WeightedSum::kPerHeadBytes: y_h in int8 per head (calibrated range of head h's share), the
  // constant part of the per-token multiplier c_hi = f32(f32(1/255 u_scale_i) f32(1 / s_yh))
  // ([head][dim]) and y_h's clamps; the sum over heads: integer weights a_h (the largest head
  // scale 127, the others their ratio, rounded) and multiplier f32(f32(s_max f32(1/127))
  // f32(1 / s_o)), o's clamps as above.
  std::vector<QParams> head;
  std::vector<float> head_base, head_lo, head_hi;
  std::vector<int32_t> head_weight;
  float head_sum_mult = 0;
  // WeightedSum::kValueCache: v~ = r v symmetric per channel ([kv_dim], calibrated max |v| with
  // kHeadroom); wo's input a symmetric per head ([dim], the head's calibrated max |a_j|), the
  // constant part of the per-token multiplier c_j = f32(f32(1/255 v_scale) f32(1 / att_scale_j))
  // ([dim]: output j of head h = j / head_size reads its kv head's channel), clamps
  // +-kSymmetricClamp; and wo with a's scales folded into its columns (wo diag(att_scale), input
  // scale 1 and zero point 0), quantized per output row as every matmul.
  std::vector<float> v_scale, att_scale, att_base;
  QuantizedMatmul wo;
  // Int8Options::chip_residual: v~ from wv's output stage, its multipliers f32(v_base_j r)
  // ([kv_dim], int8_residual.h's value_tilde_base).
  std::vector<float> v_base;
  // Int8Options::chip_rope: q's rotation to q~ (gain k_scale, output scale q's per head) and k's to
  // the key cache's bytes (gain 1, output scale k_scale), from the chain's q and k bytes.
  QuantizedRope rope_q, rope_k;
};
constexpr float kSymmetricClamp = 127.0f;
// One head's weighted sum as an FC over positions in the chip's output stage, with the per-token
// multiplier: y_i = clamp(rint(clamp(f32(acc_i) f32(base_i inv_sum))) + z), acc_i = sum_{t < n}
// e_t w_t[i] (int32, e the softmax's bytes with zero point 0, w_t the row of position t, `stride`
// bytes apart), for i < width.
void weighted_sum_head(const uint8_t* e, int n, const int8_t* w, size_t stride, int width,
                       const float* base, float inv_sum, QParams out, float lo, float hi,
                       int8_t* y);
// kPerHeadBytes' sum over heads: o_i = the output stage of sum_h a_h (y_hi - z_h) (y: n_heads rows
// of dim bytes), for i < dim.
void sum_heads(const QuantizedAttention& a, const int8_t* y, int dim, int8_t* o);
constexpr float kLog2e = 1.44269504f;
QuantizedAttention quantize_attention(const Config& c, const Calibration& cal, int layer,
                                      WeightedSum weighted_sum = WeightedSum::kScalarCore);
// Symmetric int8 with scale s (zero point 0): clamp(rint(x / s), -127, 127).
int8_t quantize_symmetric(float x, float s);
// Softmax of n int8 scores (exp_mult = f32(s_score log2 e) turns a difference of scores into a
// base-2 exponent) as a scalar-core program computes it in float32 with its special-function
// unit (exp2 and reciprocal; the simulator's are std::exp2 and 1 / x): m = max,
// x_t = exp2(f32(score_t - m) exp_mult), e_t = rint(255 x_t) as a byte (255 at the maximum),
// S = x_0 + ... + x_{n-1} in order; returns 1 / S.
float scalar_core_softmax(const int8_t* scores, int n, float exp_mult, uint8_t* e);

// The int8 path's quantized model: every layer matmul, gate, residual add and u matmul. Immutable
// once built, so the sequences of a batch share one.
struct Int8Weights {
  Int8Weights(const Checkpoint& ck, const Calibration& calibration, Int8Options options);
  const QuantizedMatmul& matmul(int layer, LayerMatmul m) const {
    return mats[size_t(layer) * kLayerMatmuls + size_t(m)];
  }
  const QuantizedMatmul& values_of(int layer, int head) const {
    return values[size_t(layer) * size_t(config.n_heads) + size_t(head)];
  }
  // fused_layers: u of every head (n_heads x dim bytes, head after head) from v's bytes, as the
  // chip computes it (head h reads its kv head's slice of v).
  void values_q(int layer, const int8_t* v, int8_t* u) const;
  Config config;
  Int8Options options;
  std::vector<QuantizedMatmul> mats;          // [layer][matmul]
  std::vector<QuantizedGate> gates;           // [layer]
  std::vector<QuantizedAdd> adds;             // [layer < n_layers - 1] (fused_layers)
  std::vector<QuantizedMatmul> values;        // [layer][head] (fused_layers)
  std::vector<QuantizedAttention> attention;  // [layer] (fused_layers and chip_attention)
  // chip_residual (int8_residual.h): x's bytes plus wo's output onto x2's grid ([layer]), the FFN
  // input from x2's bytes ([layer]), and the last layer's x2 plus w2's output onto the final
  // residual's grid.
  std::vector<QuantizedAdd> attention_adds;
  std::vector<QuantizedRmsInput> rms_inputs;
  QuantizedAdd final_add;
  bool chip_attention() const { return options.fused_layers && options.chip_attention; }
};

class Int8Transformer : public Transformer {
 public:
  Int8Transformer(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration,
                  Int8Options options = {});
  // Over weights built before (and shared, e.g. by the sequences of a batch).
  Int8Transformer(const Checkpoint& ck, ThreadPool& pool,
                  std::shared_ptr<const Int8Weights> weights);
  const Int8Options& options() const { return weights_->options; }
  const std::shared_ptr<const Int8Weights>& weights() const { return weights_; }
  // Layer l's residual add into layer l + 1's q, k, v input (fused_layers, l < n_layers - 1).
  const QuantizedAdd& add_of(int layer) const { return weights_->adds[size_t(layer)]; }
  // fused_layers: u = wo_h v of head h (dim x head_size, reading its kv head's slice of v).
  const QuantizedMatmul& values_of(int layer, int head) const {
    return weights_->values_of(layer, head);
  }
  const QuantizedMatmul& matmul(int layer, LayerMatmul m) const {
    return weights_->matmul(layer, m);
  }
  // fused_layers: RMSNorm's scale r of layer `layer`'s input at `pos`, as the forward pass at
  // `pos` took it (rms_scale_q's).
  float rms_scale_at(int layer, int pos) const {
    return r_cache_.at(size_t(layer) * size_t(ck_.config.seq_len) + size_t(pos));
  }
  const QuantizedGate& gate_of(int layer) const { return weights_->gates[size_t(layer)]; }

 protected:
  // Quantize the input, matmul_q, dequantize the output.
  void layer_matmul(int layer, LayerMatmul m, const float* in, float* out) override;
  // Quantize the input (w1's input quantization, which w3 shares), ffn_q, dequantize w2's output.
  void ffn(int layer, const float* in, float* out) override;
  // The integer parts, which the chip path replaces: y_q = the chip's FULLY_CONNECTED of x_q, and
  // the FFN from w1's quantized input to w2's quantized output (w1, w3, gate(), w2).
  virtual void matmul_q(int layer, LayerMatmul m, const int8_t* xq, int8_t* yq);
  virtual void ffn_q(int layer, const int8_t* xq, int8_t* yq);
  // fused_layers: q, k, v in the chip's form; then x entering the layer (quantized by the host at
  // layer 0, else the previous layer's residual add).
  void qkv(int layer, int pos, const float* x, float* q, float* k, float* v) override;
  // fused_layers: attention's output from the weights and the u cache (top of this file).
  void attend(int layer, int pos, float* out) override;
  // fused_layers: u of every head (n_heads x dim bytes, head after head) from v's bytes; by
  // default the int8 matmuls on the host (Int8Weights::values_q).
  virtual void values_q(int layer, const int8_t* v, int8_t* u);
  // The integer seams of fused_layers: q, k, v of the quantized x (by default three matmul_q), and
  // the FFN with the residual add after it (by default ffn_q, then residual_add into `next`).
  virtual void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v);
  virtual void ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq, int8_t* next);
  // chip_attention: the int8 scores of every head at `pos` (scores[h][t], t <= pos, rows of
  // seq_len) from q~ (dim bytes, head after head, zero point 0) and the key cache, whose row `pos`
  // is already written (key_q); by default on the host.
  virtual void scores_q(int layer, int pos, const int8_t* q8, int8_t* scores);
  // chip_attention: the softmax's exponentials' bytes e[h][t] (t <= pos, rows of seq_len) and 1 / S
  // per head from q~ as scores_q takes it; by default scores_q, then scalar_core_softmax per head
  // on the host.
  virtual void softmax_q(int layer, int pos, const int8_t* q8, uint8_t* e, float* inv_sum);
  // WeightedSum::kValueCache: wo's int8 input a (heads x head_size bytes, head after head) from
  // the exponentials' bytes e[h][t] (t <= pos, rows of seq_len), 1 / S per head and the v~ cache
  // (value_q); by default weighted_sum_head per head on the host.
  virtual void value_sum_q(int layer, int pos, const uint8_t* e, const float* inv_sum, int8_t* a);
  // WeightedSum::kValueCache: attention's output o (dim bytes) from wo's input a (value_sum_q's);
  // by default wo diag(s_a) as the int8 matmul on the host.
  virtual void wo_q(int layer, const int8_t* a, int8_t* o);
  // chip_rope: RoPE's products of q and k at `pos` (int8_rope.h: P1 = MUL(x, cos), P2 =
  // MUL(swap(x), sin')), q's dim bytes then k's kv_dim in each of p1 and p2; by default on the host
  // from q and k's bytes (qkv_q's) and rope_tables.
  virtual void rope_products_q(int layer, int pos, const int8_t* q, const int8_t* k, int8_t* p1,
                               int8_t* p2);
  // chip_rope: q~ (dim bytes) from q's products (p1 and p2 as rope_products_q wrote them: q's dim
  // bytes, then k's kv_dim) and r of `pos`; by default rope_sum on the host. An override that
  // computes it in the scores' program instead (with the key's sum too, from the products after
  // q's) need not write `q_rot` (softmax_q's q8 is then what it wrote, if anything).
  virtual void rope_sum_q(int layer, int pos, float r, const int8_t* p1, const int8_t* p2,
                          int8_t* q_rot);
  // fused_layers: RMSNorm's scale r of the layer's input, from the host's float32 residual x or,
  // with chip_rms, from x's bytes xq (q, k and v's input) by chip_rms_scale (int8_rms.h).
  virtual float rms_scale_q(int layer, const int8_t* xq, const float* x);
  // chip_residual: v~ of the layer's input x_q with r (kv_dim bytes, wv's output stage with the
  // per-token multipliers) into `v_tilde`; `v` is qkv_q's third output. By default value_tilde of
  // x_q on the host; the chip path takes the bytes its program computed in v's place.
  virtual void value_tilde_q(int layer, const int8_t* xq, const int8_t* v, float r,
                             int8_t* v_tilde);
  // chip_residual: x after the last layer from the last add's bytes.
  void final_residual(float* x) override;
  // WeightedSum::kValueCache: v~ = r v of position t (kv_dim bytes).
  const int8_t* value_q(int layer, int t) const {
    return v_cache_.data() +
           (size_t(layer) * size_t(ck_.config.seq_len) + size_t(t)) * size_t(ck_.config.kv_dim());
  }
  // chip_attention: the int8 key of position t (kv_dim bytes).
  const int8_t* key_q(int layer, int t) const {
    return k_cache_.data() +
           (size_t(layer) * size_t(ck_.config.seq_len) + size_t(t)) * size_t(ck_.config.kv_dim());
  }

 private:
  std::shared_ptr<const Int8Weights> weights_;
  // chip_attention: attention's scores and softmax for every head at `pos`, into p_.
  void chip_attention_weights(int layer, int pos);
  // WeightedSum::kPerHeadBytes and kValueCache: o from p_ and inv_sum_ (Int8Options).
  void per_token_weighted_sum(int layer, int pos, float* out);
  std::vector<int8_t> u_cache_;  // [layer][pos][head][dim] (u', r folded in, with chip_attention)
  std::vector<int8_t> k_cache_;  // chip_attention: [layer][pos][kv_dim], after RoPE
  std::vector<int8_t> scores_;   // chip_attention: [head][seq_len]
  std::vector<uint8_t> p_;       // chip_attention: the exponentials' bytes, [head][seq_len]
  std::vector<float> inv_sum_;   // chip_attention: [head] 1 / S
  std::vector<int8_t> u_tmp_;
  // WeightedSum::kValueCache: [layer][pos][kv_dim] v~ = r v; the other two: per-head bytes
  std::vector<int8_t> v_cache_, heads_q_;
  std::vector<float> r_cache_;  // [layer][pos]: RMSNorm's scale of x
  std::vector<int8_t> x2q_, next_q_, q8_, k8_, v8_;
  std::vector<int8_t> layer_in_q_;  // chip_residual: the bytes q, k and v read (x_q)
  // chip_rope: the tables, RoPE's products (q's then k's), q~ before it joins q8_
  std::vector<int8_t> cos_q_, sin_q_, rope_p1_, rope_p2_, q_rot_;
  std::vector<int8_t> xq_, yq_, h1q_, h3q_, mq_;
  std::vector<int32_t> acc_;
};

}  // namespace tinycoral::llm
