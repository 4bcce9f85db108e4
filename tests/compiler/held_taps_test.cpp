// Correct by simulation: a dense depthwise layer split by output groups over tiles, one part a
// tile, sends its parts' tap entries to scalar memory with one producer from the tile that holds
// them together, each part's outfeed taking its share of that producer's packets
// (docs/compiler.md "Fewer producers for a split depthwise layer's taps"). The chain is the split
// pair's (split_pair_test.cpp): 4 x 4 x 16 -> 1x1 to 64 -> 3x3 to 1024 (too large for one tile:
// 16 slices) -> depthwise 3x3 stride 2 in the same 16 slices -> 1x1 to 72. Every output byte
// equals the CPU reference on two inferences.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <variant>
#include <vector>

#include "support/compiled_conv_twin.h"
#include "support/conv_twin.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

TEST(HeldTapsOnTheVirtualEdgeTpu, ASplitDepthwiseLayersTapsGoToScalarMemoryFromOneProducer) {
  std::mt19937 random(1207);
  twins::ConvSpec dw = twins::depthwise(3, 2, true, container::Activation::kRelu6);
  const std::vector<ConvSpec> specs = {{64, 1, 1, true}, {1024, 3, 1, true}, dw, {72, 1, 1, true}};
  const int h = 4, w = 4, cin = 16;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());

  // The depthwise layer's trips: one infeed from scalar memory a part (to its own tiles), an
  // outfeed into scalar memory a part, and the producers to the scalar core (bit 16) before the
  // output's first outfeed to the host (the output's producers come after).
  const std::unique_ptr<chip::Program> program =
      chip::Program::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  std::vector<uint16_t> part_tiles;
  uint64_t entry_rows = 0, outfed_rows = 0, produced_rows = 0;
  int producers = 0;
  for (const chip::ProgramItem& item : program->items) {
    if (const auto* in = std::get_if<chip::InfeedInstr>(&item.decoded);
        in && in->from_scalar_memory) {
      part_tiles.push_back(in->tiles);
      entry_rows += (uint64_t{in->units} * 4 + 255) / 256;
    }
    if (const auto* o = std::get_if<chip::OutfeedInstr>(&item.decoded)) {
      if (!o->to_scalar_memory) break;
      outfed_rows += (uint64_t{o->bytes} + 255) / 256;
    }
    if (const auto* r = std::get_if<chip::RingInstr>(&item.decoded);
        r && item.opcode == isa::kRingProducer && (r->dest >> 16 & 1)) {
      ++producers;
      produced_rows += r->ttu.steps();
    }
  }
  EXPECT_EQ(part_tiles.size(), 16u) << "the depthwise layer is not split over 16 tiles";
  for (size_t k = 1; k < part_tiles.size(); ++k)
    EXPECT_NE(part_tiles[k], part_tiles[k - 1]) << "each part's entries go to its own tiles";
  EXPECT_EQ(producers, 1) << "a producer per part";
  EXPECT_EQ(outfed_rows, entry_rows);
  EXPECT_EQ(produced_rows, entry_rows);

  c.expect_two_inferences_equal(random);
}

}  // namespace
}  // namespace tinycoral::compiler
