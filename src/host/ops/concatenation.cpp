// CONCATENATION along any axis, any element type. Quantized inputs whose scale or zero point differ
// from the output's are requantized as TFLite does: round(x * f32(s_in / s_out) + bias) in float32
// (bias = -z_in * that scale), ties away from zero, plus z_out, saturated.
#include <cmath>
#include <cstring>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

struct ConcatInput {
  int64_t chunk = 0;  // elements per outer index
  bool rescale = false;
  float scale = 1.0f, bias = 0.0f;
};

struct ConcatPlan {
  int64_t outer = 1;
  size_t elem = 1;
  std::vector<ConcatInput> inputs;
  QRange range;
  int32_t zo = 0;
};

template <typename T>
void copy_rescaled(const ConcatInput& in, const ConcatPlan& p, const T* src, T* dst) {
  for (int64_t j = 0; j < in.chunk; ++j) {
    const float v = static_cast<float>(src[j]) * in.scale + in.bias;
    const int32_t q = static_cast<int32_t>(std::round(v)) + p.zo;
    dst[j] = static_cast<T>(std::clamp(q, p.range.min, p.range.max));
  }
}

void run_concat(const ConcatPlan& p, OpContext& ctx) {
  uint8_t* out = ctx.outputs[0].data;
  for (int64_t o = 0; o < p.outer; ++o)
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      const ConcatInput& in = p.inputs[i];
      const uint8_t* src = ctx.inputs[i].data + static_cast<size_t>(o * in.chunk) * p.elem;
      if (!in.rescale) {
        std::memcpy(out, src, static_cast<size_t>(in.chunk) * p.elem);
      } else if (ctx.outputs[0].type() == container::TensorType::kUInt8) {
        copy_rescaled<uint8_t>(in, p, src, out);
      } else {
        copy_rescaled<int8_t>(in, p, reinterpret_cast<const int8_t*>(src),
                              reinterpret_cast<int8_t*>(out));
      }
      out += static_cast<size_t>(in.chunk) * p.elem;
    }
}

std::unique_ptr<Kernel> make_concatenation(const OpContext& ctx) {
  ctx.require(ctx.num_inputs() >= 1, "expects at least one input");
  ctx.require_outputs(1);
  const TensorView& out = ctx.output(0);
  const auto o = ctx.options_or<container::ConcatenationOptions>();
  ctx.require(o.activation == container::Activation::kNone, "fused activations are not supported");
  const int rank = out.rank();
  const int axis = o.axis < 0 ? o.axis + rank : o.axis;
  ctx.require(axis >= 0 && axis < rank, cat("axis ", o.axis, " out of range for rank ", rank));
  ConcatPlan p;
  p.elem = container::tensor_type_size(out.type());
  for (int d = 0; d < axis; ++d) p.outer *= out.dim(d);
  int64_t inner = 1;
  for (int d = axis + 1; d < rank; ++d) inner *= out.dim(d);
  int64_t total = 0;
  const bool q8 = is_q8(out.type());
  if (q8) {
    p.range = storage_range(out.type());
    p.zo = out.zero_point();
  }
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const TensorView& in = ctx.input(i);
    ctx.require(in.type() == out.type(), "input and output types differ");
    ctx.require(in.rank() == rank, cat("input ", i, " has rank ", in.rank(), ", output ", rank));
    for (int d = 0; d < rank; ++d)
      if (d != axis)
        ctx.require(in.dim(d) == out.dim(d),
                    cat("input ", i, " differs from the output off the axis"));
    ConcatInput ci;
    ci.chunk = int64_t{in.dim(axis)} * inner;
    total += in.dim(axis);
    if (q8 && in.quantized() && out.quantized() &&
        (in.scale() != out.scale() || in.zero_point() != out.zero_point())) {
      ci.rescale = true;
      ci.scale = in.scale() * (1.0f / out.scale());
      ci.bias = static_cast<float>(-in.zero_point()) * ci.scale;
    }
    p.inputs.push_back(ci);
  }
  ctx.require(total == out.dim(axis), "input sizes along the axis do not add up to the output");
  return make_kernel([p](OpContext& c) { run_concat(p, c); });
}

}  // namespace

void register_concatenation(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kConcatenation, make_concatenation);
}

}  // namespace tinycoral::host
