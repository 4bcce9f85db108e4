// ARG_MAX as TFLite's reference kernel: along one axis, the index of the largest element, the first
// one on ties (comparisons on the stored values: quantized values order like their real values
// since scales are positive). Output int32 or int64.
#include <cstring>

#include "host/kernel.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

using container::TensorType;

template <typename T, typename Index>
void arg_max(const T* in, Index* out, int64_t outer, int64_t axis, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const T* p = in + o * axis * inner + i;
      T best = p[0];
      Index best_index = 0;
      for (int64_t a = 1; a < axis; ++a) {
        if (p[a * inner] > best) {
          best = p[a * inner];
          best_index = static_cast<Index>(a);
        }
      }
      out[o * inner + i] = best_index;
    }
  }
}

template <typename T>
std::unique_ptr<Kernel> typed(int64_t outer, int64_t axis, int64_t inner, bool int64_out) {
  if (int64_out) {
    return make_kernel([=](OpContext& c) {
      arg_max(c.inputs[0].as<T>(), c.outputs[0].mutable_as<int64_t>(), outer, axis, inner);
    });
  }
  return make_kernel([=](OpContext& c) {
    arg_max(c.inputs[0].as<T>(), c.outputs[0].mutable_as<int32_t>(), outer, axis, inner);
  });
}

std::unique_ptr<Kernel> make_arg_max(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& axis_tensor = ctx.input(1);
  const TensorView& out = ctx.output(0);
  ctx.require(axis_tensor.constant && axis_tensor.data != nullptr && axis_tensor.elements() == 1,
              "the axis must be a constant scalar");
  int64_t axis = 0;
  if (axis_tensor.type() == TensorType::kInt32) {
    axis = *axis_tensor.as<int32_t>();
  } else if (axis_tensor.type() == TensorType::kInt64) {
    int64_t v;
    std::memcpy(&v, axis_tensor.data, sizeof v);
    axis = v;
  } else {
    fail(ctx.op_name, ": the axis must be int32 or int64");
  }
  const int rank = in.rank();
  ctx.require(rank >= 1, "input must have at least one dimension");
  if (axis < 0) axis += rank;
  ctx.require(axis >= 0 && axis < rank, cat("axis ", axis, " is out of range for rank ", rank));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in.dim(d);
  for (int d = static_cast<int>(axis) + 1; d < rank; ++d) inner *= in.dim(d);
  const int64_t size = in.dim(static_cast<int>(axis));
  ctx.require(size > 0, "the reduced axis is empty");
  ctx.require(out.elements() == outer * inner,
              "output size does not match the input without the axis");
  const bool int64_out = out.type() == TensorType::kInt64;
  ctx.require(int64_out || out.type() == TensorType::kInt32, "output must be int32 or int64");
  switch (in.type()) {
    case TensorType::kFloat32:
      return typed<float>(outer, size, inner, int64_out);
    case TensorType::kUInt8:
      return typed<uint8_t>(outer, size, inner, int64_out);
    case TensorType::kInt8:
      return typed<int8_t>(outer, size, inner, int64_out);
    case TensorType::kInt16:
      return typed<int16_t>(outer, size, inner, int64_out);
    case TensorType::kInt32:
      return typed<int32_t>(outer, size, inner, int64_out);
    default:
      fail(ctx.op_name, ": unsupported input type ", container::tensor_type_name(in.type()));
  }
}

}  // namespace

void register_arg_max(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kArgMax, &make_arg_max);
}

}  // namespace tinycoral::host
