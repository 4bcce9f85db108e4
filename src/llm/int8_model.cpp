#include "llm/int8_model.h"

#include <algorithm>
#include <cmath>

#include "host/rounding.h"
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
  // The output stage's clamps: the int8 storage range, dequantized and brought back through
  // f32(1 / s_y), relative to the zero point (reference isa.md 2.1.4 out_clamps).
  const float s = q.out.scale, inv = edgetpu::inverse(s);
  const volatile float lo = static_cast<float>(-128 - q.out.zero_point) * s;
  const volatile float hi = static_cast<float>(127 - q.out.zero_point) * s;
  q.clamp_lo = lo * inv;
  q.clamp_hi = hi * inv;
  return q;
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
  }

 private:
  static void widen(Calibration::Range& r, const float* v, int n) {
    for (int i = 0; i < n; ++i) {
      r.lo = std::min(r.lo, v[i]);
      r.hi = std::max(r.hi, v[i]);
    }
  }
  Calibration& cal_;
};

}  // namespace

Calibration calibrate(const Checkpoint& ck, ThreadPool& pool, int positions) {
  Calibration cal;
  cal.in.resize(size_t(ck.config.n_layers));
  cal.out.resize(size_t(ck.config.n_layers));
  cal.positions = std::clamp(positions, 1, ck.config.seq_len);
  RecordingTransformer model(ck, pool, cal);
  model.set_argmax_only(true);
  int token = kBos;
  for (int pos = 0; pos < cal.positions; ++pos) token = argmax(model.forward(token, pos));
  return cal;
}

Int8Transformer::Int8Transformer(const Checkpoint& ck, ThreadPool& pool,
                                 const Calibration& calibration)
    : Transformer(ck, pool) {
  const Config& c = ck.config;
  for (int l = 0; l < c.n_layers; ++l)
    for (int m = 0; m < kLayerMatmuls; ++m)
      mats_.push_back(quantize_matmul(layer_matrix(ck, l, LayerMatmul(m)),
                                      calibration.in[size_t(l)][size_t(m)],
                                      calibration.out[size_t(l)][size_t(m)]));
  xq_.resize(size_t(std::max(c.dim, c.hidden_dim)));
  acc_.resize(size_t(std::max(c.dim, c.hidden_dim)));
}

void Int8Transformer::layer_matmul(int layer, LayerMatmul m, const float* in, float* out) {
  const QuantizedMatmul& q = matmul(layer, m);
  quantize(in, q.cols, q.in, xq_.data());
  pool_.parallel_for(q.rows, 16, [&](int begin, int end) {
    matvec_int8_rows(q.w.data(), xq_.data(), acc_.data(), q.cols, begin, end);
    const edgetpu::Clamps clamps{q.clamp_lo, q.clamp_hi};
    for (int r = begin; r < end; ++r) {
      const int32_t acc = acc_[size_t(r)] - q.in.zero_point * q.w_rowsum[size_t(r)];
      const int32_t y = std::clamp(
          edgetpu::requantize(acc, q.multiplier[size_t(r)], clamps, q.out.zero_point), -128, 127);
      out[r] = static_cast<float>(y - q.out.zero_point) * q.out.scale;
    }
  });
}

}  // namespace tinycoral::llm
