// One program per 64-position group for the chip path's programs that write a position's key
// column (compiler/fc_column_write.h) or stream the key's groups whole (no column marks then) and,
// with the value cache, its v~ weight row (docs/llm.md
// "One program per layer and group"): the generator marks the fields where the position enters
// (compiler::FcScoresProgram's marks, FfnChainPrograms::marks), and each run rewrites them to its
// own position (runtime::Program::patch_field) instead of generating the program again.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "isa/relocate.h"
#include "runtime/program.h"

namespace tinycoral::llm {

struct GroupProgram {
  std::shared_ptr<runtime::Program> program;
  int made_at = 0;  // the position it was generated at (its marks' values are that position's)
  // Each head group's scatter n.addr: narrow word + column, +1 a position.
  std::vector<isa::EncodedField> columns;
  // Each v~ weight row's wide address: +4 units every 4 positions (fc_weight_rows' kq = pos / 4);
  // with the chip's value write (compiler::FcValueWrite) the transposing writes' w.addr, the same.
  std::vector<isa::EncodedField> rows;
  // The chip's value write: each group's landing n.addr, +16 words a position within the quad
  // (compiler::fc_value_slot_word).
  std::vector<isa::EncodedField> landings;
  // Its instruction bytes by part (compiler::FfnChainPrograms::parts), for ChipPathStats.
  std::vector<std::pair<std::string, uint64_t>> parts;
};

// g's program with its marked fields rewritten to `pos` (in the 64-position group of made_at):
// the bytes of the program generated at `pos`.
const std::shared_ptr<runtime::Program>& at_position(const GroupProgram& g, int pos);

}  // namespace tinycoral::llm
