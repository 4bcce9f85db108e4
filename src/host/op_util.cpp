// Shape and type helpers for the operator kernels (op_util.h).
#include "host/op_util.h"

#include <algorithm>
#include <cstdint>
#include <limits>

namespace tinycoral::host {

Shape4 shape4(const OpContext& ctx, const TensorView& t) {
  ctx.require(t.rank() == 4, cat("tensor '", t.name(), "' must have rank 4, has ", t.rank()));
  return {t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
}

PaddedDim padded_dim(container::Padding padding, int in, int filter, int stride, int dilation) {
  if (stride <= 0 || dilation <= 0 || filter <= 0)
    fail("stride, dilation and filter size must be positive");
  // In 64 bits: a model's dilation and stride may be anything up to 2^31 - 1.
  const int64_t effective = int64_t{filter - 1} * dilation + 1;
  if (effective > std::numeric_limits<int>::max())
    fail("filter size ", filter, " with dilation ", dilation, " spans more than 2^31 elements");
  const int64_t out = padding == container::Padding::kSame
                          ? (int64_t{in} + stride - 1) / stride
                          : (int64_t{in} - effective + stride) / stride;
  const int64_t total = (out - 1) * stride + effective - in;
  if (total / 2 > std::numeric_limits<int>::max())
    fail("padding of ", total / 2, " elements (stride ", stride, ") is out of range");
  PaddedDim d;
  d.out = static_cast<int>(out);
  d.pad = static_cast<int>(std::max<int64_t>(total / 2, 0));
  return d;
}

void require_same_q8(const OpContext& ctx, std::initializer_list<const TensorView*> tensors) {
  const TensorView* first = *tensors.begin();
  for (const TensorView* t : tensors) {
    ctx.require(is_q8(t->type()),
                cat("tensor '", t->name(), "' has type ", container::tensor_type_name(t->type()),
                    "; quantized uint8/int8 expected"));
    ctx.require(t->type() == first->type(), "input and output types differ");
    ctx.require(t->quantized() && t->scale() > 0,
                cat("tensor '", t->name(), "' has no (positive) quantization scale"));
  }
}

bool same_shape(const TensorView& a, const TensorView& b) { return a.shape() == b.shape(); }

}  // namespace tinycoral::host
