// Correct by simulation: a stage writes its last layer's rows straight into the next stage's first
// image on its own tiles (write_in_place) also where that stage holds several layers, starts with
// a stride-2 layer or runs a residual ADD (docs/compiler.md "Written in place: stride-2 layers,
// several layers, residual ADDs"). The chain is MobileNet v2's first 13 layers on its 224 x 224
// image: the 112 -> 56 expansion's stage, the 56 x 56 block with its ADD and the next expansion,
// then the stride-2 depthwise layer, each of the last two stages on the tiles and bands of the
// stage before.
#include <gtest/gtest.h>

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

// Ring producers that send to tiles, and those among them whose only receiver is their own tile
// (a band handed over to itself).
struct Sends {
  int to_tiles = 0, to_itself = 0;
};
Sends sends_of(const std::vector<isa::Instruction>& program) {
  Sends s;
  for (const isa::Instruction& in : program) {
    if (in.opcode() != isa::kRingProducer) continue;
    const int64_t dest = in.value("dest") & 0xffff;
    if (dest == 0) continue;
    ++s.to_tiles;
    s.to_itself += dest == in.value("tiles");
  }
  return s;
}

// Before, stages with more than one layer, a stride-2 first layer or a residual ADD in the chain
// took their whole image over the ring: 106 producers to tiles, 34 of them a tile's band to
// itself. Every output byte equals the CPU reference on two inferences.
TEST(WrittenInPlaceOnTheVirtualEdgeTpu, V2HeadsStagesTakeOnlyTheirHaloRows) {
  std::mt19937 random(1205);
  ConvSpec dw{0, 3, 1, true};
  dw.depthwise = true;
  ConvSpec dw2 = dw;
  dw2.stride = 2;
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
                                    {32, 1, 1, true}};
  const int h = 224, w = 224, cin = 3;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const Sends s = sends_of(isa::decode(compiled.exes.execution->bitstreams.at(0).data));
  EXPECT_LE(s.to_itself, 20) << "(34 with every band handed over to itself)";
  EXPECT_LE(s.to_tiles, 92) << "(106 before)";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
