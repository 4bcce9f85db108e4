#include "llm/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "llm/kernels.h"
#include "llm/sampler.h"

namespace tinycoral::llm {

const char* matmul_name(LayerMatmul m) {
  static const char* names[] = {"wq", "wk", "wv", "wo", "w1", "w3", "w2"};
  return names[static_cast<int>(m)];
}

MatrixRef layer_matrix(const Checkpoint& ck, int layer, LayerMatmul m) {
  const Config& c = ck.config;
  const LayerWeights& l = ck.layers[static_cast<size_t>(layer)];
  switch (m) {
    case LayerMatmul::kQ:
      return {l.wq.data(), c.dim, c.dim};
    case LayerMatmul::kK:
      return {l.wk.data(), c.kv_dim(), c.dim};
    case LayerMatmul::kV:
      return {l.wv.data(), c.kv_dim(), c.dim};
    case LayerMatmul::kO:
      return {l.wo.data(), c.dim, c.dim};
    case LayerMatmul::kW1:
      return {l.w1.data(), c.hidden_dim, c.dim};
    case LayerMatmul::kW3:
      return {l.w3.data(), c.hidden_dim, c.dim};
    case LayerMatmul::kW2:
      return {l.w2.data(), c.dim, c.hidden_dim};
  }
  return {nullptr, 0, 0};
}

namespace {

void rmsnorm(float* out, const float* x, const float* weight, int n) {
  float ss = dot(x, x, n);
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (int j = 0; j < n; ++j) out[j] = weight[j] * (ss * x[j]);
}

}  // namespace

Transformer::Transformer(const Checkpoint& ck, ThreadPool& pool) : ck_(ck), pool_(pool) {
  const Config& c = ck.config;
  const size_t dim = size_t(c.dim), hidden = size_t(c.hidden_dim);
  x_.resize(dim);
  xb_.resize(dim);
  xb2_.resize(dim);
  hb_.resize(hidden);
  hb2_.resize(hidden);
  q_.resize(dim);
  att_.resize(size_t(c.n_heads) * size_t(c.seq_len));
  logits_.resize(size_t(c.vocab_size));
  const size_t cache = size_t(c.n_layers) * size_t(c.seq_len) * size_t(c.kv_dim());
  key_cache_.resize(cache);
  value_cache_.resize(cache);
}

void Transformer::float_matmul(const float* w, const float* in, float* out, int rows, int cols) {
  pool_.parallel_for(rows, 16,
                     [&](int begin, int end) { matvec_rows(w, in, out, cols, begin, end); });
}

void Transformer::layer_matmul(int layer, LayerMatmul m, const float* in, float* out) {
  const MatrixRef w = layer_matrix(ck_, layer, m);
  float_matmul(w.w, in, out, w.rows, w.cols);
}

void Transformer::ffn(int layer, const float* in, float* out) {
  layer_matmul(layer, LayerMatmul::kW1, in, hb_.data());
  layer_matmul(layer, LayerMatmul::kW3, in, hb2_.data());
  for (int i = 0; i < ck_.config.hidden_dim; ++i) {
    float val = hb_[size_t(i)];
    val *= 1.0f / (1.0f + std::exp(-val));  // SiLU
    hb_[size_t(i)] = val * hb2_[size_t(i)];
  }
  layer_matmul(layer, LayerMatmul::kW2, hb_.data(), out);
}

void Transformer::attention_weights(int layer, int pos) {
  const Config& c = ck_.config;
  const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const size_t layer_off = size_t(layer) * size_t(c.seq_len) * size_t(kv_dim);
  const float scale = std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
    for (int h = h_begin; h < h_end; ++h) {
      const float* q = q_.data() + size_t(h) * size_t(hs);
      float* att = att_.data() + size_t(h) * size_t(c.seq_len);
      const size_t head_off = layer_off + size_t(h / kv_mul) * size_t(hs);
      for (int t = 0; t <= pos; ++t)
        att[t] = dot(q, key_cache_.data() + head_off + size_t(t) * size_t(kv_dim), hs) / scale;
      softmax(std::span<float>(att, size_t(pos) + 1));
    }
  });
}

void Transformer::attend(int layer, int pos, float* out) {
  attention(layer, pos);
  layer_matmul(layer, LayerMatmul::kO, xb_.data(), out);
}

void Transformer::attention(int layer, int pos) {
  const Config& c = ck_.config;
  const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const size_t layer_off = size_t(layer) * size_t(c.seq_len) * size_t(kv_dim);
  const float scale = std::sqrt(static_cast<float>(hs));
  pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
    for (int h = h_begin; h < h_end; ++h) {
      const float* q = q_.data() + size_t(h) * size_t(hs);
      float* att = att_.data() + size_t(h) * size_t(c.seq_len);
      const size_t head_off = layer_off + size_t(h / kv_mul) * size_t(hs);
      for (int t = 0; t <= pos; ++t)
        att[t] = dot(q, key_cache_.data() + head_off + size_t(t) * size_t(kv_dim), hs) / scale;
      softmax(std::span<float>(att, size_t(pos) + 1));
      float* xb = xb_.data() + size_t(h) * size_t(hs);
      std::memset(xb, 0, size_t(hs) * sizeof(float));
      for (int t = 0; t <= pos; ++t)
        axpy(att[t], value_cache_.data() + head_off + size_t(t) * size_t(kv_dim), xb, hs);
    }
  });
}

