// Per-row FIFO fills under a partial last round (fifo_rounds.h).
#include "chip/ops/fifo_rounds.h"

#include <algorithm>

namespace tinycoral::chip::ops {

uint32_t fifo_fills_of_row(const OpInstr& op, uint32_t fills, int64_t row) {
  const bool partial = (op.rsv174 >> 14) & 1u;
  if (!partial || fills == 0) return fills;
  const uint32_t last_steps = std::min(op.rsv174 & 0x3fffu, op.loops[0]) + 1;
  // The first round's rows in the order loop0 reads them: the last round reads its first
  // `last_steps` steps (the par walk of loop0 restarts at the same rows every round).
  TtuWalker par(op.par);
  for (uint32_t s = 0; s <= op.loops[0]; ++s) {
    if (par.address() / 4 == row) return s < last_steps ? fills : fills - 1;
    par.next();
  }
  return fills;
}

}  // namespace tinycoral::chip::ops
