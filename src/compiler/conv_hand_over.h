// The hand-over between two stages of a CONV_2D chain (conv_codegen.h, docs/compiler.md
// "All-gather hand-overs"): every tile of a stage sends its band of the stage's last output (rows
// of the next layer's input) over the ring to the tiles of the next stage whose bands read them.
#pragma once

#include "compiler/conv_plan.h"
#include "compiler/emitter.h"

namespace tinycoral::compiler::conv {

// The hand-over from the tiles of `from` into the first image of `to` (layer to.first), appended
// to `e`; `ordinal` counts the program's ring producers. `pricing` (the placement search prices a
// candidate layout): the receivers take the transfers in the order they were made and rows end
// inside a packet only where they must (the forms the search's layouts were tuned with); else the
// schedule of fewest instruction words of all.
void hand_over(Emitter& e, const Stage& from, const Stage& to, int& ordinal, bool pricing);

}  // namespace tinycoral::compiler::conv
