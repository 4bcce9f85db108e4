// Where the host's image is popped in pieces when each tile of the first stage takes its rows as
// one run (stream_runs, conv_input.cpp; docs/compiler.md "The host's image popped in pieces for
// the runs"). Internal to the conv generator's files.
#pragma once

#include <vector>

namespace tinycoral::compiler::conv {

// A tile's 8-byte units [u0, u1) of the host's image (its band's rows, halo rows included), in
// the order of the runs' infeeds.
struct UnitRun {
  int u0 = 0, u1 = 0;
};

// The units at which a pop after the first starts (ascending; empty: the image in one pop). A
// run crossing a cut takes its units as one infeed from each pop, each but its last whole ring
// packets (32 units from the run's first unit), so its one consumer and wideToNarrow take them
// as they would one transfer. The cuts are those of the lowest modeled end of the last infeed
// (pops one after another, each infeed after its pop and after the infeed before it; 64 bytes a
// cycle and 8 to start, the clock's DMA rate) plus the USB time of the words they add, found
// candidate by candidate (the best pops ending at each from the best ending at an earlier one).
std::vector<int> image_pop_cuts(const std::vector<UnitRun>& runs, int units);

}  // namespace tinycoral::compiler::conv
