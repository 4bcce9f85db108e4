// Test helper: the hand-overs in a compiled chain's program between two of its layers, told apart
// by their ops' loop0 (the reduction length): the ring producers that send to tiles and the
// wideToNarrows between an op of the one layer and the next op, of the other.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/isa.h"

namespace tinycoral::compiler::testing {

// A ring producer sending to tiles (not to the host).
inline bool sends_to_tiles(const isa::Instruction& in) {
  return in.opcode() == isa::kRingProducer && (in.value("dest") & 0xffff) != 0;
}

struct HandOver {
  int producers = 0;             // ring producers to tiles,
  int weight_runs = 0;           // of which FIFO weight runs (to_c1: into the ops' weight FIFOs)
  std::vector<size_t> receives;  // the wideToNarrows' indices in the program
};

// Every place where an op with loop0 `from` is followed by one with loop0 `to`, in program order.
inline std::vector<HandOver> hand_overs(const std::vector<isa::Instruction>& program, int64_t from,
                                        int64_t to) {
  std::vector<HandOver> found;
  int64_t before = -1;  // the previous op's loop0
  HandOver between;
  for (size_t k = 0; k < program.size(); ++k) {
    const isa::Instruction& in = program[k];
    if (in.opcode() == isa::kTensorOp) {
      if (before == from && in.value("loop0") == to) found.push_back(between);
      before = in.value("loop0");
      between = {};
    }
    between.producers += sends_to_tiles(in);
    between.weight_runs += sends_to_tiles(in) && in.value("to_c1") != 0;
    if (in.opcode() == isa::kWideToNarrow) between.receives.push_back(k);
  }
  return found;
}

}  // namespace tinycoral::compiler::testing
