// Shared pieces of the float32 kernels (float_*.cpp): TFLite's fused-activation clamps.
#pragma once

#include <algorithm>
#include <limits>

#include "container/tflite_model.h"
#include "host/kernel.h"

namespace tinycoral::host {

struct FloatRange {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  float apply(float v) const { return std::min(std::max(v, lo), hi); }
};

// TFLite's CalculateActivationRange for float; fused TANH/SIGN_BIT are not fused activations the
// float kernels accept.
inline FloatRange float_activation(const OpContext& ctx, container::Activation act) {
  switch (act) {
    case container::Activation::kNone:
      return {};
    case container::Activation::kRelu:
      return {0.0f, std::numeric_limits<float>::infinity()};
    case container::Activation::kReluN1To1:
      return {-1.0f, 1.0f};
    case container::Activation::kRelu6:
      return {0.0f, 6.0f};
    default:
      fail(ctx.op_name, ": unsupported fused activation ", static_cast<int>(act));
  }
}

inline bool all_float(std::initializer_list<const TensorView*> tensors) {
  for (const TensorView* t : tensors)
    if (t->present() && t->type() != container::TensorType::kFloat32) return false;
  return true;
}

}  // namespace tinycoral::host
