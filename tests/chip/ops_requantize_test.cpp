// The output stage: float32 multiply, float32 clamps, round half to even, + zero point
// (isa.md 2.1.4).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "chip/ops/nlu.h"
#include "chip/ops/requantize.h"

namespace tinycoral::chip::ops {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(OpsRequantize, RoundsHalfToEven) {
  EXPECT_EQ(round_half_even(2.5f), 2.0f);
  EXPECT_EQ(round_half_even(3.5f), 4.0f);
  EXPECT_EQ(round_half_even(-2.5f), -2.0f);
  EXPECT_EQ(round_half_even(-3.5f), -4.0f);
  EXPECT_EQ(round_half_even(2.4999998f), 2.0f);
}

TEST(OpsRequantize, MultipliesInFloat32ThenClampsThenAddsZeroPoint) {
  const OutputStage stage{0.5f, -10.0f, 100.0f, 20};
  EXPECT_EQ(requantize(5, stage), 22);      // 2.5 -> 2 (tie to even), + 20
  EXPECT_EQ(requantize(7, stage), 24);      // 3.5 -> 4
  EXPECT_EQ(requantize(-100, stage), 10);   // -50 clamped to -10
  EXPECT_EQ(requantize(1000, stage), 120);  // 500 clamped to 100
}

TEST(OpsRequantize, ConvertsTheAccumulatorToFloat32First) {
  // 16777217 is not a float32: it becomes 16777216 before the multiply.
  const OutputStage stage{1.0f / 16777216.0f, -kInf, kInf, 0};
  EXPECT_EQ(requantize(16777217, stage), 1);
  // 0.5 tie after conversion: 8388608 * 2^-24 = 0.5 -> 0.
  EXPECT_EQ(requantize(8388608, stage), 0);
  EXPECT_EQ(requantize(3 * 8388608, stage), 2);  // 1.5 -> 2
}

TEST(OpsRequantize, SaturatesHandMadeConstantsToAByte) {
  const OutputStage stage{1.0f, -kInf, kInf, 128};
  EXPECT_EQ(requantize(1000, stage), 255);
  EXPECT_EQ(requantize(-1000, stage), 0);
}

TEST(OpsNlu, LogisticSplineTracksTheSigmoidWithin0p01Steps) {
  const NluTable t = logistic_table();
  for (float x = -10.3f; x <= 10.3f; x += 0.37f) {
    const double expected = 256.0 / (1.0 + std::exp(-double{x}));
    EXPECT_NEAR(evaluate_spline(t, x), expected, 0.01) << x;
  }
}

}  // namespace
}  // namespace tinycoral::chip::ops
