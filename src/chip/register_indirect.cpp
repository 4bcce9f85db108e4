// Register-indirect tile instructions: evidence and reading in docs/chip.md "Register-indirect tile
// instructions" (the Keras LSTM's row gather, words 890 and 894).
#include "chip/register_indirect.h"

#include <memory>
#include <variant>

#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::chip {
namespace {

const RegisterIndirect* indirect_of(const ProgramItem& item) {
  if (const auto* r = std::get_if<RingInstr>(&item.decoded)) return &r->indirect;
  if (const auto* w = std::get_if<WideNarrowInstr>(&item.decoded)) return &w->indirect;
  return nullptr;
}

}  // namespace

uint16_t dispatch_tile_mask(const ProgramItem& item, uint16_t encoded, const ScalarState& scalar) {
  const RegisterIndirect* r = indirect_of(item);
  if (r == nullptr || !r->on) return encoded;
  return static_cast<uint16_t>(scalar.regs[r->mask_reg] & 0xffff);
}

int64_t indirect_narrow_shift(const ProgramItem& item, const ScalarState& scalar) {
  const RegisterIndirect* r = indirect_of(item);
  if (r == nullptr || !r->on || r->addr_reg == 0) return 0;
  if (item.opcode != isa::kNarrowToWide)
    fail("word ", item.word_offset, ": a register-indirect address on opcode ",
         static_cast<int>(item.opcode), " is not modelled (only narrowToWide's narrow address)");
  const auto& w = std::get<WideNarrowInstr>(item.decoded);
  return int64_t{scalar.regs[r->addr_reg]} - int64_t{w.narrow_addr};
}

std::vector<Access> shifted_narrow_footprint(const std::vector<Access>& footprint, int64_t words) {
  std::vector<Access> out = footprint;
  const int64_t bytes = 4 * words;
  for (Access& a : out) {
    if (a.space != Space::kNarrow) continue;
    a.lo += bytes;
    a.hi += bytes;
    if (a.runs) {
      auto runs = std::make_shared<std::vector<std::pair<int64_t, int64_t>>>(*a.runs);
      for (auto& [lo, hi] : *runs) {
        lo += bytes;
        hi += bytes;
      }
      a.runs = std::move(runs);
    }
  }
  return out;
}

}  // namespace tinycoral::chip
