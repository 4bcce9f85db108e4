// A Plan's layers are shared by its copies until one of them writes (PlanLayers, copy on write):
// the placement search copies plans by the thousand, and a read through a non-const plan that
// copies every layer silently doubled a compile once. These pin both halves: reads (slice_plan's
// among them) share, a write makes the writer's own copy and leaves the other plan as it was.
#include <gtest/gtest.h>

#include <utility>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {
namespace {

TEST(PlanLayers, CopiesShareTheLayersUntilOneWrites) {
  PlanLayers a;
  a.resize(3);
  a[1].oa = 5;
  PlanLayers b = a;
  EXPECT_EQ(&std::as_const(a)[0], &std::as_const(b)[0]);
  EXPECT_EQ(std::as_const(b).begin(), std::as_const(a).begin());
  b[1].oa = 7;
  EXPECT_NE(&std::as_const(a)[0], &std::as_const(b)[0]);
  EXPECT_EQ(std::as_const(a)[1].oa, 5);
  EXPECT_EQ(std::as_const(b)[1].oa, 7);
  // The writer owns its copy now: a second write copies nothing more.
  const LayerPlan* own = &std::as_const(b)[0];
  b[2].ob = 9;
  EXPECT_EQ(&std::as_const(b)[0], own);
  // An empty plan's layers read as none.
  const PlanLayers none;
  EXPECT_EQ(none.size(), 0u);
  EXPECT_EQ(none.begin(), none.end());
}

TEST(PlanLayers, SlicingACopiedPlanKeepsItsLayersShared) {
  ConvLayer layer;
  layer.cout = 256;
  Plan a;
  a.layers.resize(2);
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
