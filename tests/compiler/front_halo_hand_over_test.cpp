// Correct by simulation: PoseNet's front stages of several layers, whose bands nearly line up,
// handing over only halo rows (write_in_place, docs/compiler.md "Halo-only hand-overs between
// PoseNet's front stages"). The chain is PoseNet's layers 4-12 on the 89 x 121 map: a 48 -> 96
// pointwise layer; a 3x3 depthwise layer and a 96 -> 96 pointwise one (a stage in 3 rounds); the
// stride-2 depthwise layer and a 96 -> 192 pointwise one; a 3x3 depthwise layer and a 192 -> 192
// pointwise one, each stage on 15 tiles in row bands; then layers 11-12 (so that the stage of
// layers 9-10 is not the last, which always sends its output to the host).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_conv_twin.h"
#include "support/conv_twin.h"
#include "support/hand_overs.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// The stage in rounds writes its rows straight into the stride-2 stage's image, over its own first
// image (Stage::over_input), so that the hand-over between them is the 14 rows at the band
// boundaries (each tile's band reads one row of the next tile's), one transfer each; before, 15
// tiles sent their whole 5- and 6-row bands (29 producers). The stride-2 stage writes into the
// next one's image, which lies over the output handed into it and is filled after that hand-over
// (Stage::fill_late): 28 halo rows, 43 producers without it. Every output byte equals the CPU
// reference on two inferences; a halo row written one row too low makes the output differ.
TEST(FrontHaloHandOverOnTheVirtualEdgeTpu, OnlyTheHaloRowsCrossTheRing) {
  std::mt19937 random(20261206);
  const int h = 89, w = 121, cin = 48;
  auto pointwise = [](int cout) {
    return ConvSpec{cout, 1, 1, true, true, true, Activation::kNone};
  };
  const ConvSpec dw = twins::depthwise(3, 1), dw2 = twins::depthwise(3, 2);
  const std::vector<ConvSpec> specs{pointwise(96),  dw,  pointwise(96), dw2, pointwise(192), dw,
                                    pointwise(192), dw2, pointwise(384)};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  // (One zero point for the images between the layers, as PoseNet's ReLU6 outputs have: the
  // stride-2 layer's image lies over the image before it and keeps its padding columns.)
  const testing::CompiledConvTwin c(h, w, cin, specs, random,
                                    testing::inner_zero_point(specs.size(), -100));
  ASSERT_TRUE(c.on_the_chip());
  std::vector<isa::Instruction> program =
      isa::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  // The hand-overs from a pointwise layer of 96 input channels (24 reduction words: loop0 23) into
  // a depthwise layer (9 taps: loop0 8) that cross the ring (the rounds' own steps cross nothing):
  // from the stage in rounds into the stride-2 layer, then from the 96 -> 192 layer into the next.
  std::vector<testing::HandOver> hand_overs;
  for (const testing::HandOver& h : testing::hand_overs(program, 23, 8))
    if (h.producers > 0) hand_overs.push_back(h);
  ASSERT_EQ(hand_overs.size(), 2u);
  EXPECT_EQ(hand_overs[0].producers, 14) << "only the rows at the 14 band boundaries";
  EXPECT_EQ(hand_overs[1].producers, 28)
      << "the halo rows each way (43 with the image where it did not fit, whole bands)";
  c.expect_two_inferences_equal(random);

  // The same program with the first halo row's receive moved a row down (123 padded pixels of
  // 96 channels): the row it should have filled keeps the zero point, its neighbour is overwritten.
  ASSERT_FALSE(hand_overs.empty());
  isa::Instruction& receive = program[hand_overs.front().receives.front()];
  receive.set("n.addr", receive.value("n.addr") + 123 * 96 / 4);
  testing::expect_edited_program_differs(c.compiled, c.twin, program, c.input_bytes, random);
}

}  // namespace
}  // namespace tinycoral::compiler
