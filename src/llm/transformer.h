// The llama2.c transformer's forward pass on the CPU, one token at a time with a KV cache, in
// float32 as run.c computes it (RMSNorm, RoPE, grouped-query attention, SwiGLU FFN, classifier).
// The seven matmuls of each layer go through layer_matmul(), which the int8 path (int8_model.h)
// replaces with the Edge TPU's arithmetic and the calibration pass observes; the FFN (w1, w3, SiLU
// times w3's output, w2) goes through ffn(), which the int8 path replaces as a whole so that its
// elementwise part can be the chip's ops too. Everything else is the same code for both.
#pragma once

#include <cmath>
#include <span>
#include <vector>

#include "llm/checkpoint.h"
#include "llm/thread_pool.h"

namespace tinycoral::llm {

// RoPE's angle for channel pair (i, i+1) at position pos: pos * 10000^(-(i mod hs) / hs), every
// step in float32 (the int8 path's tables take the same angle: int8_rope.cpp).
inline float rope_angle(int pos, int i, int head_size) {
  const int head_dim = i % head_size;
  const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(head_dim) / float(head_size));
  return static_cast<float>(pos) * freq;
}

// The matmuls of one layer, in the order forward() runs them.
enum class LayerMatmul { kQ, kK, kV, kO, kW1, kW3, kW2 };
constexpr int kLayerMatmuls = 7;
const char* matmul_name(LayerMatmul m);
// W of a matmul: [rows][cols], y = W x.
struct MatrixRef {
  const float* w;
  int rows, cols;
};
MatrixRef layer_matrix(const Checkpoint& ck, int layer, LayerMatmul m);

class Transformer {
 public:
  // `ck` and `pool` must outlive the transformer.
  Transformer(const Checkpoint& ck, ThreadPool& pool);
  virtual ~Transformer() = default;

  const Config& config() const { return ck_.config; }
  // The logits after `token` at position `pos` (0 <= pos < seq_len); positions 0..pos-1 must have
  // been run first, with the tokens of this sequence. The span lives until the next call.
  std::span<float> forward(int token, int pos);
  // Greedy decoding needs only the largest logit. With this on, forward() computes the classifier
  // exactly only for tokens that can still be the largest, by a rigorous bound from an int8 copy of
  // it (docs/llm.md "Speed"); the other logits are -infinity. The argmax, and every logit within
  // the bound of it, are bit for bit those of the full classifier; a greedy token reads about a
  // third of the classifier's bytes.
  void set_argmax_only(bool on) { argmax_only_ = on; }

 protected:
  virtual void layer_matmul(int layer, LayerMatmul m, const float* in, float* out);
  // q, k and v of `layer` at `pos` from the residual stream x: RMSNorm with rms_att, then wq, wk,
  // wv.
  virtual void qkv(int layer, int pos, const float* x, float* q, float* k, float* v);
  // Attention's output after wo (`out`, dim values) at `pos`: attention, then wo.
  virtual void attend(int layer, int pos, float* out);
  // The attention weights of every head at `pos` (scores, softmax), then probs(h)[t], t <= pos.
  void attention_weights(int layer, int pos);
  const float* probs(int head) const {
    return att_.data() + size_t(head) * size_t(ck_.config.seq_len);
  }
  // The residual stream during forward() (while ffn() runs: x after attention's residual add).
  const float* residual() const { return x_.data(); }
  // While attend() runs: q of every head after RoPE, and the cached k (after RoPE) and v of
  // position t of `layer` (kv_dim values each).
  const float* query() const { return q_.data(); }
  const float* key_row(int layer, int t) const { return key_cache_.data() + cache_row(layer, t); }
  const float* value_row(int layer, int t) const {
    return value_cache_.data() + cache_row(layer, t);
  }
  // out = w2 (SiLU(w1 in) * (w3 in)); `out` may be `in`.
  virtual void ffn(int layer, const float* in, float* out);
  // The residual stream x (dim values) after the last layer, before the final RMSNorm: the int8
  // path with Int8Options::chip_residual replaces it by its last add's bytes; here unchanged.
  virtual void final_residual(float* /*x*/) {}
  void float_matmul(const float* w, const float* in, float* out, int rows, int cols);
  const Checkpoint& ck_;
  ThreadPool& pool_;

 private:
  void attention(int layer, int pos);
  size_t cache_row(int layer, int t) const {
    return (size_t(layer) * size_t(ck_.config.seq_len) + size_t(t)) * size_t(ck_.config.kv_dim());
  }
  void classifier(const float* x);
  bool argmax_only_ = false;
  std::vector<int8_t> cls_q_;                  // int8 copy of the classifier, per-row scaled
  std::vector<float> cls_scale_, cls_margin_;  // per row: scale, bound on |w - q s| (+ rounding)
  std::vector<float> approx_;
  std::vector<float> x_, xb_, xb2_, hb_, hb2_, q_, att_, logits_, key_cache_, value_cache_;
};

}  // namespace tinycoral::llm
