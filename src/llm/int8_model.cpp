#include "llm/int8_model.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "chip/ops/nlu.h"
#include "common/error.h"
#include "host/rounding.h"
#include "llm/int8_residual.h"
#include "llm/int8_rms.h"
#include "llm/kernels.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

namespace tinycoral::llm {

namespace edgetpu = host::edgetpu;

QParams qparams_for_range(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  QParams q;
  q.scale = hi > lo ? (hi - lo) / 255.0f : 1.0f;
  const float z = -128.0f - lo / q.scale;
  q.zero_point = static_cast<int32_t>(std::clamp(std::nearbyint(z), -128.0f, 127.0f));
  return q;
}

void quantize(const float* x, int n, QParams q, int8_t* out) {
  for (int i = 0; i < n; ++i) {
    const float v = std::nearbyint(x[i] / q.scale) + static_cast<float>(q.zero_point);
    out[i] = static_cast<int8_t>(std::clamp(v, -128.0f, 127.0f));
  }
}

QuantizedMatmul quantize_matmul(const MatrixRef& m, Calibration::Range in, Calibration::Range out) {
  QuantizedMatmul q;
  q.rows = m.rows;
  q.cols = m.cols;
  q.in = qparams_for_range(in.lo, in.hi);
  q.out = qparams_for_range(out.lo, out.hi);
  q.w.resize(size_t(m.rows) * size_t(m.cols));
  q.w_scale.resize(size_t(m.rows));
  q.w_rowsum.resize(size_t(m.rows));
  q.multiplier.resize(size_t(m.rows));
  for (int r = 0; r < m.rows; ++r) {
    const float* row = m.w + size_t(r) * size_t(m.cols);
    float max_abs = 0;
    for (int j = 0; j < m.cols; ++j) max_abs = std::max(max_abs, std::fabs(row[j]));
    const float s = max_abs > 0 ? max_abs / 127.0f : 1.0f;
    int32_t sum = 0;
    for (int j = 0; j < m.cols; ++j) {
      const float v = std::clamp(std::nearbyint(row[j] / s), -127.0f, 127.0f);
      q.w[size_t(r) * size_t(m.cols) + size_t(j)] = static_cast<int8_t>(v);
      sum += static_cast<int32_t>(v);
    }
    q.w_scale[size_t(r)] = s;
    q.w_rowsum[size_t(r)] = sum;
    q.multiplier[size_t(r)] = edgetpu::product_scale(q.in.scale, s, q.out.scale);
  }
  output_clamps(q.out, q.clamp_lo, q.clamp_hi);
  return q;
}

void output_clamps(QParams out, float& lo, float& hi) {
  const float s = out.scale, inv = edgetpu::inverse(s);
  const volatile float l = static_cast<float>(-128 - out.zero_point) * s;
  const volatile float h = static_cast<float>(127 - out.zero_point) * s;
  lo = l * inv;
  hi = h * inv;
}

QuantizedGate quantize_gate(QParams h1, QParams h3, Calibration::Range a, QParams m) {
  QuantizedGate q;
  q.h1 = h1;
  q.h3 = h3;
  q.g = {1.0f / 256.0f, -128};  // LOGISTIC's output: 1/256 steps from 0
  q.a = qparams_for_range(a.lo, a.hi);
  q.m = m;
  q.mult_a = edgetpu::product_scale(h1.scale, q.g.scale, q.a.scale);
  q.mult_m = edgetpu::product_scale(q.a.scale, h3.scale, m.scale);
  output_clamps(q.a, q.a_lo, q.a_hi);
  output_clamps(q.m, q.m_lo, q.m_hi);
  return q;
}

void gate(const QuantizedGate& q, const int8_t* h1, const int8_t* h3, int n, int8_t* m) {
  static const chip::NluTable table = chip::ops::logistic_table();
  const edgetpu::Clamps ca{q.a_lo, q.a_hi}, cm{q.m_lo, q.m_hi};
  for (int i = 0; i < n; ++i) {
    const int32_t d1 = int32_t{h1[i]} - q.h1.zero_point;
    // LOGISTIC: the input clamp applies before the spline; its output is already in 1/256 steps.
    const float x =
        std::clamp(static_cast<float>(d1) * q.h1.scale, -kLogisticClamp, kLogisticClamp);
    const float p = std::nearbyint(chip::ops::evaluate_spline(table, x));
    const int32_t g = static_cast<int32_t>(std::clamp(p, 0.0f, 255.0f)) - 128;
    const int32_t a = std::clamp(
        edgetpu::requantize(d1 * (g - q.g.zero_point), q.mult_a, ca, q.a.zero_point), -128, 127);
    const int32_t d3 = int32_t{h3[i]} - q.h3.zero_point;
    m[i] = static_cast<int8_t>(std::clamp(
        edgetpu::requantize((a - q.a.zero_point) * d3, q.mult_m, cm, q.m.zero_point), -128, 127));
  }
}

QuantizedAdd quantize_add(Calibration::Range x, QParams f, Calibration::Range out) {
  QuantizedAdd q;
  q.x = qparams_for_range(x.lo, x.hi);
  q.f = f;
  q.out = qparams_for_range(out.lo, out.hi);
  // a / b ~ s_x / s_f, the larger of the two 127.
  const float ratio = q.x.scale / q.f.scale;
  if (ratio <= 1.0f) {
    q.b = 127;
    q.a = std::max(1, static_cast<int32_t>(std::nearbyint(127.0f * ratio)));
  } else {
    q.a = 127;
    q.b = std::max(1, static_cast<int32_t>(std::nearbyint(127.0f / ratio)));
  }
  q.mult = edgetpu::product_scale(q.f.scale, 1.0f / static_cast<float>(q.b), q.out.scale);
  output_clamps(q.out, q.lo, q.hi);
  return q;
}

void residual_add(const QuantizedAdd& q, const int8_t* x, const int8_t* f, int n, int8_t* out) {
  const edgetpu::Clamps clamps{q.lo, q.hi};
  for (int i = 0; i < n; ++i) {
    const int32_t acc =
        q.a * (int32_t{x[i]} - q.x.zero_point) + q.b * (int32_t{f[i]} - q.f.zero_point);
    out[i] = static_cast<int8_t>(
        std::clamp(edgetpu::requantize(acc, q.mult, clamps, q.out.zero_point), -128, 127));
  }
}

float rms_scale(const float* x, int n) {
  float ss = dot(x, x, n);
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  return 1.0f / std::sqrt(ss);
}

int8_t quantize_symmetric(float x, float s) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(x / s), -127.0f, 127.0f));
}

