// Correct by simulation: residual ADDs inside a CONV_2D chain (MobileNet v2's inverted residual
// blocks: expand 1x1 -> depthwise 3x3 -> project 1x1 -> ADD with the block's input), compiled as
// one program whose kept images stay in tile memory, run on the virtual Edge TPU and compared with
// the CPU reference in `edgetpu` rounding: every output byte equal, on two inferences.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "compiler/compile.h"
#include "container/tflite_writer.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using testing::CompiledTwin;
using testing::edgetpu_reference;
using testing::random_bytes;
using testing::reference_output;
using testing::same_bytes;
using twins::conv_twin;
using twins::ConvSpec;

ConvSpec conv(int cout, int k, int stride = 1, Activation act = Activation::kRelu6) {
  ConvSpec s;
  s.cout = cout;
  s.k = k;
  s.stride = stride;
  s.act = act;
  return s;
}
ConvSpec depthwise(Activation act = Activation::kRelu6) {
  ConvSpec s = conv(0, 3, 1, act);
  s.depthwise = true;
  return s;
}
ConvSpec residual(int from, bool add_first = true, Activation act = Activation::kNone) {
  ConvSpec s;
  s.residual_from = from;
  s.add_first = add_first;
  s.act = act;
  return s;
}

// Returns the number of tiles the output comes from.
size_t expect_equal_to_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                           std::mt19937& random) {
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = conv_twin(h, w, cin, specs, random);
  const CompiledTwin compiled(twin);
  EXPECT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  if (compiled.result.edgetpu_subgraphs != 1) return 0;
  host::Interpreter cpu = edgetpu_reference(twin);
  const std::vector<uint8_t> x = random_bytes(static_cast<size_t>(h) * w * cin, random);
  const std::vector<uint8_t> want = reference_output(cpu, x);
  size_t saturated = 0;
  for (uint8_t v : want) saturated += v == 0 || v == 255;
  EXPECT_LT(saturated * 4, want.size()) << "the test's output quantization saturates";
  // (Sums of RELU6 blocks spread less than a conv's outputs: 16 distinct bytes at least.)
  EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
            std::min<size_t>(want.size() / 4, 16));

  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  for (int inference = 0; inference < 2; ++inference)
    EXPECT_TRUE(same_bytes(compiled.infer(chip, {{"x", x}}), want)) << "inference " << inference;
  EXPECT_EQ(chip.fault(), "");
  const auto& ymap = compiled.exes.execution->output_layers.at(0)
                         .output_layout->y_coordinate_to_linear_tile_id_map;
  return std::set<int>(ymap.begin(), ymap.end()).size();
}

TEST(ResidualChainOnTheVirtualEdgeTpu, InvertedResidualBlocksEqualTheCpuReference) {
  std::mt19937 random(20261204);
  const Activation none = Activation::kNone;
  // One block after a stem conv, on one tile and on several (row bands with halos, as many as
  // the placement's time model picks).
  const std::vector<ConvSpec> block = {conv(16, 3), conv(64, 1), depthwise(), conv(16, 1, 1, none),
                                       residual(1)};
  expect_equal_to_cpu(8, 8, 4, block, random);
  EXPECT_GT(expect_equal_to_cpu(32, 32, 4, block, random), 1u);
  // Two blocks in a row: the first ADD's output is the second's kept operand.
  expect_equal_to_cpu(
      16, 16, 8,
      {conv(24, 3, 2), conv(48, 1), depthwise(), conv(24, 1, 1, none), residual(1, false),
       conv(48, 1), depthwise(), conv(24, 1, 1, none), residual(5)},
      random);
  // The chain's own input is the kept operand; a fused RELU on the ADD.
  expect_equal_to_cpu(16, 16, 16,
                      {conv(32, 1), conv(16, 3, 1, none), residual(0, true, Activation::kRelu)},
                      random);
}

