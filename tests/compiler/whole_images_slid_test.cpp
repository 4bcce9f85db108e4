// Correct by simulation: stages whose tiles keep the whole first image with its rows slid in
// their region (slide_full_images, align_full_images in conv_hand_over.h). MobileNet v1 0.25's
// first eleven layers on its 128 x 128 image put bands of a depthwise layer on many tiles that
// each keep the whole image; each tile's first read row now sits at one place of its region, so
// the tiles' ops are one instruction where they were one per tile, differing only in `in.base`
// (30 ops before, 17 now; the whole v1 0.25 61 -> 41). Every output byte equals the CPU
// reference on two inferences.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// An op with the fields that differ between the tiles of one band stage cleared: two such ops
// equal run the same layer part on other bands.
std::vector<uint8_t> without_band(isa::Instruction op) {
  op.set("tiles", 0);
  op.set("seq", 0);
  op.set("in.base", 0);
  return op.bytes;
}

TEST(SlidImagesOnTheVirtualEdgeTpu, BandTilesKeepingTheWholeImageShareTheirOps) {
  std::mt19937 random(1206);
  const ConvSpec dw = twins::depthwise(3, 1), dw2 = twins::depthwise(3, 2);
  const std::vector<ConvSpec> specs = {{8, 3, 2, true},  dw, {16, 1, 1, true}, dw2,
                                       {32, 1, 1, true}, dw, {32, 1, 1, true}, dw2,
                                       {64, 1, 1, true}, dw, {64, 1, 1, true}};
  const int h = 128, w = 128, cin = 3;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);

  // No two ops differ only in their tiles and `in.base` (each band tile's first read row at its
  // own place: before, one op per band tile of the stages keeping the whole image), and some op
  // runs on many band tiles at once.
  std::vector<std::vector<uint8_t>> ops;
  int widest = 0, band_only = 0;
  for (const isa::Instruction& in : isa::decode(compiled.exes.execution->bitstreams.at(0).data)) {
    if (in.opcode() != isa::kTensorOp) continue;
    widest = std::max(widest, std::popcount(static_cast<uint32_t>(in.value("tiles"))));
    std::vector<uint8_t> bytes = without_band(in);
    for (const std::vector<uint8_t>& other : ops) band_only += other == bytes;
    ops.push_back(std::move(bytes));
  }
  EXPECT_GE(widest, 7) << "no stage on many band tiles";
  EXPECT_EQ(band_only, 0) << ops.size() << " ops";
  EXPECT_LE(ops.size(), 17u) << "(30 ops with an op per band tile)";

  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
