// The op functions the convolution and FULLY_CONNECTED classes share (conv.cpp,
// fully_connected.cpp; gen2021's one-position DEPTHWISE_CONV_2D class among them): every step is
// one input word times one 256-byte weight row, and the partial sums of interrupted reductions go
// to the psum rows (docs/chip_ops.md "Partial sums in wide memory"). All of these classes run the
// same engine spec; only their identifying fields differ.
#pragma once

#include <cstdint>

#include "chip/tile.h"

namespace tinycoral::chip::ops {

namespace word_times_row {
void run(const OpInstr& op, OpEnv& env);
uint32_t fills(const OpInstr& op);
bool keeps_psum(const OpInstr& op);
void run_no_position(const OpInstr& op, OpEnv& env);
uint32_t fills_no_position(const OpInstr& op);
bool keeps_psum_no_position(const OpInstr& op);
}  // namespace word_times_row

// With a position loop that re-reads one FIFO fill.
constexpr OpClass word_times_row_class(const char* name) {
  return {name, word_times_row::run, word_times_row::fills, word_times_row::keeps_psum};
}
// Without a position loop (gen2021's cfg0 0x63 ops, a FULLY_CONNECTED reducing over two loops):
// every loop outside loop0 moves the weight FIFO to its next fill.
constexpr OpClass word_times_row_class_no_position(const char* name) {
  return {name, word_times_row::run_no_position, word_times_row::fills_no_position,
          word_times_row::keeps_psum_no_position};
}

}  // namespace tinycoral::chip::ops