// A miniature MobileNet v2 in one program: the stem, five inverted residual blocks (three with
// their residual ADD), the last 1x1 conv, the global average pool and a 1001-way 1x1 classifier.
TEST(ResidualChainOnTheVirtualEdgeTpu, MiniatureMobileNetV2EqualsTheCpuReference) {
  std::mt19937 random(12);
  const Activation none = Activation::kNone;
  ConvSpec pool;
  pool.pool = true;
  pool.same = false;
  pool.k = 4;
  ConvSpec classifier = conv(1001, 1, 1, none);
  ConvSpec dw2 = depthwise();
  dw2.stride = 2;
  const std::vector<ConvSpec> specs = {conv(16, 3, 2),  // 0: 16 -> 8x8x16
                                       depthwise(),
                                       conv(8, 1, 1, none),  // 1-2: block 1 (t = 1)
                                       conv(48, 1),
                                       depthwise(),
                                       conv(8, 1, 1, none),
                                       residual(3),  // 3-6: 8x8x8 + ADD
                                       conv(48, 1),
                                       dw2,
                                       conv(16, 1, 1, none),  // 7-9: stride 2 -> 4x4x16
                                       conv(64, 1),
                                       depthwise(),
                                       conv(16, 1, 1, none),
                                       residual(10),  // 10-13
                                       conv(64, 1),
                                       depthwise(),
                                       conv(16, 1, 1, none),
                                       residual(14),  // 14-17
                                       conv(128, 1),  // 18
                                       pool,
                                       classifier};
  EXPECT_EQ(expect_equal_to_cpu(16, 16, 3, specs, random), 1u);
}

// MobileNet v2's layers of 96, 144 and 160 channels: groups of 64 and a partial last group.
TEST(ResidualChainOnTheVirtualEdgeTpu, ChannelsPastWholeGroupsEqualTheCpuReference) {
  std::mt19937 random(77);
  const Activation none = Activation::kNone;
  expect_equal_to_cpu(8, 8, 8, {conv(96, 1), depthwise(), conv(24, 1, 1, none)}, random);
  expect_equal_to_cpu(8, 8, 24, {conv(144, 1), depthwise(), conv(24, 1, 1, none), residual(0)},
                      random);
  expect_equal_to_cpu(16, 16, 16, {conv(160, 1), depthwise(), conv(100, 1, 1, none)}, random);
  expect_equal_to_cpu(6, 6, 32, {conv(68, 3), conv(8, 1, 1, none)}, random);
}

// ResNet's basic block: the operand is the input of a 3x3 SAME conv (a padded image), so the ADD's
// own image takes the operand's row pitch and interior column.
TEST(ResidualChainOnTheVirtualEdgeTpu, ResNetBasicBlocksEqualTheCpuReference) {
  std::mt19937 random(3);
  const Activation none = Activation::kNone, relu = Activation::kRelu;
  expect_equal_to_cpu(
      8, 8, 8,
      {conv(16, 3, 1, relu), conv(16, 3, 1, relu), conv(16, 3, 1, none), residual(1, true, relu)},
      random);
  EXPECT_GT(expect_equal_to_cpu(
                24, 24, 4,
                {conv(16, 3, 1, relu), conv(16, 3, 1, relu), conv(16, 3, 1, none),
                 residual(1, false, relu), conv(16, 3, 1, relu), conv(16, 3, 1, none), residual(4)},
                random),
            1u);  // in row bands over several tiles (as many as the time model picks)
  expect_equal_to_cpu(12, 12, 12, {conv(12, 5, 1, relu), conv(12, 5, 1, none), residual(0)},
                      random);
}

