// LOGISTIC and TANH, quantized uint8/int8, through a 256-entry table as TFLite's default kernel
// builds it: for every input byte v, f(f32(s_in * (v - z_in))) is divided by the output scale
// (multiplied by f32(1 / s_out)), rounded half away from zero, offset by z_out and saturated.
// The chip evaluates LOGISTIC with a spline (isa.md 2.1.4) we do not model yet, so both rounding
// modes use this table.
#include <cmath>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

template <typename T>
std::vector<uint8_t> build_table(const TensorView& in, const TensorView& out, float (*f)(float)) {
  std::vector<uint8_t> table(256);
  const float inv = 1.0f / out.scale();
  const int32_t lo = std::numeric_limits<T>::min(), hi = std::numeric_limits<T>::max();
  for (int32_t v = lo; v <= hi; ++v) {
    const float x = in.scale() * static_cast<float>(v - in.zero_point());
    const float r = std::round(f(x) * inv);
    const auto q = static_cast<int32_t>(r + static_cast<float>(out.zero_point()));
    table[static_cast<uint8_t>(static_cast<T>(v))] =
        static_cast<uint8_t>(static_cast<T>(std::clamp(q, lo, hi)));
  }
  return table;
}

float logistic(float x) { return 1.0f / (1.0f + std::exp(-x)); }
float tanh_f(float x) { return std::tanh(x); }

std::unique_ptr<Kernel> make_lut(const OpContext& ctx, float (*f)(float)) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!is_q8(in.type())) return nullptr;
  require_same_q8(ctx, {&in, &out});
  ctx.require(in.elements() == out.elements(), "input and output sizes differ");
  std::vector<uint8_t> table = in.type() == container::TensorType::kUInt8
                                   ? build_table<uint8_t>(in, out, f)
                                   : build_table<int8_t>(in, out, f);
  return make_kernel([table](OpContext& c) {
    const uint8_t* src = c.input(0).data;
    uint8_t* dst = c.outputs[0].data;
    for (size_t i = 0; i < c.outputs[0].bytes; ++i) dst[i] = table[src[i]];
  });
}

}  // namespace

void register_lut_activation(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kLogistic,
                       [](const OpContext& c) { return make_lut(c, logistic); });
  registry.add_builtin(container::BuiltinOp::kTanh,
                       [](const OpContext& c) { return make_lut(c, tanh_f); });
}

}  // namespace tinycoral::host
