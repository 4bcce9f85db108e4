// The integer steps of the residual stream in int8 (int8_residual.h): v~ from wv's output stage,
// the attention's residual add, the FFN's RMSNorm as a diagonal FC, as the CPU int8 path runs them.
#include "llm/int8_residual.h"

#include <algorithm>
#include <cmath>

#include "host/rounding.h"
#include "llm/int8_rms.h"
#include "llm/kernels.h"

namespace tinycoral::llm {

namespace edgetpu = host::edgetpu;

std::vector<float> value_tilde_base(const QuantizedMatmul& wv, const std::vector<float>& v_scale) {
  std::vector<float> base;
  for (int j = 0; j < wv.rows; ++j)
    base.push_back(
        edgetpu::product_scale(wv.in.scale, wv.w_scale[size_t(j)], v_scale.at(size_t(j))));
  return base;
}

void value_tilde(const QuantizedMatmul& wv, const std::vector<float>& base, const int8_t* x,
                 float r, int8_t* v_tilde) {
  std::vector<int32_t> acc(size_t(wv.rows));
  matvec_int8_rows(wv.w.data(), x, acc.data(), wv.cols, 0, wv.rows);
  const edgetpu::Clamps clamps{-kSymmetricClamp, kSymmetricClamp};
  for (int j = 0; j < wv.rows; ++j) {
    const int32_t sum = acc[size_t(j)] - wv.in.zero_point * wv.w_rowsum[size_t(j)];
    v_tilde[j] = static_cast<int8_t>(
        edgetpu::requantize(sum, per_token_multiplier(base[size_t(j)], r), clamps, 0));
  }
}

QuantizedRmsInput quantize_rms_input(QParams x2, QParams out, const float* g, int dim) {
  QuantizedRmsInput q;
  q.in = x2;
  q.out = out;
  for (int j = 0; j < dim; ++j) {
    q.sign.push_back(static_cast<int8_t>(g[j] > 0 ? 1 : g[j] < 0 ? -1 : 0));
    q.base.push_back(edgetpu::product_scale(x2.scale, std::fabs(g[j]), out.scale));
  }
  output_clamps(out, q.lo, q.hi);
  q.mean_multiplier = rms_mean_multiplier(x2.scale, dim);
  return q;
}

float rms_input_scale(const QuantizedRmsInput& q, const int8_t* x2, int dim) {
  return scalar_core_rms_scale(sum_of_squares(x2, dim, q.in.zero_point), q.mean_multiplier);
}

void rms_input(const QuantizedRmsInput& q, const int8_t* x2, int dim, float r, int8_t* out) {
  const edgetpu::Clamps clamps{q.lo, q.hi};
  for (int j = 0; j < dim; ++j) {
    const int32_t acc = int32_t{q.sign[size_t(j)]} * (int32_t{x2[j]} - q.in.zero_point);
    out[j] = static_cast<int8_t>(
        std::clamp(edgetpu::requantize(acc, per_token_multiplier(q.base[size_t(j)], r), clamps,
                                       q.out.zero_point),
                   -128, 127));
  }
}

}  // namespace tinycoral::llm
