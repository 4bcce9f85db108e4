// The halo exchange of a map split in 2-D blocks over a grid of tiles, in the form of Google's
// gen2020 MobileNet v2 program (docs/compiler.md "Mesh halo exchange"): every tile keeps its block
// with a halo border in narrow memory, and mesh moves fill each border from the neighbouring
// tiles' edge pixels (corners from the diagonal neighbour) or, at the map's outer border, with the
// zero point. Emitted through the Emitter's named fields; no generator uses it yet.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "compiler/emitter.h"

namespace tinycoral::compiler {

// Halo widths (pixels) on the four sides of every block: 1 all round for a 3x3 stride-1 layer,
// bottom and right only for a stride-2 SAME layer on an even map.
struct HaloSides {
  int top = 1, bottom = 1, left = 1, right = 1;
};

// A map of sum(rows) x sum(cols) pixels split into R x C blocks (R = rows.size(), C = cols.size(),
// 1 to 4 each; blocks may differ, e.g. 14 = 4 + 3 + 4 + 3). Block (r, c) lives on the tile at
// mesh position 4 r + c as a padded image [top + rows[r] + bottom][left + cols[c] + right] of
// pixels, each pixel `channels` bytes padded to whole 4-byte words (mesh moves carry words), at
// narrow byte address `base` on every tile.
struct MeshHalo {
  std::vector<int> rows, cols;
  int channels = 0;
  HaloSides halo;
  uint32_t base = 0;
  uint8_t zero_point = 0;  // written into the halo along the map's outer border
  // > 0: an op of the same fence region writes the blocks, and every sending move waits for the
  // AVDATA counter to reach this value (Google's s0 record); 0: the blocks were there before.
  int avdata = 0;

  int channel_words() const { return (channels + 3) / 4; }
  int buffer_rows(int r) const { return halo.top + rows.at(r) + halo.bottom; }
  int buffer_cols(int c) const { return halo.left + cols.at(c) + halo.right; }
  int64_t buffer_bytes(int r, int c) const {
    return int64_t{4} * channel_words() * buffer_rows(r) * buffer_cols(c);
  }
  // Narrow byte address of pixel (y, x) of the padded image of a block of grid column c (any
  // row); y and x count from its first halo row and column (the block's first pixel is at (top,
  // left)).
  int64_t pixel_address(int c, int y, int x) const {
    return base + int64_t{4} * channel_words() * (int64_t{y} * buffer_cols(c) + x);
  }
  uint32_t tile_mask() const;  // the grid's tiles
};

// The tile sync counters the moves name (MESH_*_IN in their records, MESH_*_OUT in the closing
// fence), counted as Google's program counts them, alike on every tile of the grid: each move adds
// its pieces of at most 16 words per pixel, and the closing fence sets the MESH_*_OUT counters of
// the tiles that did not send in some direction to the others' count (docs/compiler.md). Index:
// isa::mesh_direction (south, west, north, east). A fence with `counters=0x1ffff` resets them:
// so does a new MeshCounts. `tiles`: the grid they were counted on (0 before the first exchange);
// an exchange on another grid needs a reset first.
struct MeshCounts {
  std::array<int, 4> in{}, out{};
  uint32_t tiles = 0;
};

// Throws Error naming what is wrong: a grid beyond 4 x 4, an empty block, a block smaller than the
// halo it sends, no halo at all, a base that is not word-aligned, a padded block beyond narrow
// memory.
void check_mesh_halo(const MeshHalo& h);

// Emits the exchange (checked first): the west and east moves (full buffer height, so the corners
// come along once the vertical moves delivered them: they wait on MESH_NORTH_IN / MESH_SOUTH_IN),
// then north and south, for the sides with a halo; then the fence that sets the MESH_*_OUT
// counters to one count on the tiles where they differ (none when all agree: a single tile). Each
// direction's tiles share an instruction when their walks agree: three per direction for equal
// blocks (the tiles that only receive, the middle ones, the edge ones that send and fill).
void emit_mesh_halo(Emitter& e, const MeshHalo& h, MeshCounts& counts);

}  // namespace tinycoral::compiler
