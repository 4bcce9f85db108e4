// Correct by simulation: a 7x7 pool split like the 1x1 layer before it, each of its 5 slices'
// tiles pooling its own 4 groups. MobileNet v2's tail, 7 x 7 x 160 -> 1x1 960 -> 1x1 320 -> 1x1
// 1280 -> 7x7 AVERAGE_POOL_2D -> 1x1 classifier. Every output byte equals the CPU reference on
// two inferences. What this checks is that a pool so split computes right on the simulator, not
// how it came to be split: in this small chain the placement search already splits the pool (the
// test passes on the tree before widen_with_fifos' split of a lone depthwise layer after a split
// stage, docs/compiler.md "v2's pool split like the layer before"), so that path does not run
// here; it is checked only on v2's layout
// (MobileNetCompiledWhole.V2Gen2020EqualsItsTwinAndPassesGooglesCheck).
#include <gtest/gtest.h>

#include <bit>
#include <random>
#include <vector>

#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

TEST(PoolSplitOnTheVirtualEdgeTpu, APoolAfterASplitLayerRunsOnItsSlicesTiles) {
  std::mt19937 random(1205);
  ConvSpec pool{0, 7, 1, false};
  pool.pool = true;
  const std::vector<ConvSpec> specs = {
      {960, 1, 1, true}, {320, 1, 1, true}, {1280, 1, 1, true}, pool, {1001, 1, 1, true}};
  const int h = 7, w = 7, cin = 160;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);

  // The pool's ops (49 taps): one per group of a slice, each on all 5 slices' tiles.
  std::vector<uint16_t> pool_ops;
  for (const chip::OpInstr& op : compiled.execution_ops())
    if (op.loops[0] == 48) pool_ops.push_back(op.tile_mask);
  ASSERT_FALSE(pool_ops.empty());
  EXPECT_EQ(std::popcount(pool_ops.front()), 5) << "the pool is not split like the layer before";
  for (uint16_t mask : pool_ops) EXPECT_EQ(mask, pool_ops.front());
  EXPECT_EQ(pool_ops.size(), 4u);

  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
