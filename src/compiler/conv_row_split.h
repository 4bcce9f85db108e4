// The two row-split forms of a stage's last layer (conv_codegen.h): its bands computed as two ops
// so that part of the hand-over into the next stage crosses the ring while the second op runs.
// Which tiles and rows take them, decided from the stages alone; the execution program
// (emit_program, conv_codegen.cpp) issues the ops (layer_op, depthwise_op: conv_ops.h) and the
// hand-overs. Internal to the conv generator's files.
#pragma once

#include <cstddef>
#include <vector>

#include "compiler/conv_hand_over.h"
#include "compiler/conv_layer.h"
#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

// Output rows of a band an op computes: `count` rows from row `first` on, `step` apart (count < 0:
// the whole band [oa, ob)). halo_first's two ops of a band.
struct RowPick {
  int first = 0, step = 1, count = -1;
};

// Halo rows first (docs/compiler.md "Halo rows first"): where a stage's last layer writes its
// bands in place into the next stage's first image (Stage::halo_in), each tile computes the rows
// other tiles read ahead of the rest (a band's first and last, 3 rows or more) as an op of its
// own, and the rest after a fence: the hand-over's narrowToWides wait only for the first op, so
// the halo rows cross the ring while the rest computes. Per tile of stages[si]: its two ops'
// rows (`rest.count` 0: the band in one op); empty where the layer i does not take the form.
struct HaloFirst {
  RowPick first, rest;
};
std::vector<HaloFirst> halo_first(const ConvChain& chain, const std::vector<Stage>& stages,
                                  size_t si, size_t i);

// The swap under the depthwise (docs/compiler.md "The swap under the depthwise"): where a stage's
// last layer is a depthwise one whose bands go to the next stage over the ring (not in place), each
// tile of the tallest bands (2 rows or more) computes its band but its last rows as one op and
// those rows as a second: the hand-over of the first op's rows runs while the second computes,
// then that of the last rows. Shorter bands (PoseNet's 2-row bands among 3-row ones) end as early
// in one op, so all their rows go in the first hand-over. The next stage's fills of its own images
// and the first hand-over's writes come before the second op, so on every tile they must lie off
// the input rows the second op reads and the output rows it writes (docs/compiler.md "The swap
// with rows apart, and the shorter bands' wait"). The first op's rows per tile of stages[si];
// empty where layer i does not take the form.
std::vector<RowRange> swap_split(const ConvChain& chain, const std::vector<Stage>& stages,
                                 size_t si, size_t i);

}  // namespace tinycoral::compiler::conv
