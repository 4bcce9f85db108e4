// Correct by simulation: the chain's first stage writes its last layer's rows straight into the
// next stage's first image on its own tiles (write_in_place from the first stage, docs/compiler.md
// "Out of the first stage in place; uneven stride-2 bands"). The chain is MobileNet v1 1.0's
// first eight layers on its 224 x 224 image: the first stage (layers 0-2, 16 tiles of 7 rows of
// 112) hands its 112 x 112 x 64 output to a stage whose stride-2 depthwise layer computes 56
// rows on the same 16 tiles, 3 and 4 rows a tile (uneven bands: each band's input rows lie
// inside its tile's 7 rows and a halo of one or two rows).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/hand_overs.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

// The stride-2 depthwise layer's ops (9 taps: loop0 8) after the 1x1 32 -> 64 layer's (8
// reduction words: loop0 7): the instructions between the two layers' ops (the hand-over and its
// fences) and the tile masks of the depthwise layer's ops.
struct Boundary {
  int between = 0;
  std::vector<int64_t> masks;
};
Boundary boundary_of(const std::vector<isa::Instruction>& program) {
  Boundary b;
  int since = -1;  // instructions since the last op of the 1x1 layer
  for (const isa::Instruction& in : program) {
    if (in.opcode() != isa::kTensorOp) {
      if (since >= 0 && b.masks.empty()) ++since;
      continue;
    }
    if (in.value("loop0") == 7) since = 0;
    if (since < 0 || in.value("loop0") != 8) {
      if (!b.masks.empty()) break;
      continue;
    }
    if (b.masks.empty()) b.between = since;
    b.masks.push_back(in.value("tiles"));
  }
  return b;
}

// Before, the first stage's rows crossed whole (each tile's 7 rows copied on the tile into its
// own image, the halo rows over the ring): 41 instructions and 7 wideToNarrows between the two
// layers' ops. Now the first stage's last layer writes its rows into that image and only the halo
// rows cross: 28 instructions, 3 wideToNarrows. The stride-2 layer's ops come in two tile masks
// (the tiles of 3 and of 4 output rows). Every output byte equals the CPU reference on two
// inferences.
TEST(FirstStageInPlaceOnTheVirtualEdgeTpu, UnevenStride2BandsTakeOnlyTheirHaloRows) {
  std::mt19937 random(1207);
  const ConvSpec dw = twins::depthwise(3, 1), dw2 = twins::depthwise(3, 2);
  const std::vector<ConvSpec> specs{{32, 3, 2, true},  dw, {64, 1, 1, true},  dw2,
                                    {128, 1, 1, true}, dw, {128, 1, 1, true}, dw2};
  const int h = 224, w = 224, cin = 3;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const std::vector<isa::Instruction> program =
      isa::decode(compiled.exes.execution->bitstreams.at(0).data);
  const std::vector<testing::HandOver> into = testing::hand_overs(program, 7, 8);
  ASSERT_EQ(into.size(), 1u);
  EXPECT_EQ(into.front().receives.size(), 3u) << "(7 with the first stage's rows crossing whole)";
  const Boundary b = boundary_of(program);
  EXPECT_EQ(b.between, 28) << "(41 with the first stage's rows crossing whole)";
  int64_t all = 0;
  for (const int64_t m : b.masks) all |= m;
  EXPECT_EQ(all, 0xffff);
  EXPECT_TRUE(std::find(b.masks.begin(), b.masks.end(), 0x5555) != b.masks.end() &&
              std::find(b.masks.begin(), b.masks.end(), 0xaaaa) != b.masks.end())
      << "(the bands of 3 and of 4 rows: every other tile)";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
