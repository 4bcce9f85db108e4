// Quantization helpers shared by the host kernels: activation ranges (tflite mode), output clamps
// (edgetpu mode), effective scales, and OutputStage, which turns an int32 accumulator into an
// output integer in either rounding mode.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "container/tflite_model.h"
#include "host/kernel.h"
#include "host/rounding.h"

namespace tinycoral::host {

// Storage range of a quantized type: uint8 0..255, int8 -128..127, int16, int32.
struct QRange {
  int32_t min = 0, max = 255;
};
QRange storage_range(container::TensorType type);  // throws for non-integer types

// TFLite's CalculateActivationRangeQuantized: the activation's bounds quantized with
// zp + round_half_away(f / scale) (float32 division), intersected with the storage range.
QRange activation_range(container::Activation act, float scale, int32_t zero_point,
                        container::TensorType type);

// The Edge TPU output clamps (isa.md 2.1.4 out_clamps): storage bounds dequantized in float32,
// intersected with the activation, divided back by f32 multiply with inv(scale). Relative to zp.
edgetpu::Clamps edgetpu_clamps(container::Activation act, float scale, int32_t zero_point,
                               container::TensorType type);

// TFLite's effective multiplier of a MAC op: double(s_in) * double(s_w) / double(s_out).
inline double tflite_product_scale(float s_in, float s_w, float s_out) {
  return static_cast<double>(s_in) * static_cast<double>(s_w) / static_cast<double>(s_out);
}

// Per-channel requantization constants in both modes.
struct ChannelScale {
  QuantizedMultiplier q;  // tflite
  float mult = 0.0f;      // edgetpu
};

// Requantizes an accumulator (bias already added) in the context's rounding mode.
struct OutputStage {
  Rounding mode = Rounding::kTflite;
  int32_t zero_point = 0;
  QRange act;              // tflite: activation range in output integers
  QRange storage;          // final saturation
  edgetpu::Clamps clamps;  // edgetpu: float clamps relative to zero_point

  int32_t apply(int32_t acc, const ChannelScale& c) const {
    int32_t v;
    if (mode == Rounding::kTflite) {
      v = multiply_by_quantized_multiplier(acc, c.q) + zero_point;
      v = std::clamp(v, act.min, act.max);
    } else {
      v = edgetpu::requantize(acc, c.mult, clamps, zero_point);
      v = std::clamp(v, storage.min, storage.max);
    }
    return v;
  }
};

// The OutputStage of a tensor with an optional fused activation.
OutputStage make_output_stage(Rounding mode, const TensorView& output, container::Activation act);

// Per-channel scales of a MAC op (conv/dwconv/fc) whose weights are quantized per tensor or along
// `channels` output channels. Throws when the weight quantization does not fit.
std::vector<ChannelScale> mac_channel_scales(const OpContext& ctx, const TensorView& input,
                                             const TensorView& weights, const TensorView& output,
                                             int channels);

// Saturating narrow to the storage type.
template <typename T>
inline T saturate(int32_t v) {
  return static_cast<T>(
      std::clamp<int32_t>(v, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
}

}  // namespace tinycoral::host