void Transformer::classifier(const float* x) {
  const Config& c = ck_.config;
  const int n = c.dim, rows = c.vocab_size;
  const float* w = ck_.wcls().data();
  if (!argmax_only_) {
    float_matmul(w, x, logits_.data(), rows, n);
    return;
  }
  if (cls_q_.empty()) {
    cls_q_.resize(size_t(rows) * size_t(n));
    cls_scale_.resize(size_t(rows));
    cls_margin_.resize(size_t(rows));
    approx_.resize(size_t(rows));
    for (int r = 0; r < rows; ++r) {
      const float* row = w + size_t(r) * size_t(n);
      double max_abs = 0, err = 0;
      for (int j = 0; j < n; ++j) max_abs = std::max(max_abs, double(std::fabs(row[j])));
      const double s = max_abs > 0 ? max_abs / 127 : 1;
      for (int j = 0; j < n; ++j) {
        const double q = std::nearbyint(row[j] / s);
        cls_q_[size_t(r) * size_t(n) + size_t(j)] = static_cast<int8_t>(q);
        err = std::max(err, std::fabs(row[j] - q * s));
      }
      // |exact float dot - approx| <= (|w - q s| max) * |x|_1 + the float rounding of both dots,
      // each at most n * 2^-24 * max|w| * |x|_1 (doubled again for safety).
      cls_scale_[size_t(r)] = static_cast<float>(s);
      cls_margin_[size_t(r)] = static_cast<float>(err * 1.01 + 4.0 * n * 0x1p-24 * 128 * s);
    }
  }
  double l1 = 0;
  for (int j = 0; j < n; ++j) l1 += std::fabs(x[j]);
  const float x_l1 = static_cast<float>(l1 * 1.0001);
  pool_.parallel_for(rows, 64, [&](int begin, int end) {
    matvec_q8f_rows(cls_q_.data(), x, approx_.data(), n, begin, end);
  });
  float best_low = -std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r) {
    approx_[size_t(r)] *= cls_scale_[size_t(r)];
    best_low = std::max(best_low, approx_[size_t(r)] - cls_margin_[size_t(r)] * x_l1);
  }
  for (int r = 0; r < rows; ++r)
    logits_[size_t(r)] = approx_[size_t(r)] + cls_margin_[size_t(r)] * x_l1 >= best_low
                             ? dot(w + size_t(r) * size_t(n), x, n)
                             : -std::numeric_limits<float>::infinity();
}

void Transformer::qkv(int layer, int, const float* x, float* q, float* k, float* v) {
  rmsnorm(xb_.data(), x, ck_.layers[size_t(layer)].rms_att.data(), ck_.config.dim);
  layer_matmul(layer, LayerMatmul::kQ, xb_.data(), q);
  layer_matmul(layer, LayerMatmul::kK, xb_.data(), k);
  layer_matmul(layer, LayerMatmul::kV, xb_.data(), v);
}

std::span<float> Transformer::forward(int token, int pos) {
  const Config& c = ck_.config;
  if (token < 0 || token >= c.vocab_size) fail("token ", token, " is outside the vocabulary");
  if (pos < 0 || pos >= c.seq_len) fail("position ", pos, " is outside seq_len ", c.seq_len);
  const int dim = c.dim, hs = c.head_size(), kv_dim = c.kv_dim();
  float* x = x_.data();
  std::memcpy(x, ck_.token_embedding.data() + size_t(token) * size_t(dim), size_t(dim) * 4);
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = ck_.layers[size_t(l)];
    const size_t row = (size_t(l) * size_t(c.seq_len) + size_t(pos)) * size_t(kv_dim);
    float* k = key_cache_.data() + row;
    float* v = value_cache_.data() + row;
    qkv(l, pos, x, q_.data(), k, v);
    // RoPE: rotate each pair (i, i+1) of q (and of k while i < kv_dim) by pos * 10000^(-i'/hs).
    for (int i = 0; i < dim; i += 2) {
      const float val = rope_angle(pos, i, hs);
      const float fcr = std::cos(val), fci = std::sin(val);
      for (int which = 0; which < (i < kv_dim ? 2 : 1); ++which) {
        float* vec = which == 0 ? q_.data() : k;
        const float v0 = vec[i], v1 = vec[i + 1];
        vec[i] = v0 * fcr - v1 * fci;
        vec[i + 1] = v0 * fci + v1 * fcr;
      }
    }
    attend(l, pos, xb2_.data());
    for (int i = 0; i < dim; ++i) x[i] += xb2_[size_t(i)];
    rmsnorm(xb_.data(), x, w.rms_ffn.data(), dim);
    ffn(l, xb_.data(), xb_.data());
    for (int i = 0; i < dim; ++i) x[i] += xb_[size_t(i)];
  }
  final_residual(x);
  rmsnorm(x, x, ck_.rms_final.data(), dim);
  classifier(x);
  return logits_;
}

}  // namespace tinycoral::llm