float scalar_core_softmax(const int8_t* scores, int n, float exp_mult, uint8_t* e) {
  int32_t m = -128;
  for (int t = 0; t < n; ++t) m = std::max(m, int32_t{scores[t]});
  float sum = 0;
  for (int t = 0; t < n; ++t) {
    const float x = std::exp2(static_cast<float>(int32_t{scores[t]} - m) * exp_mult);
    sum += x;
    e[t] = static_cast<uint8_t>(std::nearbyint(x * 255.0f));
  }
  return 1.0f / sum;
}

namespace {

float symmetric_scale(float max_abs) { return max_abs > 0 ? max_abs / 127.0f : 1.0f; }

// Calibration sees the first positions of one greedy run; later positions of other stories reach
// further, and a cached key or u' past its range stays wrong for every later token. The keys', u''s
// and scores' ranges get this much room (measured: docs/llm.md "Attention in the chip's
// arithmetic").
constexpr float kHeadroom = 2.0f;
// WeightedSum::kPerHeadBytes: room on each head's share of attention's output (measured:
// docs/llm.md "The weighted sum in ops with evidence").
constexpr float kHeadShareHeadroom = 1.0f;

}  // namespace

QuantizedAttention quantize_attention(const Config& c, const Calibration& cal, int layer,
                                      WeightedSum weighted_sum) {
  const size_t l = size_t(layer);
  const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
  QuantizedAttention a;
  // One scale per RoPE pair of key channels (the rotation mixes the two, so a shared scale
  // commutes with it).
  const std::vector<Calibration::Range>& rk = cal.key[l];
  for (int j = 0; j < c.kv_dim(); j += 2) {
    const float m = std::max(
        {-rk[size_t(j)].lo, rk[size_t(j)].hi, -rk[size_t(j) + 1].lo, rk[size_t(j) + 1].hi});
    a.k_scale.push_back(symmetric_scale(kHeadroom * m));
    a.k_scale.push_back(a.k_scale.back());
  }
  // q~_j = q_j s_k,j (the key channel's scale moved to the query, where it is a float on the
  // host): its range per head bounds every channel's.
  const float root = std::sqrt(static_cast<float>(hs));
  for (int h = 0; h < c.n_heads; ++h) {
    // Symmetric (the pair lengths' ranges are), so every head's q~ has the zero point 0 and one
    // program can take all heads' queries as one input.
    float max_abs = 0;
    for (int j = 0; j < hs; ++j) {
      const Calibration::Range rq = cal.query[l][size_t(h * hs + j)];
      const float s = a.k_scale[size_t((h / kv_mul) * hs + j)];
      max_abs = std::max({max_abs, -rq.lo * s, rq.hi * s});
    }
    a.q.push_back({symmetric_scale(max_abs), 0});
    const Calibration::Range rs = cal.scores[l][size_t(h)];
    a.score.push_back(qparams_for_range(kHeadroom * rs.lo, kHeadroom * rs.hi));
    a.score_mult.push_back(
        edgetpu::product_scale(a.q.back().scale, 1.0f / root, a.score.back().scale));
    float clamp_lo = 0, clamp_hi = 0;
    output_clamps(a.score.back(), clamp_lo, clamp_hi);
    a.score_lo.push_back(clamp_lo);
    a.score_hi.push_back(clamp_hi);
    a.exp_mult.push_back(a.score.back().scale * kLog2e);
  }
  const Calibration::Range ro = cal.attention[l];
  a.out = qparams_for_range(ro.lo, ro.hi);
  for (int i = 0; i < c.dim; ++i) {
    a.u_scale.push_back(symmetric_scale(kHeadroom * cal.weighted_abs[l][size_t(i)]));
    a.out_mult.push_back(edgetpu::product_scale(1.0f / 255.0f, a.u_scale.back(), a.out.scale));
  }
  output_clamps(a.out, a.out_lo, a.out_hi);
  if (weighted_sum == WeightedSum::kPerHeadBytes) {
    float largest = 0;
    for (int h = 0; h < c.n_heads; ++h) {
      const Calibration::Range r = cal.head_out[l][size_t(h)];
      a.head.push_back(qparams_for_range(kHeadShareHeadroom * r.lo, kHeadShareHeadroom * r.hi));
      largest = std::max(largest, a.head.back().scale);
      for (int i = 0; i < c.dim; ++i)
        a.head_base.push_back(
            edgetpu::product_scale(1.0f / 255.0f, a.u_scale[size_t(i)], a.head.back().scale));
      float lo = 0, hi = 0;
      output_clamps(a.head.back(), lo, hi);
      a.head_lo.push_back(lo);
      a.head_hi.push_back(hi);
    }
    // a_h / 127 ~ s_yh / s_max, as the residual add's two weights.
    for (int h = 0; h < c.n_heads; ++h)
      a.head_weight.push_back(std::max(
          1, static_cast<int32_t>(std::nearbyint(127.0f * (a.head[size_t(h)].scale / largest)))));
    a.head_sum_mult = edgetpu::product_scale(largest, 1.0f / 127.0f, a.out.scale);
  }
  if (weighted_sum == WeightedSum::kValueCache) {
    for (int j = 0; j < c.kv_dim(); ++j)
      a.v_scale.push_back(symmetric_scale(kHeadroom * cal.value_abs[l][size_t(j)]));
    // wo's input a: symmetric per head (its largest calibrated |a_j|, no headroom: measured),
    // the scales folded into wo's columns, since an FC's input has one scale.
    for (int h = 0; h < c.n_heads; ++h) {
      float m = 0;
      for (int j = 0; j < hs; ++j) m = std::max(m, cal.attention_in_abs[l][size_t(h * hs + j)]);
      for (int j = 0; j < hs; ++j) {
        const float sv = a.v_scale[size_t((h / kv_mul) * hs + j)];
        a.att_scale.push_back(symmetric_scale(m));
        a.att_base.push_back(edgetpu::product_scale(1.0f / 255.0f, sv, a.att_scale.back()));
      }
    }
  }
  return a;
}

void weighted_sum_head(const uint8_t* e, int n, const int8_t* w, size_t stride, int width,
                       const float* base, float inv_sum, QParams out, float lo, float hi,
                       int8_t* y) {
  // Exact in int32 (255 x 127 per term: more than 66,000 positions to overflow).
  std::vector<int32_t> acc(size_t(width), 0);
  for (int t = 0; t < n; ++t)
    if (e[t] != 0) axpy_int8(int32_t{e[t]}, w + size_t(t) * stride, acc.data(), width);
  const edgetpu::Clamps clamps{lo, hi};
  for (int i = 0; i < width; ++i) {
    // The per-token multiplier, as the scalar core would write it: one float32 product.
    const volatile float mult = base[i] * inv_sum;
    y[i] = static_cast<int8_t>(
        std::clamp(edgetpu::requantize(acc[size_t(i)], mult, clamps, out.zero_point), -128, 127));
  }
}

