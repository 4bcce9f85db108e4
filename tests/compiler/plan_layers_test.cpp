// A Plan's layers are shared by its copies until one of them writes (PlanLayers, copy on write),
// and the layers outside its stage are those of the bare layers it was made from, shared by every
// plan of the same shapes: the placement search makes plans by the hundred thousand and copies
// them by the thousand, and a read through a non-const plan that copies every layer silently
// doubled a compile once. These pin both: reads (slice_plan's among them) share, a write makes the
// writer's own copy and leaves the other plan as it was.
#include <gtest/gtest.h>

#include <memory>
#include <utility>
#include <vector>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {
namespace {

TEST(PlanLayers, CopiesShareTheLayersUntilOneWrites) {
  auto bare = std::make_shared<std::vector<LayerPlan>>(4);
  (*bare)[0].oa = 3;
  // Layers 1 and 2 are the plan's own (its stage's), the others the bare ones.
  PlanLayers a(bare, 1, std::vector<LayerPlan>(2));
  EXPECT_EQ(a.size(), 4u);
  EXPECT_EQ(&std::as_const(a)[0], &(*bare)[0]);
  EXPECT_EQ(&std::as_const(a)[3], &(*bare)[3]);
  a[1].oa = 5;
  PlanLayers b = a;
  EXPECT_EQ(&std::as_const(a)[1], &std::as_const(b)[1]);
  b[1].oa = 7;
  EXPECT_NE(&std::as_const(a)[1], &std::as_const(b)[1]);
  EXPECT_EQ(std::as_const(a)[1].oa, 5);
  EXPECT_EQ(std::as_const(b)[1].oa, 7);
  // The writer owns its copy now: a second write copies nothing more, also one outside its stage
  // (a kept operand's layer), which leaves the bare layers and the other plan as they were.
  const LayerPlan* own = &std::as_const(b)[1];
  b[2].ob = 9;
  b[0].oa = 8;
  EXPECT_EQ(&std::as_const(b)[1], own);
  EXPECT_EQ(std::as_const(b)[0].oa, 8);
  EXPECT_EQ(std::as_const(a)[0].oa, 3);
  EXPECT_EQ((*bare)[0].oa, 3);
  // Iteration reads each layer where the plan has it.
  int sum = 0;
  for (const LayerPlan& lp : std::as_const(b)) sum += lp.oa;
  EXPECT_EQ(sum, 8 + 7);
  // An empty plan's layers read as none.
  const PlanLayers none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.begin(), none.end());
}

TEST(PlanLayers, SlicingACopiedPlanKeepsItsLayersShared) {
  ConvLayer layer;
  layer.cout = 256;
  Plan a;
  a.layers = PlanLayers(std::vector<LayerPlan>(2));
  a.layers[1].l = &layer;
  a.layers[1].oa = 0;
  a.layers[1].ob = 4;
  a.layers[1].blocks = 7;
  a.first = 1;
  a.end = 2;
  Plan b = a;
  slice_plan(b, 1, 3);
  EXPECT_EQ(&std::as_const(a.layers)[1], &std::as_const(b.layers)[1]);
  EXPECT_EQ(b.out_ch, 128);
  EXPECT_EQ(b.out_row, 7 * 128);
  EXPECT_EQ(b.out_bytes, 4 * 7 * 128);
}

}  // namespace
}  // namespace tinycoral::compiler::conv
