// ADD, SUB and MUL, quantized uint8/int8, with NumPy-style broadcasting up to rank 6.
// tflite mode: TFLite's integer schemes (ADD/SUB: both inputs shifted left by 20 bits and rescaled
// to twice the larger input scale, summed, rescaled to the output; SUB negates input 2's multiplier
// as TFLite's general 8-bit path does; MUL: one multiplier s1*s2/s_out on the product).
// edgetpu mode (isa.md 2.1.4): ADD/SUB compute w1*a + w2*b - (w1*z1 + w2*z2) with small integer
// weights approximating s2/s1, then f32 scale f32(f32(s1/w1) * inv(s_y)); MUL computes
// (a - za)(b - zb) scaled by f32(f32(sa*sb) * inv(sy)); both clamp in float32 and round ties to
// even. SUB on the chip is taken as ADD with a negated second weight (by analogy, unverified).
#include <array>
#include <cmath>

#include "host/op_util.h"
#include "host/rational.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

enum class BinaryKind { kAdd, kSub, kMul };

constexpr int kMaxBroadcastRank = 6;

// Strides (in elements) of an input seen through the output's shape (0 along broadcast dims).
struct Broadcast {
  std::array<int32_t, kMaxBroadcastRank> out{};
  std::array<int64_t, kMaxBroadcastRank> s1{}, s2{};
};

Broadcast make_broadcast(const OpContext& ctx, const TensorView& a, const TensorView& b,
                         const TensorView& out) {
  ctx.require(out.rank() <= kMaxBroadcastRank,
              cat("rank above ", kMaxBroadcastRank, " is not supported"));
  ctx.require(a.rank() <= out.rank() && b.rank() <= out.rank(),
              "inputs have a higher rank than the output");
  Broadcast bc;
  auto fill = [&](const TensorView& t, std::array<int64_t, kMaxBroadcastRank>& strides) {
    int64_t stride = 1;
    for (int i = kMaxBroadcastRank - 1; i >= 0; --i) {
      const int from_end = kMaxBroadcastRank - 1 - i;
      const int32_t od = from_end < out.rank() ? out.dim(out.rank() - 1 - from_end) : 1;
      const int32_t td = from_end < t.rank() ? t.dim(t.rank() - 1 - from_end) : 1;
      ctx.require(td == od || td == 1,
                  cat("shape of '", t.name(), "' does not broadcast to the output"));
      strides[static_cast<size_t>(i)] = td == 1 ? 0 : stride;
      stride *= td;
    }
  };
  for (int i = 0; i < kMaxBroadcastRank; ++i) {
    const int from_end = kMaxBroadcastRank - 1 - i;
    bc.out[static_cast<size_t>(i)] = from_end < out.rank() ? out.dim(out.rank() - 1 - from_end) : 1;
  }
  fill(a, bc.s1);
  fill(b, bc.s2);
  // The output must be exactly the broadcast of the inputs.
  for (int i = 0; i < kMaxBroadcastRank; ++i) {
    const int from_end = kMaxBroadcastRank - 1 - i;
    const int32_t ad = from_end < a.rank() ? a.dim(a.rank() - 1 - from_end) : 1;
    const int32_t bd = from_end < b.rank() ? b.dim(b.rank() - 1 - from_end) : 1;
    ctx.require(
        bc.out[static_cast<size_t>(i)] == std::max(ad, bd) || bc.out[static_cast<size_t>(i)] == 0,
        "output shape is not the broadcast of the input shapes");
  }
  return bc;
}

struct BinaryPlan {
  BinaryKind kind = BinaryKind::kAdd;
  Rounding mode = Rounding::kTflite;
  Broadcast bc;
  int32_t z1 = 0, z2 = 0, zo = 0;
  QRange act, storage;
  // tflite
  QuantizedMultiplier m1, m2, mo;
  int left_shift = 20;
  // edgetpu
  int32_t w1 = 1, w2 = 1, offset = 0;
  float mult = 1.0f;
  edgetpu::Clamps clamps;
};

template <typename T>
int32_t combine(const BinaryPlan& p, int32_t a, int32_t b) {
  if (p.mode == Rounding::kTflite) {
    if (p.kind == BinaryKind::kMul) {
      const int32_t v = multiply_by_quantized_multiplier((a - p.z1) * (b - p.z2), p.mo) + p.zo;
      return std::clamp(v, p.act.min, p.act.max);
    }
    const int32_t sa = multiply_by_quantized_multiplier_smaller_than_one(
        shift_left_wrapping(a - p.z1, p.left_shift), p.m1);
    const int32_t sb = multiply_by_quantized_multiplier_smaller_than_one(
        shift_left_wrapping(b - p.z2, p.left_shift), p.m2);
    const int32_t v = multiply_by_quantized_multiplier_smaller_than_one(sa + sb, p.mo) + p.zo;
    return std::clamp(v, p.act.min, p.act.max);
  }
  const int32_t acc =
      p.kind == BinaryKind::kMul ? (a - p.z1) * (b - p.z2) : p.w1 * a + p.w2 * b + p.offset;
  return std::clamp(edgetpu::requantize(acc, p.mult, p.clamps, p.zo), p.storage.min, p.storage.max);
}