void sum_heads(const QuantizedAttention& a, const int8_t* y, int dim, int8_t* o) {
  const edgetpu::Clamps clamps{a.out_lo, a.out_hi};
  for (int i = 0; i < dim; ++i) {
    int32_t acc = 0;
    for (size_t h = 0; h < a.head.size(); ++h)
      acc += a.head_weight[h] * (int32_t{y[h * size_t(dim) + size_t(i)]} - a.head[h].zero_point);
    o[i] = static_cast<int8_t>(
        std::clamp(edgetpu::requantize(acc, a.head_sum_mult, clamps, a.out.zero_point), -128, 127));
  }
}

namespace {

// The float model, recording each layer matmul's input and output ranges.
class RecordingTransformer : public Transformer {
 public:
  RecordingTransformer(const Checkpoint& ck, ThreadPool& pool, Calibration& cal)
      : Transformer(ck, pool), cal_(cal) {}

 protected:
  void layer_matmul(int layer, LayerMatmul m, const float* in, float* out) override {
    Transformer::layer_matmul(layer, m, in, out);
    const MatrixRef w = layer_matrix(ck_, layer, m);
    widen(cal_.in[size_t(layer)][size_t(m)], in, w.cols);
    widen(cal_.out[size_t(layer)][size_t(m)], out, w.rows);
    if (m == LayerMatmul::kO) {
      std::vector<float>& abs = cal_.attention_in_abs[size_t(layer)];
      for (int j = 0; j < w.cols; ++j) abs[size_t(j)] = std::max(abs[size_t(j)], std::fabs(in[j]));
    }
    if (m == LayerMatmul::kW1) {
      h1_.assign(out, out + w.rows);
      widen(cal_.residual_mid[size_t(layer)], residual(), ck_.config.dim);
    }
    if (m == LayerMatmul::kW2) {
      // SiLU(w1 x), as the float FFN computes it before the product with w3 x.
      for (float& v : h1_) v *= 1.0f / (1.0f + std::exp(-v));
      widen(cal_.silu[size_t(layer)], h1_.data(), static_cast<int>(h1_.size()));
      if (layer + 1 == ck_.config.n_layers) {
        // x after the last layer, as forward() adds w2's output to the residual.
        raw_.resize(size_t(w.rows));
        for (int i = 0; i < w.rows; ++i) raw_[size_t(i)] = residual()[i] + out[i];
        widen(cal_.final_residual, raw_.data(), w.rows);
      }
    }
  }

  void qkv(int layer, int pos, const float* x, float* q, float* k, float* v) override {
    Transformer::qkv(layer, pos, x, q, k, v);
    const Config& c = ck_.config;
    widen(cal_.residual[size_t(layer)], x, c.dim);
    // W diag(g) x = (W RMSNorm(x)) / RMSNorm's scale.
    const float r = rms_scale(x, c.dim);
    const float* outs[3] = {q, k, v};
    const int rows[3] = {c.dim, c.kv_dim(), c.kv_dim()};
    for (int i = 0; i < 3; ++i) {
      raw_.resize(size_t(rows[i]));
      for (int j = 0; j < rows[i]; ++j) raw_[size_t(j)] = outs[i][j] / r;
      widen(cal_.qkv_raw[size_t(layer)][size_t(i)], raw_.data(), rows[i]);
    }
    // wo_h of the unnormalized v (raw_ holds it now), every head.
    const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
    const MatrixRef wo = layer_matrix(ck_, layer, LayerMatmul::kO);
    u_.resize(size_t(c.dim));
    for (int h = 0; h < c.n_heads; ++h) {
      const float* vh = raw_.data() + size_t(h / kv_mul) * size_t(hs);
      for (int i = 0; i < c.dim; ++i) {
        float acc = 0;
        for (int j = 0; j < hs; ++j)
          acc += wo.w[size_t(i) * size_t(wo.cols) + size_t(h * hs + j)] * vh[j];
        u_[size_t(i)] = acc;
      }
      widen(cal_.values[size_t(layer)], u_.data(), c.dim);
    }
  }

  void attend(int layer, int pos, float* out) override {
    Transformer::attend(layer, pos, out);
    const Config& c = ck_.config;
    const size_t l = size_t(layer);
    const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
    const float* k = key_row(layer, pos);
    // RoPE turns each pair of channels by an angle that grows with the position, so a channel's
    // range at the calibration's positions says little about later ones; the pair's length does
    // not change: each channel of a pair gets [-length, length].
    widen_pairs(cal_.key[l], k, c.kv_dim());
    widen_pairs(cal_.query[l], query(), c.dim);
    const float root = std::sqrt(static_cast<float>(hs));
    for (int h = 0; h < c.n_heads; ++h)
      for (int t = 0; t <= pos; ++t) {
        const float score = dot(query() + h * hs, key_row(layer, t) + (h / kv_mul) * hs, hs) / root;
        widen(cal_.scores[l][size_t(h)], &score, 1);
      }
    // wo_h v of this position (every position passes here once), per output over heads.
    const MatrixRef wo = layer_matrix(ck_, layer, LayerMatmul::kO);
    const float* v = value_row(layer, pos);
    std::vector<float>& w = cal_.weighted_abs[l];
    for (int h = 0; h < c.n_heads; ++h) {
      const float* vh = v + (h / kv_mul) * hs;
      for (int i = 0; i < c.dim; ++i) {
        float acc = 0;
        for (int j = 0; j < hs; ++j)
          acc += wo.w[size_t(i) * size_t(wo.cols) + size_t(h * hs + j)] * vh[j];
        w[size_t(i)] = std::max(w[size_t(i)], std::fabs(acc));
      }
    }
    widen(cal_.attention[l], out, c.dim);
    std::vector<float>& va = cal_.value_abs[l];
    for (int j = 0; j < c.kv_dim(); ++j) va[size_t(j)] = std::max(va[size_t(j)], std::fabs(v[j]));
    // Head h's share of the output: wo_h (sum_t p_ht v_ht).
    att_.resize(size_t(hs));
    for (int h = 0; h < c.n_heads; ++h) {
      std::fill(att_.begin(), att_.end(), 0.0f);
      const float* p = probs(h);
      for (int t = 0; t <= pos; ++t)
        axpy(p[t], value_row(layer, t) + (h / kv_mul) * hs, att_.data(), hs);
      for (int i = 0; i < c.dim; ++i) {
        float acc = 0;
        for (int j = 0; j < hs; ++j)
          acc += wo.w[size_t(i) * size_t(wo.cols) + size_t(h * hs + j)] * att_[size_t(j)];
        widen(cal_.head_out[l][size_t(h)], &acc, 1);
      }
    }
  }

