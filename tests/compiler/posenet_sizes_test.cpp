// Correct by simulation: a stage that ends on a layer with a partial last block of pixels (a first
// layer on 1-3 channels whose output row is not whole blocks: PoseNet's 3x3 stride-2 layer writes
// 2-pixel blocks, 321 pixels a row at 481 x 641). The hand-over carries the block's surplus pixel
// into the next image's right padding, which is refilled with the zero point before the next stage
// reads it (docs/compiler.md "A stage that ends on a partial last block; PoseNet at Google's other
// sizes"). Until then such a stage was refused and the image went in 4-byte pixels. Every output
// byte equals the CPU reference. The whole-channel PoseNet twins (still on the CPU):
// bench/posenet_sizes_bench.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "container/tflite_reader.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/heads_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;

// The custom op's input shape in the compiled file (the image as the host pads it).
std::vector<int32_t> sent_shape(const container::Model& compiled) {
  const container::Subgraph& g = compiled.subgraphs.at(0);
  return g.tensors.at(static_cast<size_t>(g.operators.back().inputs.at(0))).shape;
}

// Two inferences through the runtime's delegate: every byte of every output equal to the CPU
// reference's, each output spread over more than `values` values.
void expect_equal_to_cpu(const container::Model& twin, const container::Model& compiled,
                         size_t input_bytes, size_t values, std::mt19937& random) {
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  host::Interpreter tpu = testing::virtual_edgetpu_interpreter(compiled);
  ASSERT_EQ(tpu.num_outputs(), cpu.num_outputs());
  for (int inference = 0; inference < 2; ++inference) {
    const std::vector<uint8_t> x = testing::random_bytes(input_bytes, random);
    cpu.set_input(0, x);
    cpu.invoke();
    tpu.set_input(0, x);
    tpu.invoke();
    for (size_t o = 0; o < cpu.num_outputs(); ++o) {
      const auto want = cpu.output_bytes(o), got = tpu.output_bytes(o);
      EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), values) << "output " << o;
      EXPECT_TRUE(testing::same_bytes(got, want)) << "inference " << inference << ", output " << o;
    }
  }
}

// A first layer writing a partial last block (13 x 13 x 3 at stride 2: 7 outputs a row of 2-pixel
// blocks; 9 x 9 x 1: 9 of 4-pixel blocks), then a 3x3 SAME layer to 4096 channels whose 590 KB of
// weights exceed one wide memory, so that it is a stage of its own reading the surplus pixels'
// first column as its right padding. With the refill left out 24,095 of 200,704 and 34,713 of
// 331,776 output bytes differ.
TEST(PoseNetSizesOnTheVirtualEdgeTpu, AStageEndingOnAPartialBlockHandsOverItsSurplus) {
  std::mt19937 random(7);
  struct Case {
    int h, w, cin;
    twins::ConvSpec first;
    std::vector<int32_t> sent;  // the image as the host sends it
  };
  // 3 channels at stride 2 (one surplus pixel) and 1 channel at stride 1 (4-pixel blocks, 9
  // outputs a row: three): the image as it is, repacked on the chip into whole 8-byte rows of
  // 16 pixels, the channels kept (padded on the host to 16 columns until Dec 5; 4-byte pixels,
  // 13 x 14 x 4 and 9 x 10 x 4, when the stage was refused).
  const std::vector<Case> cases = {
      {13, 13, 3, {16, 3, 2, true, true, true, Activation::kRelu6}, {1, 13, 13, 3}},
      {9, 9, 1, {16, 3, 1, true, true, true, Activation::kRelu6}, {1, 9, 9, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(cat(c.h, " x ", c.w, " x ", c.cin));
    const twins::ConvSpec wide{4096, 3, 1, true, true, true, Activation::kNone};
    const container::Model twin = twins::conv_twin(c.h, c.w, c.cin, {c.first, wide}, random);
    const testing::CompiledTwin compiled(twin);
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    const container::Model ours = container::read_tflite(compiled.result.tflite);
    EXPECT_EQ(sent_shape(ours), c.sent);
    expect_equal_to_cpu(twin, ours, static_cast<size_t>(c.h) * c.w * c.cin, 16, random);
  }
}

// PoseNet's shape at 481 x 641 with half of MobileNet v1 0.75's channels (12 -> 24 -> 48 -> 96 ->
// 192, and the three heads): its 241 x 321 maps fill the tiles and the placement ends the first
// stage on the first layer (481 x 642 x 4 before). Compiled whole and equal in every byte (the
// random trunk's 27 layers leave the heatmaps about ten values; about 1.3 s).
TEST(PoseNetSizesOnTheVirtualEdgeTpu, PoseNetAt481x641WithHalfTheChannelsEqualsTheCpu) {
  std::mt19937 random(481641);
  const int h = 481, w = 641;
  const container::Model twin = twins::posenet_twin(h, w, random, /*divisor=*/2);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  EXPECT_EQ(compiled.exes.execution->output_layers.size(), 3u);
  const container::Model ours = container::read_tflite(compiled.result.tflite);
  EXPECT_EQ(sent_shape(ours), (std::vector<int32_t>{1, h, w, 3}));  // (repacked on the chip)
  expect_equal_to_cpu(twin, ours, static_cast<size_t>(h) * w * 3, 8, random);
}

}  // namespace
}  // namespace tinycoral::compiler
