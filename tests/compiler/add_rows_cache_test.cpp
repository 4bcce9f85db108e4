// Where cache_add_rows puts a residual ADD's 4 weight rows (docs/compiler.md "Residual ADDs' weight
// rows cached"): rows free on every tile of its stage, the highest first; with none free, the rows
// the fills build into, on tiles where no other ADD fills; else no cached rows (-1) and the fills
// of every inference. Every ADD of the test data finds free rows, so the later two choices are
// pinned here on layouts whose segments take every row.
#include <gtest/gtest.h>

#include <vector>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {
namespace {

constexpr int kFilledRow = kAddRows / kRowUnits;  // the fills' rows, as a wide row

// Layers whose ADDs read the layer `residual_of[i]` (-1: not an ADD), a segment of `rows` rows on
// all 16 tiles, and stages of layers [first, end) on their tiles.
struct StageOf {
  size_t first, end;
  std::vector<int> tiles;
};
struct Case {
  std::vector<ConvLayer> layers;
  Shapes shapes;
  std::vector<Stage> stages;

  Case(const std::vector<int>& residual_of, int rows, const std::vector<StageOf>& of)
      : layers(residual_of.size()) {
    shapes.layers.resize(layers.size());
    for (size_t i = 0; i < layers.size(); ++i) {
      layers[i].residual_of = residual_of[i];
      shapes.layers[i].l = &layers[i];
    }
    Segment seg;
    seg.rows = rows;
    seg.mask = 0xffff;
    shapes.segments.push_back(seg);
    for (const StageOf& so : of) {
      Stage st;
      st.first = so.first;
      st.end = so.end;
      for (int t : so.tiles) {
        Plan p;
        p.tile = t;
        st.tiles.push_back(p);
      }
      stages.push_back(st);
    }
    cache_add_rows(shapes, stages);
  }
  const LayerPlan& at(size_t i) const { return shapes.layers[i]; }
};

TEST(AddRowsCache, TakesTheHighestRowsFreeOnTheStagesTiles) {
  const Case c({-1, 0}, 1000, {{0, 2, {0, 1, 2}}});
  EXPECT_EQ(c.at(0).add_row, -1);  // (not an ADD)
  EXPECT_EQ(c.at(1).add_row, kFilledRow - 4);
  EXPECT_EQ(c.at(1).add_mask, 0x7u);
  EXPECT_EQ(c.at(1).add_offset, size_t{1000} * kRowBytes);  // after the segment's rows
}

TEST(AddRowsCache, WithoutFreeRowsTakesTheFillsRows) {
  const Case c({-1, 0}, kFilledRow, {{0, 2, {4, 5}}});
  EXPECT_EQ(c.at(1).add_row, kFilledRow);
  EXPECT_EQ(c.at(1).add_offset, size_t{kFilledRow} * kRowBytes);
}

TEST(AddRowsCache, AddsOnOtherTilesEachTakeTheFillsRows) {
  const Case c({-1, 0, -1, 2}, kFilledRow, {{0, 2, {0, 1}}, {2, 4, {2, 3}}});
  EXPECT_EQ(c.at(1).add_row, kFilledRow);
  EXPECT_EQ(c.at(3).add_row, kFilledRow);
  EXPECT_EQ(c.at(3).add_offset, size_t{kFilledRow + 4} * kRowBytes);  // after layer 1's rows
}

// Two ADDs on the same tiles with no free rows: the second cannot have the fills' rows, so it
// fills them every inference, and the first, cached there, would be overwritten: it fills too;
// an ADD on other tiles keeps them.
TEST(AddRowsCache, AddsSharingTilesWithoutFreeRowsFill) {
  const Case c({-1, 0, 1, -1, 3}, kFilledRow, {{0, 3, {0, 1}}, {3, 5, {5}}});
  EXPECT_EQ(c.at(1).add_row, -1);
  EXPECT_EQ(c.at(2).add_row, -1);
  EXPECT_EQ(c.at(4).add_row, kFilledRow);
  EXPECT_EQ(c.at(4).add_offset, size_t{kFilledRow} * kRowBytes);  // (the fills' ADDs add none)
}

}  // namespace
}  // namespace tinycoral::compiler::conv