template <typename T>
void run_binary(const BinaryPlan& p, OpContext& ctx) {
  const T* a = ctx.input(0).as<T>();
  const T* b = ctx.input(1).as<T>();
  T* out = ctx.outputs[0].mutable_as<T>();
  const auto& d = p.bc.out;
  size_t o = 0;
  for (int32_t i0 = 0; i0 < d[0]; ++i0)
    for (int32_t i1 = 0; i1 < d[1]; ++i1)
      for (int32_t i2 = 0; i2 < d[2]; ++i2)
        for (int32_t i3 = 0; i3 < d[3]; ++i3)
          for (int32_t i4 = 0; i4 < d[4]; ++i4) {
            const int64_t base1 = i0 * p.bc.s1[0] + i1 * p.bc.s1[1] + i2 * p.bc.s1[2] +
                                  i3 * p.bc.s1[3] + i4 * p.bc.s1[4];
            const int64_t base2 = i0 * p.bc.s2[0] + i1 * p.bc.s2[1] + i2 * p.bc.s2[2] +
                                  i3 * p.bc.s2[3] + i4 * p.bc.s2[4];
            for (int32_t i5 = 0; i5 < d[5]; ++i5, ++o)
              out[o] = static_cast<T>(
                  combine<T>(p, a[base1 + i5 * p.bc.s1[5]], b[base2 + i5 * p.bc.s2[5]]));
          }
}

std::unique_ptr<Kernel> make_binary(const OpContext& ctx, BinaryKind kind) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& out = ctx.output(0);
  if (!is_q8(a.type())) return nullptr;
  require_same_q8(ctx, {&a, &b, &out});
  const auto o = ctx.options_or<container::ActivationOptions>();
  BinaryPlan p;
  p.kind = kind;
  p.mode = ctx.rounding;
  p.bc = make_broadcast(ctx, a, b, out);
  p.z1 = a.zero_point();
  p.z2 = b.zero_point();
  p.zo = out.zero_point();
  p.act = activation_range(o.activation, out.scale(), p.zo, out.type());
  p.storage = storage_range(out.type());
  p.clamps = edgetpu_clamps(o.activation, out.scale(), p.zo, out.type());
  const float s1 = a.scale(), s2 = b.scale(), so = out.scale();
  if (kind == BinaryKind::kMul) {
    p.mo = quantize_multiplier(static_cast<double>(s1) * static_cast<double>(s2) /
                               static_cast<double>(so));
    p.mult = edgetpu::product_scale(s1, s2, so);
  } else {
    const double twice_max = 2.0 * static_cast<double>(std::max(s1, s2));
    p.m1 = quantize_multiplier(static_cast<double>(s1) / twice_max);
    p.m2 = quantize_multiplier(static_cast<double>(s2) / twice_max);
    p.mo = quantize_multiplier(twice_max /
                               (static_cast<double>(1 << p.left_shift) * static_cast<double>(so)));
    ctx.require(p.m1.shift <= 0 && p.m2.shift <= 0 && p.mo.shift <= 0,
                "input/output scales too far apart for the 8-bit ADD scheme");
    if (kind == BinaryKind::kSub) p.m2.multiplier = -p.m2.multiplier;
    const auto [w1, w2] = edgetpu_add_weights(s1, s2);
    ctx.require(w1 > 0, "input scales too far apart for the Edge TPU ADD weights");
    p.w1 = w1;
    p.w2 = kind == BinaryKind::kSub ? -w2 : w2;
    p.offset = -(p.w1 * p.z1 + p.w2 * p.z2);
    p.mult = (s1 / static_cast<float>(w1)) * edgetpu::inverse(so);
  }
  if (a.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { run_binary<uint8_t>(p, c); });
  return make_kernel([p](OpContext& c) { run_binary<int8_t>(p, c); });
}

}  // namespace

void register_elementwise_binary(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kAdd,
                       [](const OpContext& c) { return make_binary(c, BinaryKind::kAdd); });
  registry.add_builtin(container::BuiltinOp::kSub,
                       [](const OpContext& c) { return make_binary(c, BinaryKind::kSub); });
  registry.add_builtin(container::BuiltinOp::kMul,
                       [](const OpContext& c) { return make_binary(c, BinaryKind::kMul); });
}

}  // namespace tinycoral::host
