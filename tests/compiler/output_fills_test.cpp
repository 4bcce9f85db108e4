// Correct by simulation: a last layer split by output groups over tiles sends each tile's slice to
// the host with a narrowToWide into the tile's ring row, an outfeed and a ring producer. Where
// every tile sends its slice in one transfer, the narrowToWides go first, those with the same
// fields as one instruction on all their tiles (docs/compiler.md "Split pairs in place on their
// shared tiles; the outputs' fills at once"): a classifier of 1001 outputs over 1280 channels on a
// 1x1 map.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/output_sends.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

// 1x1x1280 -> 1x1 to 1001: 1.28 MB of weights, split by output groups over tiles (3: slices of
// two sizes). Each tile's slice is one transfer: one narrowToWide for the tiles whose slices are
// alike instead of one a tile. Every output byte equals the CPU reference on two inferences.
TEST(OutputFillsOnTheVirtualEdgeTpu, ASplitClassifiersSlicesFillTheirRingRowsAtOnce) {
  std::mt19937 random(20261206);
  const std::vector<ConvSpec> specs{{1001, 1, 1, true}};
  const int h = 1, w = 1, cin = 1280;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const testing::OutputSends s =
      testing::output_sends(isa::decode(compiled.exes.execution->bitstreams.at(0).data));
  EXPECT_GE(s.outfeeds, 3) << "the classifier is not split over tiles";
  EXPECT_LT(s.fills, s.outfeeds) << "one a tile, as before";
  EXPECT_TRUE(s.fills_first) << "a narrowToWide after an outfeed";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
