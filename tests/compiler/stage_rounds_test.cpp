// Correct by simulation: a stage whose images do not fit a tile at once computes each tile's band
// in rounds (Plan::rounds: PoseNet's 177 x 241 x 48 map). A 1x1 conv to 192 channels on a 128 x 128
// image writes 3 MB, all of the 16 tiles' narrow memory, so the chain compiles only with its first
// stage in rounds; the program equals the CPU reference in every byte on two inferences.
#include <gtest/gtest.h>

#include <random>

#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

TEST(StageRoundsOnTheVirtualEdgeTpu, MapsBeyondNarrowMemoryEqualTheCpuReference) {
  std::mt19937 random(2411);
  ConvSpec expand{192, 1, 1, true, true, true, Activation::kRelu6};
  ConvSpec dw{0, 3, 2, true, true, true, Activation::kRelu6};
  dw.depthwise = true;
  const ConvSpec project{16, 1, 1, true, true, true, Activation::kNone};
  const int h = 128, w = 128, cin = 16;
  const std::vector<ConvSpec> specs = {expand, dw, project};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

// MobileNet v2's residual block on the same map (DeepLab's 129 x 129 x 72 blocks at 513 x 513): the
// ADD's operand is the stage's first image, which stays whole through the rounds; each round's ADD
// reads its rows there.
TEST(StageRoundsOnTheVirtualEdgeTpu, ResidualBlocksInRoundsEqualTheCpuReference) {
  std::mt19937 random(2417);
  ConvSpec expand{192, 1, 1, true, true, true, Activation::kRelu6};
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kRelu6};
  dw.depthwise = true;
  const ConvSpec project{16, 1, 1, true, true, true, Activation::kNone};
  ConvSpec add;
  add.residual_from = 0;
  const int h = 128, w = 128, cin = 16;
  const std::vector<ConvSpec> specs = {expand, dw, project, add};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
