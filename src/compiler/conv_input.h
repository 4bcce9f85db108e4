// The host's image into the first stage of a CONV_2D chain (conv_codegen.h): streamed row piece
// by row piece (or a run per tile) into the interior of layer 0's padded image on every tile whose
// band needs the rows, or, repacked on the chip (ConvChain::repack_w), staged as the host sends it
// and copied into that image by narrow copies. Internal to the conv generator's files.
#pragma once

#include <optional>
#include <vector>

#include "compiler/conv_layer.h"
#include "compiler/conv_plan.h"
#include "compiler/emitter.h"

namespace tinycoral::compiler::conv {

// The host's image as it is (ConvChain::repack_w): each tile of the first stage takes the 8-byte
// units covering its rows into a staging region at `base` (one address on every tile), then 16
// bytes for the identity row the repack multiplies by. Until the repack has run only the first
// image holds anything (its zero point): the staging may lie below or above it, over the stage's
// other images and output (the second image is filled after the repack).
struct Staging {
  int row_bytes = 0;    // the host's rows
  int pixel_bytes = 0;  // the host's pixels when the repack widens them to words (else 0)
  int base = 0, identity = 0;
  // Units a tile's share starts and ends at a multiple of (but the image's last): kPieceUnits
  // where that fits, so that the shares' common rows go once to both tiles (stream_pieces).
  int align = 1;
  // Where a tile's first row starts, from the staging's base, but for its bytes past a word (the
  // whole words before it are the tile's `shift`): one address on every tile, so that
  // the repack's ops of tiles whose bands have one height are one instruction.
  int lead = 0;
};

// The staging of `tiles` (the first stage's), aligned to packets where that fits, else to units;
// nothing where no region of narrow memory holds it beside their images.
std::optional<Staging> staging_of(const ConvChain& chain, const std::vector<Plan>& tiles);

// The end of the staging's narrow memory (its identity row included).
int staging_end(const Staging& s);

// The host's image into the staging of each tile of `tiles` (the first stage's).
void stream_staged(Emitter& e, const std::vector<Plan>& tiles, const Staging& s);

// The staged rows into the first layer's image of each tile.
void repack_input(Emitter& e, const std::vector<Plan>& tiles, const Staging& s);

// The host's image, row piece by row piece, into the interior of layer 0's padded image on every
// tile whose band needs the rows (one packet to all of them, one wideToNarrow each): both ways
// (with a run per tile first, and without), emitting the one of fewer words that reads its rows.
// `pieces`: with a run per tile for every tile, the image popped in pieces (stream_runs).
void stream_input(Emitter& e, const std::vector<Plan>& tiles, bool pieces);

}  // namespace tinycoral::compiler::conv
