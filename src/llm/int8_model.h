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
// Storing bytes as uint8 with every zero point + 128 (the chip's view) gives the same integers.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

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

// Observed float ranges of every layer matmul's input and output.
struct Calibration {
  struct Range {
    float lo = 0, hi = 0;
  };
  std::vector<std::array<Range, kLayerMatmuls>> in, out;  // [layer][matmul]
  int positions = 0;
};
// Runs the float model greedily from BOS for `positions` positions (at most seq_len) and records
// the ranges.
Calibration calibrate(const Checkpoint& ck, ThreadPool& pool, int positions);
QuantizedMatmul quantize_matmul(const MatrixRef& w, Calibration::Range in, Calibration::Range out);

class Int8Transformer : public Transformer {
 public:
  Int8Transformer(const Checkpoint& ck, ThreadPool& pool, const Calibration& calibration);
  const QuantizedMatmul& matmul(int layer, LayerMatmul m) const {
    return mats_[size_t(layer) * kLayerMatmuls + size_t(m)];
  }

 protected:
  void layer_matmul(int layer, LayerMatmul m, const float* in, float* out) override;

 private:
  std::vector<QuantizedMatmul> mats_;
  std::vector<int8_t> xq_;
  std::vector<int32_t> acc_;
};

}  // namespace tinycoral::llm
