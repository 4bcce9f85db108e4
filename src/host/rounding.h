// The two requantization arithmetics of the host kernels (docs/host.md):
//  - tflite: TFLite's reference integer scheme. A real multiplier M is stored as a Q31 int32 times
//  a
//    power of two; x*M is a saturating rounding doubling high multiply (round half away from zero)
//    followed by a rounding right shift (round half up in magnitude... exactly as TFLite's
//    RoundingDivideByPOT). Bit-exact with TFLite's CPU kernels.
//  - edgetpu: the chip's output stage (reference isa.md 2.1.4): the exact int32 accumulator is
//    converted to float32, multiplied by a float32 effective scale, clamped in float32, rounded
//    half to even, then the output zero point is added.
// Everything here is header-only and branch-light so kernels can inline it in their inner loops.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

namespace tinycoral::host {

// ---------------------------------------------------------------- tflite mode

// M = multiplier * 2^(shift - 31); multiplier in [2^30, 2^31) (or 0).
struct QuantizedMultiplier {
  int32_t multiplier = 0;
  int shift = 0;  // > 0: left shift, < 0: right shift
};

// TFLite's QuantizeMultiplier: frexp, round the Q31 significand half away from zero, renormalize
// 2^31 to 2^30 with shift+1, flush multipliers below 2^-31 to zero.
inline QuantizedMultiplier quantize_multiplier(double real) {
  if (real == 0.0) return {};
  int shift = 0;
  const double q = std::frexp(real, &shift);
  int64_t fixed = static_cast<int64_t>(std::round(q * static_cast<double>(int64_t{1} << 31)));
  if (fixed == (int64_t{1} << 31)) {
    fixed /= 2;
    ++shift;
  }
  if (shift < -31) return {};
  return {static_cast<int32_t>(fixed), shift};
}

// gemmlowp's SaturatingRoundingDoublingHighMul: (a*b*2 + 2^31 rounding nudge) >> 32, saturating the
// single overflow case INT32_MIN*INT32_MIN.
inline int32_t saturating_rounding_doubling_high_mul(int32_t a, int32_t b) {
  if (a == b && a == std::numeric_limits<int32_t>::min())
    return std::numeric_limits<int32_t>::max();
  const int64_t ab = static_cast<int64_t>(a) * static_cast<int64_t>(b);
  const int64_t nudge = ab >= 0 ? (int64_t{1} << 30) : (1 - (int64_t{1} << 30));
  return static_cast<int32_t>((ab + nudge) / (int64_t{1} << 31));
}

// gemmlowp's RoundingDivideByPOT: x / 2^exponent rounded to nearest, ties away from zero.
inline int32_t rounding_divide_by_pot(int32_t x, int exponent) {
  const int32_t mask = static_cast<int32_t>((int64_t{1} << exponent) - 1);
  const int32_t remainder = x & mask;
  const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
  return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

// Wrapping int32 left shift (TFLite multiplies by 1 << shift in int32).
inline int32_t shift_left_wrapping(int32_t x, int shift) {
  return static_cast<int32_t>(static_cast<uint32_t>(x) << shift);
}

// TFLite's MultiplyByQuantizedMultiplier (the default double-rounding variant).
inline int32_t multiply_by_quantized_multiplier(int32_t x, QuantizedMultiplier m) {
  const int left = m.shift > 0 ? m.shift : 0;
  const int right = m.shift > 0 ? 0 : -m.shift;
  return rounding_divide_by_pot(
      saturating_rounding_doubling_high_mul(shift_left_wrapping(x, left), m.multiplier), right);
}

// TFLite's MultiplyByQuantizedMultiplierSmallerThanOneExp (shift <= 0).
inline int32_t multiply_by_quantized_multiplier_smaller_than_one(int32_t x, QuantizedMultiplier m) {
  return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, m.multiplier), -m.shift);
}

// TFLite's MultiplyByQuantizedMultiplierGreaterThanOne (shift >= 0).
inline int32_t multiply_by_quantized_multiplier_greater_than_one(int32_t x, QuantizedMultiplier m) {
  return saturating_rounding_doubling_high_mul(shift_left_wrapping(x, m.shift), m.multiplier);
}

// ---------------------------------------------------------------- edgetpu mode

namespace edgetpu {

// The compiler's reciprocal: f32(1 / f32(s)).
inline float inverse(float s) { return 1.0f / s; }

// Effective scale of FC/conv/MUL: f32(f32(s_x * s_w) * inv(s_y)), every product rounded to f32.
inline float product_scale(float s_x, float s_w, float s_y) {
  const volatile float p = s_x * s_w;  // volatile: no fused multiply-add, no extra precision
  return p * inverse(s_y);
}

// Effective scale of a rescale (RELU/QUANTIZE/SUM...): f32(s_in * inv(s_out)).
inline float ratio_scale(float s_in, float s_out) { return s_in * inverse(s_out); }

// The float32 clamps of the output stage, relative to the output zero point.
struct Clamps {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
};

// Rounds half to even (the chip's rounding; the default FP environment's rint).
inline float round_half_even(float y) { return std::nearbyint(y); }

// acc -> f32, * mult, clamp, round half to even, + zero point. The int result is then stored (the
// caller saturates to the storage type).
inline int32_t requantize(int32_t acc, float mult, const Clamps& c, int32_t out_zp) {
  float y = static_cast<float>(acc) * mult;
  y = y < c.lo ? c.lo : y;
  y = y > c.hi ? c.hi : y;
  // y is bounded by the clamps (finite for every requantizing op), so the cast is defined; the
  // explicit bound keeps it defined for the "no clamp" case too.
  y = round_half_even(y);
  if (!(y > -2147483520.0f)) y = -2147483520.0f;
  if (!(y < 2147483520.0f)) y = 2147483520.0f;
  return static_cast<int32_t>(y) + out_zp;
}

}  // namespace edgetpu

}  // namespace tinycoral::host
