// Correct by simulation: band-to-band hand-overs of rows that end inside a packet. A chain on a
// 56 x 56 x 24 image (v2's bands after layer 5: 1,344-byte rows, 5.25 packets) hands rows between
// stages of bands (16 bands of 3 or 4 rows to 14 of 4 that read a halo row either side); a row
// goes as one transfer of 6 packets (the wideToNarrow's rule, rows_in_one_transfer), not as 5
// whole packets and a 64-byte rest in two: 34 ring producers instead of 48. Every output byte
// equals the CPU reference on two inferences.
#include <gtest/gtest.h>

#include <random>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

TEST(BandHandOverOnTheVirtualEdgeTpu, RowsEndingInsideAPacketGoInOneTransfer) {
  std::mt19937 random(1205);
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kRelu6};
  dw.depthwise = true;
  const std::vector<ConvSpec> specs = {
      {144, 1, 1, true, true, true, Activation::kRelu6}, dw, {24, 1, 1, true},
      {144, 1, 1, true, true, true, Activation::kRelu6}, dw, {24, 1, 1, true}};
  const int h = 56, w = 56, cin = 24;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);

  // One ring producer per transfer: 34 with the rows whole, 48 with each 1,344-byte row a band
  // shares cut into 5 packets and a rest.
  int to_tiles = 0;
  for (const isa::Instruction& in : isa::decode(compiled.exes.execution->bitstreams.at(0).data))
    to_tiles += in.opcode() == isa::kRingProducer && (in.value("dest") & 0xffff) != 0;
  EXPECT_GE(to_tiles, 14) << "the bands do not hand over";
  EXPECT_LT(to_tiles, 40);

  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
