// Correct by simulation: pointwise stages that write their rows straight into the 3x3 depthwise
// stage's padded image on their own tiles, so that the hand-over between them carries only the
// halo rows (write_in_place, docs/compiler.md "Only the halo rows over the ring"). The chain is
// PoseNet's 23 x 31 x 384 pairs: each pointwise layer in 2 slices of 3 groups in 8 row bands on
// 16 tiles, its weights through FIFOs from owner tiles, the depthwise layer after it the same,
// its image in bands (docs/compiler.md "Slices of three groups on all 16 tiles").
#include <gtest/gtest.h>

#include <bit>
#include <memory>
#include <random>
#include <variant>
#include <vector>

#include "chip/program.h"
#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/hand_overs.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// 23 x 31 x 64 -> 1x1 to 384, then three pairs of a 3x3 depthwise layer and a 1x1 to 384. The
// hand-overs into the depthwise layers are written in place and each carry 28 rows of 6,336
// bytes, a transfer each (7 band boundaries, a row each way, 2 slices); before the slices of three
// groups, 24 rows of 3,968 bytes (3 slices of 5 bands on 15 tiles), and before the halo-only
// hand-overs each tile sent its whole band to itself and its neighbours. Every output byte equals
// the CPU reference on two inferences; a halo row written one row too low makes the output
// differ.
TEST(HaloHandOverOnTheVirtualEdgeTpu, OnlyTheHaloRowsCrossTheRing) {
  std::mt19937 random(20261205);
  const int h = 23, w = 31, cin = 64;
  const ConvSpec pw{384, 1, 1, true, true, true, Activation::kNone};
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kNone};
  dw.depthwise = true;
  const std::vector<ConvSpec> specs{pw, dw, pw, dw, pw, dw, pw};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  std::vector<isa::Instruction> program =
      isa::decode(compiled.exes.execution->bitstreams.at(0).data);
  // Into each depthwise layer (9 taps: loop0 8) from a 384 -> 384 pointwise layer (96 reduction
  // words: loop0 95).
  const std::vector<testing::HandOver> between = testing::hand_overs(program, 95, 8);
  int in_place = 0;
  for (const testing::HandOver& b : between) in_place += b.producers == 28;
  EXPECT_EQ(in_place, 2) << "the second and third depthwise layers take only halo rows";
  // The 384 -> 384 pointwise layers (96 reduction words: loop0 95) on all 16 tiles.
  const std::unique_ptr<chip::Program> decoded =
      chip::Program::decode(compiled.exes.execution->bitstreams.at(0).data);
  uint32_t pointwise_tiles = 0;
  for (const chip::ProgramItem& item : decoded->items)
    if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded);
        op && op->source && op->source->value("loop0") == 95)
      pointwise_tiles |= op->tile_mask;
  EXPECT_EQ(std::popcount(pointwise_tiles), 16);
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);

  // The same program with one halo row's receive moved a row down (33 pixels of 192 channels):
  // the row it should have filled keeps the zero point and its neighbour is overwritten.
  size_t first = between.size();
  for (size_t k = 0; k < between.size() && first == between.size(); ++k)
    if (between[k].producers == 28) first = k;
  ASSERT_LT(first, between.size());
  isa::Instruction& receive = program[between[first].receives.front()];
  receive.set("n.addr", receive.value("n.addr") + 33 * 192 / 4);
  testing::expect_edited_program_differs(compiled, twin, program, static_cast<size_t>(h) * w * cin,
                                         random);
}

}  // namespace
}  // namespace tinycoral::compiler