 private:
  static void widen_pairs(std::vector<Calibration::Range>& r, const float* v, int n) {
    for (int j = 0; j < n; j += 2) {
      const float length = std::sqrt(v[j] * v[j] + v[j + 1] * v[j + 1]);
      const float both[2] = {-length, length};
      widen(r[size_t(j)], both, 2);
      widen(r[size_t(j) + 1], both, 2);
    }
  }
  static void widen(Calibration::Range& r, const float* v, int n) {
    for (int i = 0; i < n; ++i) {
      r.lo = std::min(r.lo, v[i]);
      r.hi = std::max(r.hi, v[i]);
    }
  }
  Calibration& cal_;
  std::vector<float> h1_, raw_, u_, att_;
};

}  // namespace

Calibration calibrate(const Checkpoint& ck, ThreadPool& pool, int positions) {
  Calibration cal;
  cal.in.resize(size_t(ck.config.n_layers));
  cal.out.resize(size_t(ck.config.n_layers));
  cal.silu.resize(size_t(ck.config.n_layers));
  cal.residual.resize(size_t(ck.config.n_layers));
  cal.residual_mid.resize(size_t(ck.config.n_layers));
  cal.qkv_raw.resize(size_t(ck.config.n_layers));
  cal.values.resize(size_t(ck.config.n_layers));
  const Config& c = ck.config;
  cal.query.assign(size_t(c.n_layers), std::vector<Calibration::Range>(size_t(c.dim)));
  cal.key.assign(size_t(c.n_layers), std::vector<Calibration::Range>(size_t(c.kv_dim())));
  cal.scores.assign(size_t(c.n_layers), std::vector<Calibration::Range>(size_t(c.n_heads)));
  cal.weighted_abs.assign(size_t(c.n_layers), std::vector<float>(size_t(c.dim)));
  cal.attention.resize(size_t(c.n_layers));
  cal.head_out.assign(size_t(c.n_layers), std::vector<Calibration::Range>(size_t(c.n_heads)));
  cal.value_abs.assign(size_t(c.n_layers), std::vector<float>(size_t(c.kv_dim())));
  cal.attention_in_abs.assign(size_t(c.n_layers), std::vector<float>(size_t(c.dim)));
  cal.positions = std::clamp(positions, 1, ck.config.seq_len);
  RecordingTransformer model(ck, pool, cal);
  model.set_argmax_only(true);
  int token = kBos;
  for (int pos = 0; pos < cal.positions; ++pos) token = argmax(model.forward(token, pos));
  return cal;
}

Int8Weights::Int8Weights(const Checkpoint& ck, const Calibration& calibration,
                         Int8Options options_in)
    : config(ck.config), options(options_in) {
  const Config& c = ck.config;
  if (options.chip_rope && (!chip_attention() || c.head_size() % 2 != 0))
    fail("RoPE in the chip's ops needs attention in the chip's arithmetic and an even head size");
  if (options.chip_rms && !options.fused_layers)
    fail("RMSNorm's scale from the chip's bytes needs the fused layers' arithmetic");
  if (options.chip_residual &&
      !(options.chip_rms && options.chip_rope && options.weighted_sum == WeightedSum::kValueCache))
    fail(
        "the residual stream in int8 needs r from the chip's bytes, RoPE in the chip's ops and the "
        "value cache's weighted sum");
  if (options.fused_layers && (calibration.residual.size() != size_t(c.n_layers) ||
                               calibration.qkv_raw.size() != size_t(c.n_layers) ||
                               calibration.values.size() != size_t(c.n_layers)))
    fail("the calibration has no ranges for fused layers");
  std::vector<float> folded;
  for (int l = 0; l < c.n_layers; ++l) {
    for (int m = 0; m < kLayerMatmuls; ++m) {
      const MatrixRef w = layer_matrix(ck, l, LayerMatmul(m));
      if (options.fused_layers && m <= int(LayerMatmul::kV)) {
        // RMSNorm's weight folded into the columns; the input is the residual stream itself.
        const float* g = ck.layers[size_t(l)].rms_att.data();
        folded.resize(size_t(w.rows) * size_t(w.cols));
        for (int r = 0; r < w.rows; ++r)
          for (int j = 0; j < w.cols; ++j)
            folded[size_t(r) * size_t(w.cols) + size_t(j)] =
                w.w[size_t(r) * size_t(w.cols) + size_t(j)] * g[j];
        mats.push_back(quantize_matmul(MatrixRef{folded.data(), w.rows, w.cols},
                                       calibration.residual[size_t(l)],
                                       calibration.qkv_raw[size_t(l)][size_t(m)]));
        continue;
      }
      mats.push_back(quantize_matmul(w, calibration.in[size_t(l)][size_t(m)],
                                     calibration.out[size_t(l)][size_t(m)]));
    }
    const QuantizedMatmul &w1 = matmul(l, LayerMatmul::kW1), &w3 = matmul(l, LayerMatmul::kW3);
    // w1 and w3 read the same vector, so their calibrated input ranges are the same.
    if (w1.in.scale != w3.in.scale || w1.in.zero_point != w3.in.zero_point)
      fail("layer ", l, ": w1 and w3 were calibrated on different inputs");
    gates.push_back(quantize_gate(w1.out, w3.out, calibration.silu.at(size_t(l)),
                                  matmul(l, LayerMatmul::kW2).in));
  }
  if (!options.fused_layers) return;
  for (int l = 0; l + 1 < c.n_layers; ++l)
    adds.push_back(quantize_add(calibration.residual_mid[size_t(l)],
                                matmul(l, LayerMatmul::kW2).out,
                                calibration.residual[size_t(l + 1)]));
  const int hs = c.head_size();
  std::vector<float> block(size_t(c.dim) * size_t(hs));
  for (int l = 0; l < c.n_layers; ++l) {
    const MatrixRef wo = layer_matrix(ck, l, LayerMatmul::kO);
    for (int h = 0; h < c.n_heads; ++h) {
      for (int i = 0; i < c.dim; ++i)
        for (int j = 0; j < hs; ++j)
          block[size_t(i) * size_t(hs) + size_t(j)] =
              wo.w[size_t(i) * size_t(wo.cols) + size_t(h * hs + j)];
      // Its input is v's bytes: the same range as v's output, so the same quantization.
      values.push_back(quantize_matmul(MatrixRef{block.data(), c.dim, hs},
                                       calibration.qkv_raw[size_t(l)][2],
                                       calibration.values[size_t(l)]));
    }
  }
  if (!chip_attention()) return;
  if (calibration.query.size() != size_t(c.n_layers) ||
      calibration.key.size() != size_t(c.n_layers) ||
      calibration.scores.size() != size_t(c.n_layers) ||
      calibration.weighted_abs.size() != size_t(c.n_layers) ||
      calibration.attention.size() != size_t(c.n_layers))
    fail("the calibration has no ranges for attention in the chip's arithmetic");
  if (options.weighted_sum != WeightedSum::kScalarCore &&
      (calibration.head_out.size() != size_t(c.n_layers) ||
       calibration.value_abs.size() != size_t(c.n_layers)))
    fail("the calibration has no ranges for the weighted sum's per-head multipliers");
  for (int l = 0; l < c.n_layers; ++l) {
    attention.push_back(quantize_attention(c, calibration, l, options.weighted_sum));
    if (options.chip_rope) {
      QuantizedAttention& a = attention.back();
      const int kv_mul = c.n_heads / c.n_kv_heads;
      std::vector<float> gain, out;
      for (int j = 0; j < c.dim; ++j) {
        gain.push_back(a.k_scale[size_t((j / hs / kv_mul) * hs + j % hs)]);
        out.push_back(a.q[size_t(j / hs)].scale);
      }
      const QParams q = matmul(l, LayerMatmul::kQ).out, k = matmul(l, LayerMatmul::kK).out;
      a.rope_q = quantize_rope(q.scale, q.zero_point, gain, out);
      a.rope_k = quantize_rope(k.scale, k.zero_point, std::vector<float>(a.k_scale.size(), 1.0f),
                               a.k_scale);
    }
    if (options.weighted_sum != WeightedSum::kValueCache) continue;
    QuantizedAttention& a = attention.back();
    // wo diag(att_scale), quantized per output row as every matmul, its input scale 1.
    const MatrixRef wo = layer_matrix(ck, l, LayerMatmul::kO);
    block.resize(size_t(wo.rows) * size_t(wo.cols));
    for (int i = 0; i < wo.rows; ++i)
      for (int j = 0; j < wo.cols; ++j)
        block[size_t(i) * size_t(wo.cols) + size_t(j)] =
            wo.w[size_t(i) * size_t(wo.cols) + size_t(j)] * a.att_scale[size_t(j)];
    a.wo = quantize_matmul(MatrixRef{block.data(), wo.rows, wo.cols}, {},
                           calibration.out[size_t(l)][size_t(LayerMatmul::kO)]);
    a.wo.in = {1.0f, 0};
    for (int i = 0; i < wo.rows; ++i)
      a.wo.multiplier[size_t(i)] =
          edgetpu::product_scale(1.0f, a.wo.w_scale[size_t(i)], a.wo.out.scale);
    if (options.chip_residual) a.v_base = value_tilde_base(matmul(l, LayerMatmul::kV), a.v_scale);
  }
  if (!options.chip_residual) return;
  for (int l = 0; l < c.n_layers; ++l) {
    // x's bytes (q, k and v's input grid) plus attention's output, onto the grid of x after
    // attention's residual add: the one the FFN's add reads x2 in (adds[l].x).
    attention_adds.push_back(quantize_add(calibration.residual[size_t(l)],
                                          attention[size_t(l)].wo.out,
                                          calibration.residual_mid[size_t(l)]));
    const QuantizedAdd& add = attention_adds.back();
    const QParams in = matmul(l, LayerMatmul::kQ).in;
    if (add.x.scale != in.scale || add.x.zero_point != in.zero_point ||
        (l + 1 < c.n_layers && (adds[size_t(l)].x.scale != add.out.scale ||
                                adds[size_t(l)].x.zero_point != add.out.zero_point)))
      fail("layer ", l, ": the residual's grids differ between its adds");
    rms_inputs.push_back(quantize_rms_input(add.out, matmul(l, LayerMatmul::kW1).in,
                                            ck.layers[size_t(l)].rms_ffn.data(), c.dim));
  }
  const int last = c.n_layers - 1;
  final_add = quantize_add(calibration.residual_mid[size_t(last)],
                           matmul(last, LayerMatmul::kW2).out, calibration.final_residual);
}

