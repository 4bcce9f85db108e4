// Correct by simulation: a stage writes its last layer's rows straight into the next stage's first
// image on its own tiles (write_in_place) also where that stage holds several layers or the chain
// runs residual ADDs (docs/compiler.md "Written in place: stride-2 layers, several layers, residual
// ADDs"). The chain is MobileNet v2's first 16 layers on its 224 x 224 image; it is laid out as
// the 112 -> 56 expansion's stage (layers 3-5), the 56 x 56 block with its ADD (6-9), then the
// next expansion with the stride-2 depthwise layer inside its stage (10-13, on the tiles and bands
// of the stage before) and a last stage (the last stage always sends its output to the host, so
// the chain goes on past layer 13). A stride-2 layer starting a stage is covered only by the whole
// MobileNet v2 test.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/hand_overs.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// Ring producers that send to tiles, and those among them whose only receiver is their own tile
// (a band handed over to itself).
struct Sends {
  int to_tiles = 0, to_itself = 0;
};
Sends sends_of(const std::vector<isa::Instruction>& program) {
  Sends s;
  for (const isa::Instruction& in : program) {
    if (!testing::sends_to_tiles(in)) continue;
    ++s.to_tiles;
    s.to_itself += (in.value("dest") & 0xffff) == in.value("tiles");
  }
  return s;
}

// Before, stages with more than one layer or a residual ADD in the chain took their whole image
// over the ring: 107 producers to tiles, 21 of them a tile's band to itself. Now the hand-overs
// into layers 6-9 and 10-13 carry the halo rows only. Every output byte equals the CPU reference
// on two inferences.
TEST(WrittenInPlaceOnTheVirtualEdgeTpu, V2HeadsStagesTakeOnlyTheirHaloRows) {
  std::mt19937 random(1205);
  const ConvSpec dw = twins::depthwise(3, 1), dw2 = twins::depthwise(3, 2);
  ConvSpec add{};
  add.residual_from = 6;
  const std::vector<ConvSpec> specs{{32, 3, 2, true},
                                    dw,
                                    {16, 1, 1, true},
                                    {96, 1, 1, true},
                                    dw2,
                                    {24, 1, 1, true},
                                    {144, 1, 1, true},
                                    dw,
                                    {24, 1, 1, true},
                                    add,
                                    {144, 1, 1, true},
                                    dw2,
                                    {32, 1, 1, true},
                                    {192, 1, 1, true},
                                    dw,
                                    {32, 1, 1, true}};
  const int h = 224, w = 224, cin = 3;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const Sends s = sends_of(isa::decode(compiled.exes.execution->bitstreams.at(0).data));
  // (One of the 6 bands still handed over to itself is copied on its tile since, docs/compiler.md
  // "Rows a tile hands to itself copied on the tile". Since each receiver's rows may go on their
  // own (docs/compiler.md "Each receiver's rows on their own; pixel bands as one run"), two more
  // tiles send their rows to themselves in a round whose ring instructions they share, and 9
  // producers fewer in all.)
  // (Since the first stage writes in place too, on the tiles of the stage after it, docs/
  // compiler.md "Out of the first stage in place; uneven stride-2 bands", no band goes to its own
  // tile over the ring and 16 producers fewer.)
  EXPECT_EQ(s.to_itself, 0) << "(21 with every band handed over to itself, 7 before row 69)";
  EXPECT_EQ(s.to_tiles, 66) << "(107 before, 91 before row 64, 82 before row 69)";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
