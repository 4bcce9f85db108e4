// The instructions of one layer of a CONV_2D chain on its tiles (conv_codegen.h): the zero-point
// fills of padded images, a part's bias load and op (CONV_2D, depthwise or pool), a dense
// depthwise part's taps round through scalar memory, a residual ADD and the joins of joined
// heads. The execution program (conv_codegen.cpp) issues them in order. Internal to the conv
// generator's files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "compiler/conv_hand_over.h"
#include "compiler/conv_plan.h"
#include "compiler/conv_row_split.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/emitter.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler::conv {

// Logical strides (in words) of the place a layer writes its outputs: position, row, group.
struct OutTarget {
  int base = 0;  // bytes
  int pixel_bytes = 0, row_words = 0;
};

// Where layer i of tile `p` writes: the next layer's image, the next stage's (in place) or the
// stage's output.
OutTarget out_target(const Plan& p, size_t i);

// The zero point `zp` into `bytes` of tile `tile`'s narrow memory from `base`.
void fill_narrow(TileBatch& b, int tile, int base, int bytes, int zp);

// The zero point again past each row's interior of the next image where the partial last block of
// layer i wrote surplus pixels.
void surplus_fill(TileBatch& b, const Plan& p, size_t i);

// The same for a stage's first image, whose surplus pixels came with the hand-over.
void hand_over_surplus_fill(TileBatch& b, const Plan& p);

// A part's multipliers (and biases) from wide row `first_row` into the output stage of the tiles
// `tile`: the wideToNarrow's fields after `tiles=`, and the instruction.
std::string bias_load_fields(const LayerPlan& lp, int first_row, int groups);
void bias_load(Emitter& e, const LayerPlan& lp, int first_row, int groups, uint32_t tile);

// The words of groups [g0, g1) of a depthwise layer.
int depthwise_words(const LayerPlan& lp, int g0, int g1);

// A depthwise layer's groups [g0, g1) of a part on tile `p` (`pick`: the band's rows it computes,
// all by default: swap_split's two ops).
void depthwise_op(TileBatch& e, const Plan& p, size_t i, const Part& part, int g0, int g1,
                  RowRange pick = {});

// A dense depthwise part's taps from wide row `row` of tile `holder` round through scalar memory
// into the FIFO rows of the tiles of `mask` (depthwise_round_trips), and the tiles' consumer (its
// fields after `tiles=`).
struct RoundTrip {
  int holder = 0, row = 0;
  uint32_t mask = 0;
  int taps = 0, words = 0;
};
// The trips of parts, in order (`outfed`: the scalar-memory words outfed so far). Per part its
// infeed and outfeed; where runs of the parts have their entries held together (LayerPlan::holds:
// a layer's parts, all its trips) the run's one producer after its first part's outfeed, each
// outfeed taking the next part's packets of it (docs/chip.md "Outfeed": the packets addressed to
// the scalar core, in order); a part in no run sends its own rows.
void depthwise_round_trips(Emitter& e, const std::vector<RoundTrip>& trips,
                           const std::vector<HeldTaps>& holds, int& outfed);
std::string depthwise_fifo_consumer(int taps, int words);

// A CONV_2D (or pool) part's op on tile `p`. `head`: the fan-out head the op computes (nullptr
// for other layers). `pick`: its rows (not of a pixel band; halo_first's two ops).
void layer_op(TileBatch& e, const Plan& p, size_t i, const Part& part, const ConvLayer::Head* head,
              const RowPick& pick = {});

// A residual ADD on tile `p` (`rows`: the wide unit of its weight rows), and whether two read and
// write the same addresses (one instruction for their tiles).
AddOp residual_op(const Plan& p, size_t i, int rows);
bool same_add(const AddOp& x, const AddOp& y);

// The joins of joined heads layer i on every tile of the stage.
void emit_joins(Emitter& e, const Stage& stage, size_t i);

}  // namespace tinycoral::compiler::conv
