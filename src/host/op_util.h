// Small shape and type helpers shared by the operator files in src/host/ops/.
#pragma once

#include <cstdint>

#include "container/tflite_model.h"
#include "host/kernel.h"
#include "host/quant_util.h"

namespace tinycoral::host {

struct Shape4 {
  int n = 1, h = 1, w = 1, c = 1;
  int64_t elements() const { return int64_t{n} * h * w * c; }
};

// The NHWC shape of a rank-4 tensor; throws naming the operator otherwise.
Shape4 shape4(const OpContext& ctx, const TensorView& t);

// TFLite's output size and leading padding for one spatial dimension.
struct PaddedDim {
  int out = 0;
  int pad = 0;  // before; the remainder goes after
};
PaddedDim padded_dim(container::Padding padding, int in, int filter, int stride, int dilation);

// True for uint8/int8 (the quantized activation types the kernels support).
inline bool is_q8(container::TensorType t) {
  return t == container::TensorType::kUInt8 || t == container::TensorType::kInt8;
}

// Requires every listed tensor to have the same type as the first and to be quantized.
void require_same_q8(const OpContext& ctx, std::initializer_list<const TensorView*> tensors);

// Shapes equal?
bool same_shape(const TensorView& a, const TensorView& b);

}  // namespace tinycoral::host
