// RELU and RELU6 on uint8/int8 tensors (the float forms are float_activation.cpp's).
// tflite mode: TFLite's QuantizedReluX: x - z_in times the quantized multiplier s_in/s_out, +
// z_out, clamped to the activation's quantized bounds (zp + round(6 / s) for RELU6) and the storage
// range. edgetpu mode: the chip's requantize op (isa.md 2.1.5): f32(x - z_in) times f32(s_in *
// inv(s_out)), the activation's float32 clamps, ties to even, + z_out, saturated.
#include <algorithm>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

// The constants of one RELU/RELU6, computed when the kernel is made.
struct ReluPlan {
  Rounding mode = Rounding::kTflite;
  int32_t zi = 0, zo = 0;
  QRange range, storage;
  QuantizedMultiplier m;
  float mult = 1.0f;
  edgetpu::Clamps clamps;
};

template <typename T>
void relu(const ReluPlan& p, OpContext& run) {
  const T* src = run.inputs[0].as<T>();
  T* dst = run.outputs[0].mutable_as<T>();
  const int64_t n = run.inputs[0].elements();
  for (int64_t i = 0; i < n; ++i) {
    const int32_t x = int32_t{src[i]} - p.zi;
    int32_t v;
    if (p.mode == Rounding::kTflite)
      v = std::clamp(multiply_by_quantized_multiplier(x, p.m) + p.zo, p.range.min, p.range.max);
    else
      v = std::clamp(edgetpu::requantize(x, p.mult, p.clamps, p.zo), p.storage.min, p.storage.max);
    dst[i] = static_cast<T>(v);
  }
}

std::unique_ptr<Kernel> make_relu(const OpContext& ctx, container::Activation act) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!is_q8(in.type())) return nullptr;
  require_same_q8(ctx, {&in, &out});
  ctx.require(in.elements() == out.elements(), "input and output sizes differ");
  ctx.require(!in.per_channel() && !out.per_channel(), "per-channel RELU is not supported");
  ReluPlan p;
  p.mode = ctx.rounding;
  p.zi = in.zero_point();
  p.zo = out.zero_point();
  p.range = activation_range(act, out.scale(), p.zo, out.type());
  p.storage = storage_range(out.type());
  p.m = quantize_multiplier(static_cast<double>(in.scale()) / static_cast<double>(out.scale()));
  p.mult = edgetpu::ratio_scale(in.scale(), out.scale());
  p.clamps = edgetpu_clamps(act, out.scale(), p.zo, out.type());
  if (in.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { relu<uint8_t>(p, c); });
  return make_kernel([p](OpContext& c) { relu<int8_t>(p, c); });
}

}  // namespace

void register_quantized_relu(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kRelu, [](const OpContext& ctx) {
    return make_relu(ctx, container::Activation::kRelu);
  });
  registry.add_builtin(container::BuiltinOp::kRelu6, [](const OpContext& ctx) {
    return make_relu(ctx, container::Activation::kRelu6);
  });
}

}  // namespace tinycoral::host
