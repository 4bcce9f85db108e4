// The two requantization arithmetics (host/rounding.h, host/quant_util.h) on hand-computed values,
// including the ties where TFLite (half away from zero) and the Edge TPU (half to even) differ.
#include <gtest/gtest.h>

#include "host/quant_util.h"
#include "host/rational.h"
#include "host/rounding.h"

namespace tinycoral::host {
namespace {

TEST(TfliteRounding, QuantizeMultiplier) {
  const auto q = quantize_multiplier(0.25);
  EXPECT_EQ(q.multiplier, 1 << 30);
  EXPECT_EQ(q.shift, -1);
  const auto one = quantize_multiplier(1.0);
  EXPECT_EQ(one.multiplier, 1 << 30);
  EXPECT_EQ(one.shift, 1);
  // 0.75 = 0.75 * 2^0: significand 0.75 * 2^31 = 1610612736.
  const auto t = quantize_multiplier(0.75);
  EXPECT_EQ(t.multiplier, 1610612736);
  EXPECT_EQ(t.shift, 0);
  // Below 2^-31 flushes to zero.
  EXPECT_EQ(quantize_multiplier(1e-12).multiplier, 0);
  EXPECT_EQ(quantize_multiplier(0.0).multiplier, 0);
}

TEST(TfliteRounding, HighMulAndShiftRoundHalfAwayFromZero) {
  // 10 * 0.25 = 2.5 -> 3; -10 * 0.25 = -2.5 -> -3; 6 * 0.25 = 1.5 -> 2.
  const auto q = quantize_multiplier(0.25);
  EXPECT_EQ(multiply_by_quantized_multiplier(10, q), 3);
  EXPECT_EQ(multiply_by_quantized_multiplier(-10, q), -3);
  EXPECT_EQ(multiply_by_quantized_multiplier(6, q), 2);
  // 9 * 0.25 = 2.25, yet TFLite gives 3: the high multiply rounds 4.5 up to 5 first (its multiplier
  // 2^30 is 0.5), then the shift rounds 2.5 up again. Double rounding is part of TFLite's result.
  EXPECT_EQ(multiply_by_quantized_multiplier(9, q), 3);
  EXPECT_EQ(multiply_by_quantized_multiplier(8, q), 2);
  EXPECT_EQ(saturating_rounding_doubling_high_mul(INT32_MIN, INT32_MIN), INT32_MAX);
  EXPECT_EQ(rounding_divide_by_pot(5, 1), 3);    // 2.5 -> 3
  EXPECT_EQ(rounding_divide_by_pot(-5, 1), -3);  // -2.5 -> -3
  EXPECT_EQ(rounding_divide_by_pot(-7, 2), -2);  // -1.75 -> -2
  // Multipliers above one shift left first: 3 * 1.5 = 4.5 -> 5.
  EXPECT_EQ(multiply_by_quantized_multiplier(3, quantize_multiplier(1.5)), 5);
}

TEST(EdgeTpuRounding, TiesToEvenWithFloatClamps) {
  const edgetpu::Clamps none;
  EXPECT_EQ(edgetpu::requantize(10, 0.25f, none, 0), 2);     // 2.5 -> 2
  EXPECT_EQ(edgetpu::requantize(14, 0.25f, none, 0), 4);     // 3.5 -> 4
  EXPECT_EQ(edgetpu::requantize(-10, 0.25f, none, 0), -2);   // -2.5 -> -2
  EXPECT_EQ(edgetpu::requantize(6, 0.25f, none, 100), 102);  // 1.5 -> 2, + zp
  // Float clamps relative to the zero point bound the result before rounding.
  const edgetpu::Clamps c{-3.0f, 4.2f};
  EXPECT_EQ(edgetpu::requantize(1000, 1.0f, c, 10), 14);
  EXPECT_EQ(edgetpu::requantize(-1000, 1.0f, c, 10), 7);
}

TEST(EdgeTpuRounding, ScalesRoundEachProductToFloat) {
  // f32(f32(s_x * s_w) * f32(1 / s_y)).
  const float sx = 0.1f, sw = 0.3f, sy = 0.7f;
  const float p = sx * sw;
  const float inv = 1.0f / sy;
  EXPECT_EQ(edgetpu::product_scale(sx, sw, sy), p * inv);
}

TEST(EdgeTpuRounding, OutputClampsFollowTheActivation) {
  // uint8, scale 0.5, zp 10: storage [-5, 122.5]; RELU6 -> [0, 6] -> [0, 12] steps.
  const auto c =
      edgetpu_clamps(container::Activation::kRelu6, 0.5f, 10, container::TensorType::kUInt8);
  EXPECT_FLOAT_EQ(c.lo, 0.0f);
  EXPECT_FLOAT_EQ(c.hi, 12.0f);
  const auto n =
      edgetpu_clamps(container::Activation::kNone, 0.5f, 10, container::TensorType::kUInt8);
  EXPECT_FLOAT_EQ(n.lo, -10.0f);
  EXPECT_FLOAT_EQ(n.hi, 245.0f);
}

TEST(TfliteRounding, ActivationRange) {
  // RELU6 with scale 0.05, zp 3: [3, 3 + 120] = [3, 123].
  const QRange r =
      activation_range(container::Activation::kRelu6, 0.05f, 3, container::TensorType::kUInt8);
  EXPECT_EQ(r.min, 3);
  EXPECT_EQ(r.max, 123);
  const QRange i8 =
      activation_range(container::Activation::kRelu, 0.1f, -128, container::TensorType::kInt8);
  EXPECT_EQ(i8.min, -128);
  EXPECT_EQ(i8.max, 127);
}

TEST(EdgeTpuAddWeights, ExamplesFromTheIsaReference) {
  // isa.md 2.1.4: r = 0.3 -> (10, 3); pi/10 -> (226, 71); 1.001 -> (20999, 21020).
  EXPECT_EQ(edgetpu_add_weights(1.0f, 0.3f), (std::pair<int32_t, int32_t>{10, 3}));
  EXPECT_EQ(edgetpu_add_weights(1.0f, 0.31415927f), (std::pair<int32_t, int32_t>{226, 71}));
  EXPECT_EQ(edgetpu_add_weights(1.0f, 1.001f), (std::pair<int32_t, int32_t>{20999, 21020}));
  EXPECT_EQ(edgetpu_add_weights(0.5f, 0.5f), (std::pair<int32_t, int32_t>{1, 1}));
  EXPECT_EQ(limit_denominator(1, 3, 100), (std::pair<int64_t, int64_t>{1, 3}));
  EXPECT_EQ(limit_denominator(314159265, 100000000, 10), (std::pair<int64_t, int64_t>{22, 7}));
}

}  // namespace
}  // namespace tinycoral::host
