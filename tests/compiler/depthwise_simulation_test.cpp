// Correct by simulation: DEPTHWISE_CONV_2D layers of the gabor family (one input channel, depth
// multiplier C, SAME, stride 1 or 2) of random sizes and quantizations, alone or followed by an
// AVERAGE_POOL_2D or MAX_POOL_2D (windows 2, 4, 8), compiled by our compiler and run on the virtual
// Edge TPU: every output byte equals the CPU reference in `edgetpu` rounding, on a first and a
// second inference (parameters resident). The larger sweep is bench/depthwise_sweep_bench.cpp.
#include <gtest/gtest.h>

#include "support/depthwise_twin.h"

namespace tinycoral::compiler {
namespace {

using testing::check_on_chip;
using testing::DepthwiseShape;
using testing::describe;

void expect_equal_to_cpu(const DepthwiseShape& s, std::mt19937& random) {
  SCOPED_TRACE(describe(s));
  const testing::ChipCheck r = check_on_chip(s, random);
  ASSERT_EQ(r.refused, "");
  // The quantization spreads the outputs: an all-saturated result would make equality cheap.
  ASSERT_LT(r.saturated * 4, r.bytes) << "the test's output quantization saturates";
  ASSERT_GT(r.distinct, std::min<size_t>(r.bytes / 4, 24));
  EXPECT_EQ(r.differ[0], 0u) << "of " << r.bytes << " bytes (first inference)";
  EXPECT_EQ(r.differ[1], 0u) << "of " << r.bytes << " bytes (second inference)";
  EXPECT_EQ(r.fault, "");
}

TEST(DepthwiseOnTheVirtualEdgeTpu, GaborSizesWithRandomQuantizationsEqualTheCpuReference) {
  std::mt19937 random(20261204);
  expect_equal_to_cpu({64, 64, 7, 8, 0}, random);
  expect_equal_to_cpu({64, 64, 7, 8, 4}, random);
}

// Sizes chosen to reach the edges of the family: the smallest blocks (2 rows), the widest rows
// (256 bytes, one staging slot), rows of tiles whose image bytes are not whole 256-byte packets
// (16x16: 64 bytes), k from 3 to 11, 4 to 16 channels, blocks that are not square.
TEST(DepthwiseOnTheVirtualEdgeTpu, EdgeSizesEqualTheCpuReference) {
  std::mt19937 random(5);
  const DepthwiseShape shapes[] = {
      {64, 64, 3, 8, 0},       {64, 64, 11, 16, 0},      {32, 64, 7, 12, 0},
      {16, 64, 3, 4, 0},       {64, 16, 3, 4, 0},        {8, 128, 3, 8, 0},
      {16, 256, 3, 8, 0},      {96, 96, 5, 8, 0},        {64, 48, 3, 8, 0},
      {64, 64, 3, 8, 4},       {32, 256, 5, 4, 4},       {64, 64, 9, 12, 4},
      {128, 64, 5, 16, 4},     {64, 64, 7, 8, 2},        {64, 128, 3, 8, 8},
      {64, 64, 7, 8, 4, true}, {32, 64, 5, 12, 2, true}, {64, 128, 3, 4, 8, true},
      {16, 16, 7, 8, 0},       {8, 64, 3, 8, 0},         {48, 48, 5, 12, 0},
      {32, 16, 3, 4, 2},       {16, 512, 5, 8, 0},       {16, 320, 3, 4, 4},
      {128, 128, 7, 8, 0},     {128, 128, 7, 8, 4},      {128, 128, 3, 16, 2, true},
      {256, 128, 7, 8, 8}};  // (gabor's layers at the hold-out's 128 x 128, larger pooled blocks)
  for (const DepthwiseShape& s : shapes) expect_equal_to_cpu(s, random);
}

// A fused RELU (which must clip: some outputs sit at the zero point) and int8 boundaries (no
// QUANTIZE: SIGNED_FIXED_POINT8 layers whose top bit the host flips).
TEST(DepthwiseOnTheVirtualEdgeTpu, ReluAndInt8BoundariesEqualTheCpuReference) {
  std::mt19937 random(9);
  const DepthwiseShape shapes[] = {{64, 64, 5, 8, 0, false, container::Activation::kRelu},
                                   {32, 64, 3, 12, 4, true, container::Activation::kRelu},
                                   {64, 64, 7, 8, 0, false, container::Activation::kNone, true},
                                   {64, 64, 3, 16, 2, false, container::Activation::kRelu, true}};
  for (const DepthwiseShape& s : shapes) {
    SCOPED_TRACE(describe(s));
    const testing::ChipCheck r = check_on_chip(s, random);
    ASSERT_EQ(r.refused, "");
    if (s.act == container::Activation::kRelu) {
      EXPECT_GT(r.at_zero_point, 0u);  // the bound is hit
    }
    ASSERT_GT(r.distinct, 24u);
    EXPECT_EQ(r.differ[0], 0u) << "of " << r.bytes << " bytes (first inference)";
    EXPECT_EQ(r.differ[1], 0u) << "of " << r.bytes << " bytes (second inference)";
    EXPECT_EQ(r.fault, "");
  }
}

// Channels with their own weight scales: the multipliers travel as an aux packet before the zero
// points and reach the output stage through a mode-2 load (pc_mult).
TEST(DepthwiseOnTheVirtualEdgeTpu, PerChannelScalesEqualTheCpuReference) {
  std::mt19937 random(21);
  const DepthwiseShape shapes[] = {
      {64, 64, 7, 8, 0, false, container::Activation::kNone, false, true},
      {32, 64, 3, 16, 0, false, container::Activation::kNone, false, true},
      {64, 64, 5, 4, 4, false, container::Activation::kNone, false, true},
      {64, 128, 3, 12, 2, true, container::Activation::kRelu, true, true}};
  for (const DepthwiseShape& s : shapes) expect_equal_to_cpu(s, random);
}

// A non-zero bias: an aux packet of int32 before the zero points, loaded as the bias plane (word
// 0x40; with per-channel scales the second of two planes), and cfg4.
TEST(DepthwiseOnTheVirtualEdgeTpu, BiasEqualsTheCpuReference) {
  std::mt19937 random(23);
  const DepthwiseShape shapes[] = {
      {64, 64, 7, 8, 0, false, container::Activation::kNone, false, false, true},
      {32, 64, 5, 16, 4, false, container::Activation::kNone, false, false, true},
      {64, 64, 3, 8, 0, false, container::Activation::kNone, false, true, true},
      {64, 128, 5, 12, 2, true, container::Activation::kRelu, true, true, true}};
  for (const DepthwiseShape& s : shapes) expect_equal_to_cpu(s, random);
}

// Stride 2 (SAME): the window starts pad - pad_before into the grid (TFLite puts (k - 2) / 2 of
// the padding before even images), positions step 2 words and 2 grid rows.
TEST(DepthwiseOnTheVirtualEdgeTpu, StrideTwoEqualsTheCpuReference) {
  std::mt19937 random(25);
  using container::Activation;
  const DepthwiseShape shapes[] = {
      {64, 64, 3, 8, 0, false, Activation::kNone, false, false, false, 2},
      {64, 128, 5, 12, 0, false, Activation::kNone, false, true, true, 2},
      {32, 64, 7, 4, 0, false, Activation::kRelu, true, false, true, 2},
      {64, 64, 9, 16, 2, true, Activation::kNone, false, true, false, 2},
      {64, 128, 3, 8, 4, false, Activation::kNone, false, false, true, 2}};
  for (const DepthwiseShape& s : shapes) expect_equal_to_cpu(s, random);
}

TEST(DepthwiseOnTheVirtualEdgeTpu, RandomShapesEqualTheCpuReference) {
  std::mt19937 random(1204);
  for (int i = 0; i < 10; ++i)
    expect_equal_to_cpu(testing::random_depthwise_shape(random, 64), random);
}

// Outside the family the layer stays on the CPU with the reason in the log.
TEST(DepthwiseOnTheVirtualEdgeTpu, UncoveredShapesStayOnTheCpuWithTheReason) {
  std::mt19937 random(3);
  const testing::ChipCheck narrow = check_on_chip({64, 40, 3, 8, 0}, random);
  EXPECT_NE(narrow.refused.find("width of 16"), std::string::npos) << narrow.refused;
  const testing::ChipCheck big_pool = check_on_chip({256, 256, 3, 4, 4}, random);
  EXPECT_NE(big_pool.refused.find("does not fit"), std::string::npos) << big_pool.refused;
  const testing::ChipCheck pool3 = check_on_chip({64, 64, 3, 8, 3}, random);
  EXPECT_NE(pool3.refused.find("pool windows of 2 to 8"), std::string::npos) << pool3.refused;
  const testing::ChipCheck odd_units = check_on_chip({32, 96, 5, 12, 8}, random);
  EXPECT_NE(odd_units.refused.find("8-byte output units"), std::string::npos) << odd_units.refused;
  const testing::ChipCheck even_k = check_on_chip({64, 64, 4, 8, 0}, random);
  EXPECT_NE(even_k.refused.find("odd"), std::string::npos) << even_k.refused;
}

}  // namespace
}  // namespace tinycoral::compiler
