// Weights through a FIFO from owner tiles (docs/compiler.md "Weights through a FIFO from owner
// tiles"): a CONV_2D whose weight rows are not resident on the tiles that compute it. Each of its
// parts keeps its multipliers, biases and zero-point row and a window of `kwords` rows (or, K-
// chunked, a few rows and the psum rows: docs/compiler.md "K-chunked FIFO windows"); its weight
// rows sit on owner tiles, and with every inference the owners broadcast them over the ring into
// the window, one 64-channel group (or chunk) a fill, which the op reads as they arrive (Google's
// form: gen2020 MobileNet v2 words 216, 244). Internal to the conv generator's files.
#pragma once

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

// The most rows a FIFO window takes (reduction words of a group: K <= 1,024 channels a tap row).
constexpr int kFifoMaxRows = 256;

// Whether layer `lp` may take its weights through a FIFO: a CONV_2D (not depthwise, not a residual
// ADD) without fan-out heads or joins, whole-word pixels, its group's rows within kFifoMaxRows.
bool fifo_capable(const LayerPlan& lp);

// The largest window a K-chunked FIFO takes a fill (Google's 1x1 windows: 9-15 rows).
constexpr int kChunkMaxRows = 15;

// Chooses each FIFO layer's K-chunked window (LayerPlan::chunk, psum_rows) where it takes fewer
// rows than a whole group's: the largest divisor of a tap row's words up to kChunkMaxRows (at
// least 4), and a psum row for each position of its busiest tile in `stages`.
void chunk_fifo_windows(Shapes& s, const std::vector<Stage>& stages);

// Places the weight rows of every part of a FIFO layer (LayerPlan::fifo) on owner tiles: runs of
// whole windows (the consumer takes the rows in the order they arrive, so a run may end inside a
// group), each on the tile with the largest run of free rows outside every segment group's
// region and the runs placed before, a layer's parts taking one run each in turn; each part's
// runs in the order they are sent (short runs on computing tiles first, the longest last: the
// ops wait only for the short runs on computing tiles; which tiles compute is the layer's whole
// set here, where the code generator may take only a part's own tiles). Sets Part::owned and the
// runs' stream offsets; false (and nothing set) when some part finds no room.
bool own_fifo_weights(Shapes& s);

// How many of `part`'s runs, in send order, go before the layer's ops: those up to the last fence
// on a tile in `computing` (a run after one from another tile waits for it at a fence on that
// tile; after one from the same tile it needs none: a tile's producer sends its runs in order). 0:
// no such fence.
size_t fifo_runs_before_ops(const Part& part, uint32_t computing);

// After the layout (every segment, owner, ADD row and held tap placed; docs/compiler.md "FIFO
// slices on one computing tile, a window first"): each FIFO layer whose parts fit on one computing
// tile each and on tiles that do not compute the layer, in rows nothing else takes, placed so where
// its ops would wait for fewer rows before them, or as many in a layer of several parts (each
// part's first window then a run of its own, sent before any longer run: the ops start at their
// first fill, and now together). Not the layers `keep` names (the
// code generator's halo rows first needs parts of one run).
void refit_fifo_runs(Shapes& s, const std::vector<bool>& keep);

// Where the layout's segments take turns in wide memory (the parameters exceed the tiles'), its
// capable layers of those groups take their weights through FIFOs instead, when the segments then
// need no turns and every weight row finds an owner: no layer runs in parts any longer, and no
// parameter is streamed or loaded twice. The layout is unchanged otherwise.
void fifo_instead_of_turns(Layout& layout);

}  // namespace tinycoral::compiler::conv