void Int8Weights::values_q(int layer, const int8_t* v, int8_t* u) const {
  const Config& c = config;
  const int hs = c.head_size(), kv_mul = c.n_heads / c.n_kv_heads;
  std::vector<int32_t> acc(size_t(c.dim));
  for (int h = 0; h < c.n_heads; ++h) {
    const QuantizedMatmul& m = values_of(layer, h);
    // Exact int32 sums: the kernel's order changes nothing.
    matvec_int8_rows(m.w.data(), v + size_t(h / kv_mul) * size_t(hs), acc.data(), hs, 0, m.rows);
    for (int i = 0; i < m.rows; ++i)
      u[size_t(h) * size_t(c.dim) + size_t(i)] = requantize_row(m, i, acc[size_t(i)]);
  }
}

Int8Transformer::Int8Transformer(const Checkpoint& ck, ThreadPool& pool,
                                 const Calibration& calibration, Int8Options options)
    : Int8Transformer(ck, pool, std::make_shared<const Int8Weights>(ck, calibration, options)) {}

Int8Transformer::Int8Transformer(const Checkpoint& ck, ThreadPool& pool,
                                 std::shared_ptr<const Int8Weights> weights)
    : Transformer(ck, pool), weights_(std::move(weights)) {
  const Config& c = ck.config;
  if (weights_->mats.size() != size_t(c.n_layers) * kLayerMatmuls ||
      weights_->config.dim != c.dim || weights_->config.n_heads != c.n_heads)
    fail("the int8 weights were built for another model");
  const size_t widest = size_t(std::max(c.dim, c.hidden_dim));
  xq_.resize(widest);
  yq_.resize(widest);
  h1q_.resize(size_t(c.hidden_dim));
  h3q_.resize(size_t(c.hidden_dim));
  mq_.resize(size_t(c.hidden_dim));
  acc_.resize(widest);
  if (options().fused_layers) {
    u_cache_.resize(size_t(c.n_layers) * size_t(c.seq_len) * size_t(c.n_heads) * size_t(c.dim));
    r_cache_.resize(size_t(c.n_layers) * size_t(c.seq_len));
  }
  if (weights_->chip_attention()) {
    k_cache_.resize(size_t(c.n_layers) * size_t(c.seq_len) * size_t(c.kv_dim()));
    scores_.resize(size_t(c.n_heads) * size_t(c.seq_len));
    p_.resize(size_t(c.n_heads) * size_t(c.seq_len));
    inv_sum_.resize(size_t(c.n_heads));
    u_tmp_.resize(size_t(c.n_heads) * size_t(c.dim));
    if (options().weighted_sum == WeightedSum::kValueCache)
      v_cache_.resize(size_t(c.n_layers) * size_t(c.seq_len) * size_t(c.kv_dim()));
    heads_q_.resize(size_t(c.n_heads) * size_t(c.dim));
    if (options().chip_rope) {
      cos_q_.resize(size_t(c.dim));
      sin_q_.resize(size_t(c.dim));
      rope_p1_.resize(size_t(c.dim + c.kv_dim()));
      rope_p2_.resize(size_t(c.dim + c.kv_dim()));
      q_rot_.resize(size_t(c.dim));
    }
  }
  x2q_.resize(size_t(c.dim));
  next_q_.resize(size_t(c.dim));
  layer_in_q_.resize(size_t(c.dim));
  q8_.resize(size_t(c.dim));
  k8_.resize(size_t(c.kv_dim()));
  v8_.resize(size_t(c.kv_dim()));
}

