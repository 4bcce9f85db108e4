// The placement search of the conv chain generator: chooses a chain's stages, the tiles of each
// (row bands), and where each stage's parameters stay (resident side by side on shared tiles, a
// classifier split by output groups, or streamed in segments), by a model of the chip's clock
// (docs/compiler.md "Whole MobileNets").
#pragma once

#include <algorithm>
#include <functional>

#include "compiler/conv_plan.h"

namespace tinycoral::compiler::conv {

// Modeled cycles of one op of `macs` weight-byte products over `steps` loop steps: the clock's
// rates (src/chip/clock.h), 72 weight bytes and 4 loop steps a cycle, the slower bounds.
inline double op_cycles(double macs, double steps) { return std::max(macs / 72, steps / 4); }

// Bytes one inference of a layout sends over USB besides its input and output: the execution
// program's instructions and the parameter rows it streams (the code generator knows them).
using ProgramBytes = std::function<double(const Layout&)>;

// The layout the programs are generated from: the stages that fit, their parameters resident
// across tiles when they can be, and, when every parameter can stay, the candidate of least
// modeled time (ops' cycles plus `program_bytes` at the link's rate). `exact_bytes`: the bytes of
// the program as generated (its hand-overs in the schedule of fewest words, which the search's
// `program_bytes` leaves out for speed), for the last search (widening with FIFOs).
Layout make_layout(const ConvChain& chain, const ProgramBytes& program_bytes,
                   const ProgramBytes& exact_bytes);

}  // namespace tinycoral::compiler::conv
