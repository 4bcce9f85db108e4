// L2_NORMALIZATION over the last dimension, as TFLite's reference kernels. float32: x / max(|x|,
// 1e-6). Quantized (output fixed at scale 1/128, zero point 128 for uint8 and 0 for int8): the sum
// of squared differences from the input zero point goes through gemmlowp's fixed-point inverse
// square root (5 Newton steps in Q3.28), then each difference is rescaled by it.
#include "host/ops/l2_normalization.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"
#include "host/rounding.h"

namespace tinycoral::host {

namespace {

// x * 2^E for int32 with saturation (E > 0) or rounding (E < 0), as gemmlowp.
template <int E>
int32_t mul_pot32(int32_t x) {
  if constexpr (E > 0) {
    constexpr int32_t threshold = (int32_t{1} << (31 - E)) - 1;
    if (x > threshold) return INT32_MAX;
    if (x < -threshold) return INT32_MIN;
    return static_cast<int32_t>(static_cast<uint32_t>(x) << E);
  } else {
    return rounding_divide_by_pot(x, -E);
  }
}

}  // namespace

// TFLite's GetInvSqrtQuantizedMultiplierExp with reverse_shift -1: 1 / sqrt(input) as a Q0.31
// multiplier and a (non-positive) shift.
QuantizedMultiplier inv_sqrt_multiplier(int32_t input) {
  if (input <= 1) return {INT32_MAX, 0};  // 0 and 1 as 1 (TFLite avoids the overflow this way)
  int shift = 11;
  while (input >= (1 << 29)) {
    input /= 4;
    ++shift;
  }
  const int max_left_shift_bits = std::countl_zero(static_cast<uint32_t>(input)) - 1;
  const int left_shift_bit_pairs = max_left_shift_bits / 2 - 1;
  shift -= left_shift_bit_pairs;
  input <<= 2 * left_shift_bit_pairs;
  // Newton-Raphson for 1/sqrt in Q3.28, starting at 1: x = 1.5 x - (input/2) x^3.
  const int32_t half_input = mul_pot32<-1>(input >> 1);
  const int32_t half_three = (1 << 28) + (1 << 27);
  int32_t x = 1 << 28;
  for (int i = 0; i < 5; ++i) {
    const int32_t x3 = mul_pot32<6>(saturating_rounding_doubling_high_mul(
        saturating_rounding_doubling_high_mul(x, x), x));  // Q9 -> Q3
    x = mul_pot32<3>(saturating_rounding_doubling_high_mul(half_three, x) -
                     saturating_rounding_doubling_high_mul(half_input, x3));  // Q6 -> Q3
  }
  x = saturating_rounding_doubling_high_mul(x, 1518500250);  // * sqrt(2)/2 in Q0.31
  if (shift < 0) {
    x = static_cast<int32_t>(static_cast<uint32_t>(x) << -shift);
    shift = 0;
  }
  return {x, -shift};
}

namespace {

std::unique_ptr<Kernel> make_l2_normalization(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(in.rank() >= 1 && in.shape() == out.shape(), "input and output shapes differ");
  const auto opts = ctx.options_or<container::ActivationOptions>();
  ctx.require(opts.activation == container::Activation::kNone,
              "fused activations are not supported");
  const int depth = in.dim(-1);
  ctx.require(depth > 0, "empty last dimension");
  const int64_t rows = in.elements() / depth;
  using container::TensorType;
  if (in.type() == TensorType::kFloat32) {
    return make_kernel([=](OpContext& c) {
      const float* x = c.inputs[0].as<float>();
      float* y = c.outputs[0].mutable_as<float>();
      for (int64_t r = 0; r < rows; ++r) {
        float sq = 0.0f;
        for (int i = 0; i < depth; ++i) sq += x[r * depth + i] * x[r * depth + i];
        const float norm = std::max(std::sqrt(sq), 1e-6f);
        for (int i = 0; i < depth; ++i) y[r * depth + i] = x[r * depth + i] / norm;
      }
    });
  }
  ctx.require(is_q8(in.type()), "unsupported tensor type");
  const bool u8 = in.type() == TensorType::kUInt8;
  ctx.require(out.scale() == 1.0f / 128.0f && out.zero_point() == (u8 ? 128 : 0),
              cat("output quantization must be (1/128, ", u8 ? 128 : 0, ")"));
  const int32_t zp = in.zero_point();
  return make_kernel([=](OpContext& c) {
    for (int64_t r = 0; r < rows; ++r) {
      auto value = [&](int i) -> int32_t {
        return u8 ? int32_t{c.inputs[0].as<uint8_t>()[r * depth + i]}
                  : int32_t{c.inputs[0].as<int8_t>()[r * depth + i]};
      };
      int32_t sq = 0;
      for (int i = 0; i < depth; ++i) sq += (value(i) - zp) * (value(i) - zp);
      const QuantizedMultiplier m = inv_sqrt_multiplier(sq);
      for (int i = 0; i < depth; ++i) {
        const int32_t d = value(i) - zp;
        if (u8) {
          const int32_t v = 128 + multiply_by_quantized_multiplier_smaller_than_one(128 * d, m);
          c.outputs[0].mutable_as<uint8_t>()[r * depth + i] =
              static_cast<uint8_t>(std::clamp(v, 0, 255));
        } else {
          const int32_t v = multiply_by_quantized_multiplier(d, {m.multiplier, m.shift + 7});
          c.outputs[0].mutable_as<int8_t>()[r * depth + i] =
              static_cast<int8_t>(std::clamp(v, -128, 127));
        }
      }
    }
  });
}

}  // namespace

void register_l2_normalization(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kL2Normalization, &make_l2_normalization);
}

}  // namespace tinycoral::host