namespace {

void dequantize(const int8_t* q, int n, QParams p, float* out) {
  for (int i = 0; i < n; ++i) out[i] = static_cast<float>(int32_t{q[i]} - p.zero_point) * p.scale;
}

}  // namespace

void Int8Transformer::layer_matmul(int layer, LayerMatmul m, const float* in, float* out) {
  const QuantizedMatmul& q = matmul(layer, m);
  quantize(in, q.cols, q.in, xq_.data());
  matmul_q(layer, m, xq_.data(), yq_.data());
  dequantize(yq_.data(), q.rows, q.out, out);
}

void Int8Transformer::ffn(int layer, const float* in, float* out) {
  const QuantizedMatmul &w1 = matmul(layer, LayerMatmul::kW1),
                        &w2 = matmul(layer, LayerMatmul::kW2);
  quantize(in, w1.cols, w1.in, xq_.data());
  if (options().chip_residual) {
    // From x2's bytes (per_token_weighted_sum's add), not the host's float residual.
    const int dim = ck_.config.dim;
    const QuantizedRmsInput& norm = weights_->rms_inputs[size_t(layer)];
    rms_input(norm, x2q_.data(), dim, rms_input_scale(norm, x2q_.data(), dim), xq_.data());
    if (layer + 1 < ck_.config.n_layers) {
      ffn_add_q(layer, xq_.data(), x2q_.data(), yq_.data(), next_q_.data());
    } else {
      ffn_q(layer, xq_.data(), yq_.data());
      residual_add(weights_->final_add, x2q_.data(), yq_.data(), dim, next_q_.data());
    }
  } else if (options().fused_layers && layer + 1 < ck_.config.n_layers) {
    quantize(residual(), ck_.config.dim, add_of(layer).x, x2q_.data());
    ffn_add_q(layer, xq_.data(), x2q_.data(), yq_.data(), next_q_.data());
  } else {
    ffn_q(layer, xq_.data(), yq_.data());
  }
  dequantize(yq_.data(), w2.rows, w2.out, out);
}

void Int8Transformer::ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq,
                                int8_t* next) {
  ffn_q(layer, xq, yq);
  residual_add(add_of(layer), x2q, yq, ck_.config.dim, next);
}

void Int8Transformer::qkv(int layer, int pos, const float* x, float* q, float* k, float* v) {
  if (!options().fused_layers) {
    Transformer::qkv(layer, pos, x, q, k, v);
    return;
  }
  const Config& c = ck_.config;
  const int8_t* xq = next_q_.data();  // the previous layer's residual add
  if (layer == 0) {
    quantize(x, c.dim, matmul(0, LayerMatmul::kQ).in, xq_.data());
    xq = xq_.data();
  }
  qkv_q(layer, xq, q8_.data(), k8_.data(), v8_.data());
  const float r = rms_scale_q(layer, xq, x);
  if (options().chip_residual) std::copy(xq, xq + c.dim, layer_in_q_.begin());
  const int8_t* bytes[3] = {q8_.data(), k8_.data(), v8_.data()};
  float* outs[3] = {q, k, v};
  for (int i = 0; i < 3; ++i) {
    const QuantizedMatmul& m = matmul(layer, LayerMatmul(i));
    dequantize(bytes[i], m.rows, m.out, outs[i]);
    for (int j = 0; j < m.rows; ++j) outs[i][j] *= r;
  }
  const size_t at = size_t(layer) * size_t(c.seq_len) + size_t(pos);
  r_cache_[at] = r;
  int8_t* u = u_cache_.data() + at * size_t(c.n_heads) * size_t(c.dim);
  if (!weights_->chip_attention()) {
    values_q(layer, v8_.data(), u);
    return;
  }
  if (options().weighted_sum == WeightedSum::kValueCache) {
    // v~ = r v, quantized per channel: the weighted sum's weights (v already has r: above).
    const QuantizedAttention& a = weights_->attention[size_t(layer)];
    int8_t* vrow = v_cache_.data() + at * size_t(c.kv_dim());
    if (options().chip_residual) {
      // chip_residual: wv's output stage with the per-token multipliers, one rounding.
      value_tilde_q(layer, xq, v8_.data(), r, vrow);
    } else {
      for (int j = 0; j < c.kv_dim(); ++j) vrow[j] = quantize_symmetric(v[j], a.v_scale[size_t(j)]);
    }
  }
  // u' = r u, quantized per output channel: the weights of attention's weighted sum. (The value
  // cache's arithmetic does not read it; computing it keeps the chip and batch paths' seams.)
  values_q(layer, v8_.data(), u_tmp_.data());
  const std::vector<float>& scale = weights_->attention[size_t(layer)].u_scale;
  for (int h = 0; h < c.n_heads; ++h) {
    const QParams uq = values_of(layer, h).out;
    for (int i = 0; i < c.dim; ++i) {
      const size_t at_hi = size_t(h) * size_t(c.dim) + size_t(i);
      const float value = static_cast<float>(int32_t{u_tmp_[at_hi]} - uq.zero_point) * uq.scale;
      u[at_hi] = quantize_symmetric(r * value, scale[size_t(i)]);
    }
  }
}

void Int8Transformer::value_tilde_q(int layer, const int8_t* xq, const int8_t* /*v*/, float r,
                                    int8_t* v_tilde) {
  value_tilde(matmul(layer, LayerMatmul::kV), weights_->attention[size_t(layer)].v_base, xq, r,
              v_tilde);
}

float Int8Transformer::rms_scale_q(int layer, const int8_t* xq, const float* x) {
  const int dim = ck_.config.dim;
  if (!options().chip_rms) return rms_scale(x, dim);
  const QParams in = matmul(layer, LayerMatmul::kQ).in;
  return chip_rms_scale(xq, dim, in.scale, in.zero_point);
}

