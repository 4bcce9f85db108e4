// The instructions that send a compiled program's output to the host: the narrowToWides into the
// tiles' ring rows and the outfeeds after the program's last op. Shared by the output-fills tests
// (a small split classifier, v2's).
#pragma once

#include <cstddef>
#include <vector>

#include "isa/isa.h"

namespace tinycoral::compiler::testing {

struct OutputSends {
  int fills = 0, outfeeds = 0;
  bool fills_first = true;  // every narrowToWide ahead of the first outfeed
};

inline OutputSends output_sends(const std::vector<isa::Instruction>& program) {
  size_t last_op = 0;
  for (size_t k = 0; k < program.size(); ++k)
    if (program[k].opcode() == isa::kTensorOp) last_op = k;
  OutputSends s;
  for (size_t k = last_op; k < program.size(); ++k) {
    if (program[k].opcode() == isa::kNarrowToWide) {
      ++s.fills;
      if (s.outfeeds > 0) s.fills_first = false;
    }
    s.outfeeds += program[k].opcode() == isa::kOutfeed;
  }
  return s;
}

}  // namespace tinycoral::compiler::testing
