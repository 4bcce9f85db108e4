// QUANTIZE (float32 -> uint8/int8, or requantization between uint8/int8 scales) and DEQUANTIZE
// (uint8/int8 -> float32).
// QUANTIZE float: round_half_away(x / s) + z, saturated (TFLite's AffineQuantize, float32
// division). QUANTIZE 8-bit -> 8-bit: tflite mode = TFLite's Requantize (x - z_in times the
// quantized multiplier s_in/s_out, + z_out, saturated); edgetpu mode = f32 scale f32(s_in *
// inv(s_out)), f32 clamps, ties to even (isa.md 2.1.4 QUANTIZE row). DEQUANTIZE: f32(double(s) * (x
// - z)) as TFLite computes it.
#include <cmath>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

using container::TensorType;

template <typename In, typename Out>
void requantize_all(const TensorView& in, const TensorView& out, Rounding mode,
                    QuantizedMultiplier m, float mult, const edgetpu::Clamps& clamps) {
  const In* src = in.as<In>();
  Out* dst = out.mutable_as<Out>();
  const int32_t zi = in.zero_point(), zo = out.zero_point();
  const int32_t lo = std::numeric_limits<Out>::min(), hi = std::numeric_limits<Out>::max();
  const int64_t n = in.elements();
  for (int64_t i = 0; i < n; ++i) {
    int32_t v;
    if (mode == Rounding::kTflite)
      v = multiply_by_quantized_multiplier(int32_t{src[i]} - zi, m) + zo;
    else
      v = edgetpu::requantize(int32_t{src[i]} - zi, mult, clamps, zo);
    dst[i] = static_cast<Out>(std::clamp(v, lo, hi));
  }
}

template <typename Out>
void quantize_float(const TensorView& in, const TensorView& out) {
  const float* src = in.as<float>();
  Out* dst = out.mutable_as<Out>();
  const float s = out.scale();
  const int32_t z = out.zero_point();
  const int64_t n = in.elements();
  for (int64_t i = 0; i < n; ++i) {
    float r = std::round(src[i] / s);
    r = std::clamp(r, -2147483520.0f, 2147483520.0f);  // NaN-free bound for the cast
    if (std::isnan(r)) r = 0;
    const int64_t v = static_cast<int64_t>(r) + z;
    dst[i] = static_cast<Out>(
        std::clamp<int64_t>(v, std::numeric_limits<Out>::min(), std::numeric_limits<Out>::max()));
  }
}

template <typename In>
void dequantize(const TensorView& in, const TensorView& out) {
  const In* src = in.as<In>();
  float* dst = out.mutable_as<float>();
  const double s = in.scale();
  const int32_t z = in.zero_point();
  const int64_t n = in.elements();
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(s * (int32_t{src[i]} - z));
}

std::unique_ptr<Kernel> make_quantize(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  ctx.require(in.elements() == out.elements(), "input and output sizes differ");
  ctx.require(is_q8(out.type()) && out.quantized() && out.scale() > 0,
              "output must be quantized uint8/int8");
  ctx.require(!out.per_channel(), "per-channel quantization of activations is not supported");
  if (in.type() == TensorType::kFloat32) {
    if (out.type() == TensorType::kUInt8)
      return make_kernel([](OpContext& c) { quantize_float<uint8_t>(c.input(0), c.outputs[0]); });
    return make_kernel([](OpContext& c) { quantize_float<int8_t>(c.input(0), c.outputs[0]); });
  }
  if (!is_q8(in.type())) return nullptr;
  ctx.require(in.quantized() && in.scale() > 0, "input must be quantized");
  const QuantizedMultiplier m =
      quantize_multiplier(static_cast<double>(in.scale()) / static_cast<double>(out.scale()));
  const float mult = edgetpu::ratio_scale(in.scale(), out.scale());
  const edgetpu::Clamps clamps =
      edgetpu_clamps(container::Activation::kNone, out.scale(), out.zero_point(), out.type());
  const Rounding mode = ctx.rounding;
  const bool u8_in = in.type() == TensorType::kUInt8, u8_out = out.type() == TensorType::kUInt8;
  return make_kernel([=](OpContext& c) {
    const TensorView &i = c.input(0), &o = c.outputs[0];
    if (u8_in && u8_out) requantize_all<uint8_t, uint8_t>(i, o, mode, m, mult, clamps);
    if (u8_in && !u8_out) requantize_all<uint8_t, int8_t>(i, o, mode, m, mult, clamps);
    if (!u8_in && u8_out) requantize_all<int8_t, uint8_t>(i, o, mode, m, mult, clamps);
    if (!u8_in && !u8_out) requantize_all<int8_t, int8_t>(i, o, mode, m, mult, clamps);
  });
}

std::unique_ptr<Kernel> make_dequantize(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!is_q8(in.type())) return nullptr;
  ctx.require(out.type() == TensorType::kFloat32, "output must be float32");
  ctx.require(in.elements() == out.elements(), "input and output sizes differ");
  ctx.require(!in.per_channel(), "per-channel dequantization is not supported");
  if (in.type() == TensorType::kUInt8)
    return make_kernel([](OpContext& c) { dequantize<uint8_t>(c.input(0), c.outputs[0]); });
  return make_kernel([](OpContext& c) { dequantize<int8_t>(c.input(0), c.outputs[0]); });
}

}  // namespace

void register_quantize(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kQuantize, make_quantize);
  registry.add_builtin(container::BuiltinOp::kDequantize, make_dequantize);
}

}  // namespace tinycoral::host