// Inverted residual blocks whose parameters exceed one tile's wide memory (a 960-channel depthwise
// layer: 2,160 weight rows against 1,920), on small random maps: the placement must cut the block
// into stages - the expansion and the depthwise layer split by output groups over 15 (or 9) tiles,
// the projection and the ADD after them - and the ADD's other operand reaches its tiles with the
// hand-over into the block's first stage. Nothing may be streamed (which needs those cuts), and
// every byte equals the CPU reference.
TEST(ResidualChainOnTheVirtualEdgeTpu, BlocksBeyondOneWideMemoryAreSplitOverTiles) {
  std::mt19937 random(20261206);
  const Activation none = Activation::kNone;
  for (int n = 0; n < 4; ++n) {
    const int side = 5 + static_cast<int>(random() % 4);
    const int cin = 8 * (1 + static_cast<int>(random() % 3));
    const int c = 16 + 8 * static_cast<int>(random() % 4);
    std::vector<ConvSpec> specs{conv(c, 3)};
    const int blocks = 1 + static_cast<int>(random() % 2);
    for (int b = 0; b < blocks; ++b) {
      const int from = static_cast<int>(specs.size());
      const int expand = b == 0 || random() % 2 == 0 ? 960 : 576;
      specs.push_back(conv(expand, 1));
      specs.push_back(depthwise());
      specs.push_back(conv(c, 1, 1, none));
      specs.push_back(residual(from, random() % 2 == 0,
                               random() % 4 == 0 ? Activation::kRelu : Activation::kNone));
    }
    // (A last 1x1 conv, as in MobileNet v2: sums over 960 channels leave the ADDs' outputs few
    // distinct values in the twin's quantization, which would not show a wrong byte well.)
    specs.push_back(conv(64, 1, 1, none));
    SCOPED_TRACE(twins::describe(side, side, cin, specs));
    std::mt19937 same = random;  // expect_equal_to_cpu builds the same twin
    const CompiledTwin compiled(conv_twin(side, side, cin, specs, same));
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    ASSERT_NE(compiled.exes.execution, nullptr);
    EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u)
        << "parameters streamed: no block was cut";
    expect_equal_to_cpu(side, side, cin, specs, random);
  }
}

// A projection whose channels end inside a 64-channel group (MobileNet v2's 160 and 96) and whose
// rows exceed one wide memory is split by output groups, its last slice holding only the channels
// left (32 of 160 or of 96), and the ADD after it is a stage of its own that receives every
// slice at its channel offset: every byte equal to the CPU reference.
TEST(ResidualChainOnTheVirtualEdgeTpu, ProjectionsEndingInsideAGroupAreSplitBeforeTheirAdd) {
  std::mt19937 random(20261205);
  const Activation none = Activation::kNone;
  for (const auto& [c, expand] : {std::pair{160, 4096}, std::pair{96, 3072}}) {
    const int side = 4 + static_cast<int>(random() % 3);
    const std::vector<ConvSpec> specs{conv(c, 3), conv(expand, 1), conv(c, 1, 1, none),
                                      residual(1, random() % 2 == 0), conv(64, 1, 1, none)};
    SCOPED_TRACE(twins::describe(side, side, 8, specs));
    std::mt19937 same = random;  // expect_equal_to_cpu builds the same twin
    const CompiledTwin compiled(conv_twin(side, side, 8, specs, same));
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    ASSERT_NE(compiled.exes.execution, nullptr);
    // (The projection's rows, expand / 4 per group, exceed one wide memory: resident only split.)
    EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u) << "parameters streamed: not split";
    expect_equal_to_cpu(side, side, 8, specs, random);
  }
}

// MobileNet v2's 7x7 block (960 -> depthwise -> 160 + ADD) with a layer after it: the projection
// split by output groups, the ADD a stage without parameters between stages with them.
TEST(ResidualChainOnTheVirtualEdgeTpu, AnAddStageBetweenSplitLayersKeepsEveryParameterResident) {
  std::mt19937 random(20261207);
  const Activation none = Activation::kNone;
  const std::vector<ConvSpec> specs{
      conv(160, 3), conv(960, 1), depthwise(),           conv(160, 1, 1, none), residual(1),
      conv(960, 1), depthwise(),  conv(320, 1, 1, none), conv(64, 1, 1, none)};
  std::mt19937 same = random;
  const CompiledTwin compiled(conv_twin(7, 7, 8, specs, same));
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u) << "parameters streamed";
  expect_equal_to_cpu(7, 7, 8, specs, random);
}

// Three nested residual spans would need three kept images at once (two regions take turns): the
// model stays on the CPU and the log says why.
TEST(ResidualChainOnTheVirtualEdgeTpu, NestedSpansBeyondTwoKeptImagesStayOnTheCpuWithTheReason) {
  std::mt19937 random(5);
  const Activation none = Activation::kNone;
  const container::Model twin = conv_twin(8, 8, 8,
                                          {conv(8, 1), conv(8, 1), conv(8, 1), conv(8, 1, 1, none),
                                           residual(2), residual(1), residual(0)},
                                          random);
  const CompileResult r = compile_model(container::write_tflite(twin));
  EXPECT_EQ(r.edgetpu_subgraphs, 0);
  bool said = false;
  for (const auto& row : r.rows) said |= row.status.find("spans overlap") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace tinycoral::compiler