void Int8Transformer::chip_attention_weights(int layer, int pos) {
  const Config& c = ck_.config;
  const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  const size_t first = size_t(layer) * size_t(c.seq_len) * size_t(kv_dim);
  // This position's key joins the int8 key cache (the scores' weights) once.
  int8_t* krow = k_cache_.data() + first + size_t(pos) * size_t(kv_dim);
  if (options().chip_rope) {
    // From the chain's q and k bytes (still in q8_ and k8_ from qkv()) and r of this position.
    const float r = r_cache_[size_t(layer) * size_t(c.seq_len) + size_t(pos)];
    rope_products_q(layer, pos, q8_.data(), k8_.data(), rope_p1_.data(), rope_p2_.data());
    rope_sum(a.rope_k, rope_p1_.data() + c.dim, rope_p2_.data() + c.dim, kv_dim, r, krow);
    rope_sum_q(layer, pos, r, rope_p1_.data(), rope_p2_.data(), q_rot_.data());
    std::copy(q_rot_.begin(), q_rot_.end(), q8_.begin());
    softmax_q(layer, pos, q8_.data(), p_.data(), inv_sum_.data());
    return;
  }
  const float* k = key_row(layer, pos);
  for (int j = 0; j < kv_dim; ++j) krow[j] = quantize_symmetric(k[j], a.k_scale[size_t(j)]);
  for (int h = 0; h < c.n_heads; ++h) {
    int8_t* q = q8_.data() + size_t(h) * size_t(hs);
    const float* qf = query() + size_t(h) * size_t(hs);
    const float* ks = a.k_scale.data() + size_t(h / kv_mul) * size_t(hs);
    for (int j = 0; j < hs; ++j) q[j] = quantize_symmetric(qf[j] * ks[j], a.q[size_t(h)].scale);
  }
  softmax_q(layer, pos, q8_.data(), p_.data(), inv_sum_.data());
}

void Int8Transformer::rope_products_q(int layer, int pos, const int8_t* q, const int8_t* k,
                                      int8_t* p1, int8_t* p2) {
  const Config& c = ck_.config;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  rope_tables(pos, c.dim, c.head_size(), cos_q_.data(), sin_q_.data());
  rope_products(a.rope_q, q, cos_q_.data(), sin_q_.data(), c.dim, p1, p2);
  rope_products(a.rope_k, k, cos_q_.data(), sin_q_.data(), c.kv_dim(), p1 + c.dim, p2 + c.dim);
}

void Int8Transformer::rope_sum_q(int layer, int /*pos*/, float r, const int8_t* p1,
                                 const int8_t* p2, int8_t* q_rot) {
  rope_sum(weights_->attention[size_t(layer)].rope_q, p1, p2, ck_.config.dim, r, q_rot);
}

void Int8Transformer::softmax_q(int layer, int pos, const int8_t* q8, uint8_t* e, float* inv_sum) {
  const Config& c = ck_.config;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  scores_q(layer, pos, q8, scores_.data());
  pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
    for (int h = h_begin; h < h_end; ++h)
      inv_sum[size_t(h)] =
          scalar_core_softmax(scores_.data() + size_t(h) * size_t(c.seq_len), pos + 1,
                              a.exp_mult[size_t(h)], e + size_t(h) * size_t(c.seq_len));
  });
}

void Int8Transformer::scores_q(int layer, int pos, const int8_t* q8, int8_t* scores) {
  const Config& c = ck_.config;
  const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  const size_t first = size_t(layer) * size_t(c.seq_len) * size_t(kv_dim);
  pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
    for (int h = h_begin; h < h_end; ++h) {
      const int8_t* q = q8 + size_t(h) * size_t(hs);
      const QParams qp = a.q[size_t(h)];
      const int8_t* keys = k_cache_.data() + first + size_t(h / kv_mul) * size_t(hs);
      int8_t* out = scores + size_t(h) * size_t(c.seq_len);
      const edgetpu::Clamps clamps{a.score_lo[size_t(h)], a.score_hi[size_t(h)]};
      const QParams sq = a.score[size_t(h)];
      for (int t = 0; t <= pos; ++t) {
        const int8_t* kt = keys + size_t(t) * size_t(kv_dim);
        int32_t acc = 0;
        for (int j = 0; j < hs; ++j) acc += (int32_t{q[j]} - qp.zero_point) * int32_t{kt[j]};
        out[t] = static_cast<int8_t>(std::clamp(
            edgetpu::requantize(acc, a.score_mult[size_t(h)], clamps, sq.zero_point), -128, 127));
      }
    }
  });
}

void Int8Transformer::values_q(int layer, const int8_t* v, int8_t* u) {
  weights_->values_q(layer, v, u);
}

void Int8Transformer::attend(int layer, int pos, float* out) {
  if (!options().fused_layers) {
    Transformer::attend(layer, pos, out);
    return;
  }
  const Config& c = ck_.config;
  const size_t first = size_t(layer) * size_t(c.seq_len);
  const size_t stride = size_t(c.n_heads) * size_t(c.dim);
  if (weights_->chip_attention() && options().weighted_sum != WeightedSum::kScalarCore) {
    chip_attention_weights(layer, pos);
    per_token_weighted_sum(layer, pos, out);
    return;
  }
  if (weights_->chip_attention()) {
    chip_attention_weights(layer, pos);
    // o = sum_h sum_t (e_ht / S_h) u'_ht: per head an exact integer sum over positions (the
    // simulator's accumulator saturates at int32; at 255 x 127 per term that needs more than
    // 66,000 positions), which the scalar core weighs with its head's 1 / S and adds over heads
    // in float32, heads in order; then the chip's output stage to int8 and the host dequantizes.
    const QuantizedAttention& a = weights_->attention[size_t(layer)];
    pool_.parallel_for(c.dim, 64, [&](int begin, int end) {
      const size_t n = size_t(end - begin);
      std::vector<int64_t> acc(n);
      std::vector<int32_t> part(n);
      std::vector<float> sum(n, 0.0f);
      for (int h = 0; h < c.n_heads; ++h) {
        std::fill(acc.begin(), acc.end(), 0);
        const uint8_t* e = p_.data() + size_t(h) * size_t(c.seq_len);
        // int32 partial sums over blocks of positions that cannot overflow them (255 x 127 per
        // term), which then add up exactly.
        constexpr int kBlock = 65536;
        for (int t0 = 0; t0 <= pos; t0 += kBlock) {
          std::fill(part.begin(), part.end(), 0);
          for (int t = t0; t <= std::min(pos, t0 + kBlock - 1); ++t) {
            const int32_t w = e[t];
            if (w == 0) continue;
            const int8_t* u = u_cache_.data() + (first + size_t(t)) * stride +
                              size_t(h) * size_t(c.dim) + size_t(begin);
            axpy_int8(w, u, part.data(), int(n));
          }
          for (size_t i = 0; i < n; ++i) acc[i] += part[i];
        }
        const float inv = inv_sum_[size_t(h)];
        for (size_t i = 0; i < n; ++i) {
          const float word = static_cast<float>(static_cast<int32_t>(std::clamp<int64_t>(
              acc[i], std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())));
          const volatile float weighted = word * inv;  // rounded: no fused multiply-add
          sum[i] += weighted;
        }
      }
      const edgetpu::Clamps clamps{a.out_lo, a.out_hi};
      for (size_t i = 0; i < n; ++i) {
        // The output stage with the accumulator already a float: * mult, clamp, round, + zero
        // point.
        float y = sum[i] * a.out_mult[size_t(begin) + i];
        y = std::clamp(y, clamps.lo, clamps.hi);
        const int32_t o =
            std::clamp(static_cast<int32_t>(std::nearbyint(y)) + a.out.zero_point, -128, 127);
        out[size_t(begin) + i] = static_cast<float>(o - a.out.zero_point) * a.out.scale;
      }
    });
    return;
  }
  attention_weights(layer, pos);
  // Each output's sum runs over heads, then positions, as above; the loop over outputs is innermost
  // so that it reads u rows in order and vectorizes (each output keeps its own additions).
  pool_.parallel_for(c.dim, 64, [&](int begin, int end) {
    float* o = out + begin;
    const size_t n = size_t(end - begin);
    std::fill(o, o + n, 0.0f);
    for (int h = 0; h < c.n_heads; ++h) {
      const QuantizedMatmul& m = values_of(layer, h);
      const float* p = probs(h);
      const int32_t z = m.out.zero_point;
      const float s = m.out.scale;
      for (int t = 0; t <= pos; ++t) {
        const float w = p[t] * r_cache_[first + size_t(t)];
        const int8_t* u = u_cache_.data() + (first + size_t(t)) * stride +
                          size_t(h) * size_t(c.dim) + size_t(begin);
        axpy_dequantized(w, u, z, s, o, int(n));
      }
    }
  });
}

