// The psum rows of an op (docs/chip_ops.md "Partial sums in wide memory"): when a reduction stops
// and resumes later in the same op (a K-chunked conv's chunks, its positions open in between), the
// chip keeps each output's partial sums in the tile's wide memory at the row its `psum` walk gives
// at that step (isa.md 2.1.3). The engine stores a run's sums there when the reduction is not done
// and reads them back when the next chunk resumes it, so a psum row that another slot or a later
// instruction needs gives a different result, as on the chip.
#pragma once

#include <cstdint>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"

namespace tinycoral::chip::ops {

class PsumRows {
 public:
  // Checks the walk when the op keeps partial sums (keeps_partial_sums): one address per main-loop
  // step, every row inside wide memory and none among the op's own `par` rows. Fails the op
  // otherwise.
  PsumRows(const OpInstr& op, OpEnv& env, const EngineSpec& spec, uint64_t steps);

  bool active() const { return active_; }
  // The 64 int32 sums of the run starting at main-loop step `step`, from / to its psum row
  // (column c at bytes 4c..4c+3, little-endian).
  void load(int32_t* sums, uint64_t step);
  void store(const int32_t* sums, uint64_t step);

 private:
  // The row of the walk's address at `step` (isa.md 2.0a), rounded down to its row: the sums are
  // one whole row, whatever the walk's lane. The engine asks in step order, so the walk only moves
  // forward, by TtuWalker::skip.
  uint8_t* row(uint64_t step);

  bool active_ = false;
  OpEnv& env_;
  TtuWalker walk_;
  uint64_t at_step_ = 0;  // the step walk_ is at
};

}  // namespace tinycoral::chip::ops
