// Register-indirect tile instructions (program.h RegisterIndirect): the scalar core supplies their
// tile mask, and a narrowToWide's narrow address, from its registers when it dispatches them.
#pragma once

#include <cstdint>
#include <vector>

#include "chip/machine.h"
#include "chip/program.h"

namespace tinycoral::chip {

// The tiles `item` runs on: its own mask, or the mask register's low 16 bits.
uint16_t dispatch_tile_mask(const ProgramItem& item, uint16_t encoded, const ScalarState& scalar);

// Words to add to `item`'s narrow address: the address register minus the encoded address for a
// register-indirect narrowToWide (0 otherwise). Throws for indirect addresses of other opcodes,
// which no program shows.
int64_t indirect_narrow_shift(const ProgramItem& item, const ScalarState& scalar);

// `footprint` with its narrow-memory accesses moved by `words` words.
std::vector<Access> shifted_narrow_footprint(const std::vector<Access>& footprint, int64_t words);

}  // namespace tinycoral::chip