void Int8Transformer::per_token_weighted_sum(int layer, int pos, float* out) {
  const Config& c = ck_.config;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  const size_t first = size_t(layer) * size_t(c.seq_len);
  const int n = pos + 1;
  if (options().weighted_sum == WeightedSum::kPerHeadBytes) {
    const size_t stride = size_t(c.n_heads) * size_t(c.dim);
    pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
      for (int h = h_begin; h < h_end; ++h)
        weighted_sum_head(p_.data() + size_t(h) * size_t(c.seq_len), n,
                          u_cache_.data() + first * stride + size_t(h) * size_t(c.dim), stride,
                          c.dim, a.head_base.data() + size_t(h) * size_t(c.dim),
                          inv_sum_[size_t(h)], a.head[size_t(h)], a.head_lo[size_t(h)],
                          a.head_hi[size_t(h)], heads_q_.data() + size_t(h) * size_t(c.dim));
    });
    int8_t* o = u_tmp_.data();
    sum_heads(a, heads_q_.data(), c.dim, o);
    dequantize(o, c.dim, a.out, out);
    return;
  }
  // kValueCache: wo's input, head after head, then wo diag(att_scale) as an FC.
  value_sum_q(layer, pos, p_.data(), inv_sum_.data(), heads_q_.data());
  wo_q(layer, heads_q_.data(), u_tmp_.data());
  dequantize(u_tmp_.data(), c.dim, a.wo.out, out);
  // chip_residual: x2 = x + o in bytes, what the FFN and the next add read.
  if (options().chip_residual)
    residual_add(weights_->attention_adds[size_t(layer)], layer_in_q_.data(), u_tmp_.data(), c.dim,
                 x2q_.data());
}

void Int8Transformer::final_residual(float* x) {
  if (options().chip_residual)
    dequantize(next_q_.data(), ck_.config.dim, weights_->final_add.out, x);
}

void Int8Transformer::wo_q(int layer, const int8_t* a, int8_t* o) {
  const QuantizedMatmul& wo = weights_->attention[size_t(layer)].wo;
  pool_.parallel_for(wo.rows, 16, [&](int begin, int end) {
    matvec_int8_rows(wo.w.data(), a, acc_.data(), wo.cols, begin, end);
    for (int r = begin; r < end; ++r) o[size_t(r)] = requantize_row(wo, r, acc_[size_t(r)]);
  });
}

void Int8Transformer::value_sum_q(int layer, int pos, const uint8_t* e, const float* inv_sum,
                                  int8_t* out) {
  const Config& c = ck_.config;
  const QuantizedAttention& a = weights_->attention[size_t(layer)];
  const int hs = c.head_size(), kv_dim = c.kv_dim(), kv_mul = c.n_heads / c.n_kv_heads;
  const int8_t* v = value_q(layer, 0);
  pool_.parallel_for(c.n_heads, 1, [&](int h_begin, int h_end) {
    for (int h = h_begin; h < h_end; ++h)
      weighted_sum_head(e + size_t(h) * size_t(c.seq_len), pos + 1,
                        v + size_t(h / kv_mul) * size_t(hs), size_t(kv_dim), hs,
                        a.att_base.data() + size_t(h) * size_t(hs), inv_sum[h], a.wo.in,
                        -kSymmetricClamp, kSymmetricClamp, out + size_t(h) * size_t(hs));
  });
}

void Int8Transformer::qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) {
  matmul_q(layer, LayerMatmul::kQ, xq, q);
  matmul_q(layer, LayerMatmul::kK, xq, k);
  matmul_q(layer, LayerMatmul::kV, xq, v);
}

void Int8Transformer::ffn_q(int layer, const int8_t* xq, int8_t* yq) {
  matmul_q(layer, LayerMatmul::kW1, xq, h1q_.data());
  matmul_q(layer, LayerMatmul::kW3, xq, h3q_.data());
  gate(gate_of(layer), h1q_.data(), h3q_.data(), ck_.config.hidden_dim, mq_.data());
  matmul_q(layer, LayerMatmul::kW2, mq_.data(), yq);
}

void Int8Transformer::matmul_q(int layer, LayerMatmul m, const int8_t* xq, int8_t* yq) {
  const QuantizedMatmul& q = matmul(layer, m);
  pool_.parallel_for(q.rows, 16, [&](int begin, int end) {
    matvec_int8_rows(q.w.data(), xq, acc_.data(), q.cols, begin, end);
    for (int r = begin; r < end; ++r) yq[r] = requantize_row(q, r, acc_[size_t(r)]);
  });
}

int8_t requantize_row(const QuantizedMatmul& q, int r, int32_t acc) {
  const edgetpu::Clamps clamps{q.clamp_lo, q.clamp_hi};
  const int32_t sum = acc - q.in.zero_point * q.w_rowsum[size_t(r)];
  return static_cast<int8_t>(std::clamp(
      edgetpu::requantize(sum, q.multiplier[size_t(r)], clamps, q.out.zero_point), -128, 127));
}

}  // namespace tinycoral::llm
