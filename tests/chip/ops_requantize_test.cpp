// The output stage: float32 multiply, float32 clamps, round half to even, + zero point
// (isa.md 2.1.4).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

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

// The 4-wide output stage equals the scalar one byte for byte: random accumulators (and exact
// ties: accumulators that are multiples of 2 with mult 0.25 land on .5), multipliers and clamps,
// with the SIMD path where requantize4_fast allows it (infinite and huge clamps included) and the
// scalar path for NaN / infinite multipliers and NaN clamps.
TEST(Requantize, FourWideEqualsScalar) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> any(INT32_MIN, INT32_MAX);
  std::uniform_int_distribution<int32_t> small(-3000, 3000);
  std::uniform_real_distribution<float> mult(-0.05f, 0.05f), clamp(-300.0f, 300.0f);
  const float odd[] = {std::nanf(""), kInf, -kInf, 1e30f, 0.25f};
  int fast = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    OutputStage stage;
    stage.mult = trial % 7 == 0 ? 0.25f : mult(rng);
    stage.clamp_min = clamp(rng);
    stage.clamp_max = trial % 11 == 0 ? stage.clamp_min - 1 : clamp(rng);  // crossed clamps too
    stage.out_zp = static_cast<uint8_t>(trial % 256);
    if (trial % 13 == 0) stage.mult = odd[trial % 5];
    if (trial % 17 == 0) stage.clamp_max = odd[(trial / 17) % 5];
    if (trial % 19 == 0) stage.clamp_min = -odd[(trial / 19) % 5];
    int32_t acc[4];
    for (auto& a : acc)
      a = trial % 3 == 0 ? any(rng) : trial % 7 == 0 ? 2 * small(rng) : small(rng);
    uint8_t got[4];
    requantize4(acc, stage, requantize4_fast(stage), got);
    fast += requantize4_fast(stage);
    for (int b = 0; b < 4; ++b)
      ASSERT_EQ(got[b], requantize(acc[b], stage))
          << "trial " << trial << " acc " << acc[b] << " mult " << stage.mult;
  }
  EXPECT_GT(fast, 10000);
}

}  // namespace
}  // namespace tinycoral::chip::ops
