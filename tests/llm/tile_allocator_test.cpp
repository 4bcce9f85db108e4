// The chip path's tile allocator where the RoPE sums' groups ask for tiles (keep_rope_products:
// each q~ sum group on the tile that computes its products) and where a row is taken on one tile
// (the resident row of kept products).
#include <gtest/gtest.h>

#include <array>

#include "compiler/fc_codegen.h"
#include "llm/matmul_plan.h"

namespace tinycoral::testing {
namespace {

constexpr int kAux = 8, kCopy = 136;

std::array<int, llm::kPlanTiles> no_copies() {
  std::array<int, llm::kPlanTiles> c{};
  c.fill(-1);
  return c;
}

TEST(TileAllocator, SharingGroupsGoToTheTilesAskedForWhereTheyFit) {
  llm::TileAllocator tiles;
  std::array<int, llm::kPlanTiles> copies = no_copies();
  compiler::FcPlacement at;
  at.in_at = {0, 128, 256};  // kept: the caller's input places
  ASSERT_TRUE(tiles.place_sharing_on({3, 3, 7}, kAux, kCopy, copies, at));
  EXPECT_EQ(at.tiles, (std::vector<int>{3, 3, 7}));
  EXPECT_EQ(at.in_at, (std::vector<int>{0, 128, 256}));
  // One copy on each tile, both groups of tile 3 reading it, each with its own aux rows after it.
  EXPECT_EQ(copies[3], 0);
  EXPECT_EQ(copies[7], 0);
  EXPECT_EQ(at.param_units, (std::vector<int>{kCopy, kCopy + kAux, kCopy}));
  EXPECT_EQ(at.weight_units, (std::vector<int>{kAux, kAux, kAux}));
  // In one placement a third group asking for a tile goes elsewhere (two groups a tile at most),
  // and so does one asking for a tile without room for a copy and its aux rows.
  const int full = compiler::kFcParamUnits - 100;
  ASSERT_EQ(tiles.take(5, full), 0);
  compiler::FcPlacement more;
  ASSERT_TRUE(tiles.place_sharing_on({9, 9, 9, 5}, kAux, kCopy, copies, more));
  ASSERT_EQ(more.tiles.size(), 4u);
  EXPECT_EQ(more.tiles[0], 9);
  EXPECT_EQ(more.tiles[1], 9);
  // (Elsewhere: the least-filled tiles, 0 and then 1, a tile with a copy counting its copy out.)
  EXPECT_EQ(more.tiles[2], 0);
  EXPECT_EQ(more.tiles[3], 1);
}

// Groups with more aux rows than the copy's own two (the RoPE sums' constants row under
// --chip-rms: 12 units) still read the copy's weights 8 units past its start, and each takes its
// 12 units after the copy.
TEST(TileAllocator, SharingGroupsWithMoreAuxRowsReadTheCopyPastItsOwnRows) {
  constexpr int kBigAux = 12;
  llm::TileAllocator tiles;
  std::array<int, llm::kPlanTiles> copies = no_copies();
  compiler::FcPlacement at;
  ASSERT_TRUE(tiles.place_sharing_on({4, 4}, kBigAux, kCopy, copies, at));
  EXPECT_EQ(at.tiles, (std::vector<int>{4, 4}));
  EXPECT_EQ(copies[4], 0);
  EXPECT_EQ(at.param_units, (std::vector<int>{kCopy, kCopy + kBigAux}));
  EXPECT_EQ(at.weight_units, (std::vector<int>{kAux, kAux}));
}

TEST(TileAllocator, TakeGivesWholeRowsOfOneTileOrNothing) {
  llm::TileAllocator tiles;
  EXPECT_EQ(tiles.take(2, 4), 0);
  EXPECT_EQ(tiles.take(2, 4), 4);
  EXPECT_EQ(tiles.max_fill(), 8);
  EXPECT_EQ(tiles.take(2, 3), -1);   // not whole rows
  EXPECT_EQ(tiles.take(16, 4), -1);  // no such tile
  EXPECT_EQ(tiles.take(2, compiler::kFcParamUnits - 4), -1);
  EXPECT_EQ(tiles.max_fill(), 8);  // a refusal takes nothing
  EXPECT_EQ(tiles.take(2, compiler::kFcParamUnits - 8), 8);
}

}  // namespace
}  // namespace tinycoral::testing
