// Correct by simulation: a 3-channel image that streams as it is, widened on the chip to 4-byte
// pixels before the first convolution (widen_input_on_chip, conv_layer.h; docs/compiler.md
// "The host's image widened to whole words on the chip") where the first layer's ops save more
// cycles than the repack takes: MobileNet v2's front (224 x 224 x 3, a 3x3 stride-2 convolution
// to 32 channels, a depthwise layer and a pointwise one), and the same front to 8 channels, which
// keeps the image as it is.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "chip/tile.h"
#include "common/error.h"
#include "support/compiled_conv_twin.h"
#include "support/conv_twin.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

struct FrontOps {
  int widening_copies = 0;              // narrow copies of 3 bytes a word
  const chip::OpInstr* conv = nullptr;  // the first convolution
};

FrontOps front_ops(const std::vector<chip::OpInstr>& ops) {
  FrontOps f;
  for (const chip::OpInstr& op : ops) {
    if (op.dp_mode == 3 && op.cfg0 == 0x007 && op.loops[0] + 1 == 3) ++f.widening_copies;
    if (op.dp_mode == 2 && f.conv == nullptr) f.conv = &op;
  }
  return f;
}
// (FrontOps::conv points into the ops: never from a temporary.)
FrontOps front_ops(std::vector<chip::OpInstr>&&) = delete;

std::vector<ConvSpec> front(int cout) {
  return {ConvSpec{cout, 3, 2, true, true, true, Activation::kRelu6},
          twins::depthwise(3, 1, true, Activation::kRelu6),
          ConvSpec{16, 1, 1, true, true, true, Activation::kNone}};
}

constexpr int kH = 224, kW = 224, kCin = 3;

// v2's front: every band tile copies its rows into 4-byte pixels (3 bytes a word, the fourth the
// zero point), and the convolution then computes one pixel a position over 9 words, one a tap
// (as the image is: two pixels a position, 64 columns, over 4 words of each of 3 rows). Every
// output byte equals the CPU reference on two inferences.
TEST(WidenedImageOnTheVirtualEdgeTpu, V2FrontTakesOneWordATap) {
  std::mt19937 random(20261208);
  SCOPED_TRACE(twins::describe(kH, kW, kCin, front(32)));
  const testing::CompiledConvTwin c(kH, kW, kCin, front(32), random);
  ASSERT_TRUE(c.on_the_chip());
  const std::vector<chip::OpInstr> ops = c.compiled.execution_ops();
  const FrontOps f = front_ops(ops);
  EXPECT_GE(f.widening_copies, 1);
  ASSERT_NE(f.conv, nullptr);
  EXPECT_EQ(f.conv->out_ch + 1, 32) << "one pixel a position";
  EXPECT_EQ(f.conv->loops[0] + 1, 9) << "one word a tap";
  c.expect_two_inferences_equal(random);
}

// To 8 channels a widened pixel saves the first layer 1.3 cycles an output pixel, less than the
// 3 its copy takes: the image stays as it is, two pixels a position.
TEST(WidenedImageOnTheVirtualEdgeTpu, NarrowFirstLayerKeepsTheImageAsItIs) {
  std::mt19937 random(20261209);
  SCOPED_TRACE(twins::describe(kH, kW, kCin, front(8)));
  const testing::CompiledConvTwin c(kH, kW, kCin, front(8), random);
  ASSERT_TRUE(c.on_the_chip());
  const std::vector<chip::OpInstr> ops = c.compiled.execution_ops();
  const FrontOps f = front_ops(ops);
  EXPECT_EQ(f.widening_copies, 0);
  ASSERT_NE(f.conv, nullptr);
  EXPECT_EQ(f.conv->out_ch + 1, 16) << "two pixels a position";
}

}  // namespace
}  // namespace tinycoral::compiler
