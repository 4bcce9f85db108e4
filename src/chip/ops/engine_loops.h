// The op engine's loop nest (mac_engine.cpp): which main loops the engine hands to the step
// arithmetic as one run (innermost reduced loops that move nothing but the operands) or as a
// batch of runs (the next loop out, when it moves nothing but the operands and the accumulator
// slot), and the incremental bookkeeping of the loops outside them: the accumulator slot, FIFO fill
// and output group indices, and whether the reduction starts or ends (docs/chip_ops.md "FIFO
// fills and bias groups").
#pragma once

#include <array>
#include <cstdint>

#include "chip/ops/mac_engine.h"

namespace tinycoral::chip::ops {

inline bool in_mask(uint8_t mask, int k) { return (mask >> k) & 1u; }

// The product of the iteration counts of the loops `pick` selects.
template <typename Pick>
uint64_t mixed_count(const OpInstr& op, Pick pick) {
  uint64_t n = 1;
  for (int k = 0; k < kLoops; ++k)
    if (pick(k)) n *= uint64_t{op.loops[k]} + 1;
  return n;
}

class LoopNest {
 public:
  // A long batch loop goes in chunks of at most this many steps (the first depthwise layer's 257
  // positions of 20 steps).
  static constexpr uint64_t kMaxBatchSteps = 4096;

  LoopNest(const OpInstr& op, const EngineSpec& spec, const LoopRoles& roles);

  // The shape: a run is `run_length` steps (1 without runs); a batch `batch_runs` runs (1 without
  // batches), each `batch_slot_step` accumulator slots after the one before, gathered in chunks of
  // `chunk_runs` runs.
  bool by_runs() const { return run_loops_ > 0; }
  bool by_batches() const { return by_batches_; }
  uint64_t run_length() const { return run_length_; }
  uint64_t batch_runs() const { return batch_runs_; }
  uint64_t chunk_runs() const { return chunk_runs_; }
  uint64_t batch_slot_step() const { return batch_slot_step_; }

  // Where the nest is: the accumulator slot, FIFO fill and output group of the current run.
  uint64_t slot() const { return slot_index_; }
  uint64_t fill() const { return fill_index_; }
  uint64_t group() const { return group_index_; }
  // Whether the current run starts a reduction (no reduced loop past 0), and whether it ends one:
  // before end_run(), every reduced loop outside the run at its last iteration; after it, all.
  bool reduction_starts() const { return reduced_past_zero_ == 0; }
  bool run_ends_reduction() const { return reduced_not_last_ == run_loops_; }
  bool reduction_ends() const { return reduced_not_last_ == 0; }

  // The state at a run's last step: every loop of the run at its last iteration.
  void end_run() {
    for (int i = 0; i < run_loops_; ++i) counter_[active_[i]] = op_.loops[active_[i]];
    reduced_past_zero_ += run_loops_;
    reduced_not_last_ -= run_loops_;
  }
  // After a whole batch: its runs and its loop at their last iteration.
  void end_batch() {
    end_run();
    counter_[k1_] = op_.loops[k1_];
    slot_index_ += op_.loops[k1_] * batch_slot_step_;  // as if k1 had stepped
  }
  // Advances the loops outside the run (and batch) by one iteration.
  void advance() {
    for (int i = first_outer_; i < n_active_; ++i) {
      const int k = active_[i];
      if (counter_[k] < op_.loops[k]) {
        if (in_mask(mask_, k)) {
          reduced_past_zero_ += counter_[k] == 0;
          reduced_not_last_ -= counter_[k] + 1 == op_.loops[k];
        }
        ++counter_[k];
        for (int j = 0; j < i; ++j) counter_[active_[j]] = 0;
        reduced_past_zero_ -= reset_reduced_[k];
        reduced_not_last_ += reset_reduced_[k];
        slot_index_ += static_cast<uint64_t>(slot_delta_[k]);
        fill_index_ += static_cast<uint64_t>(fill_delta_[k]);
        group_index_ += static_cast<uint64_t>(group_delta_[k]);
        return;
      }
    }
  }

 private:
  const OpInstr& op_;
  uint8_t mask_;
  // When loop k advances and the loops inside it return to 0, an index changes by delta[k] (like
  // the TTUs' rewinding increments).
  std::array<int64_t, kLoops> slot_delta_{}, fill_delta_{}, group_delta_{};
  std::array<int, kLoops> reset_reduced_{};  // reduced loops inside k with more than one iteration
  int active_[kLoops] = {}, n_active_ = 0;   // the loops with more than one iteration, inner first
  int run_loops_ = 0, k1_ = -1, first_outer_ = 0;
  uint64_t run_length_ = 1;
  bool by_batches_ = false;
  uint64_t batch_slot_step_ = 0, batch_runs_ = 1, chunk_runs_ = 1;
  std::array<uint32_t, kLoops> counter_{};
  int reduced_past_zero_ = 0, reduced_not_last_ = 0;
  uint64_t slot_index_ = 0, group_index_ = 0, fill_index_ = 0;
};

// Whether a walk in batches of `runs` runs of `length` steps gives every run the first run's
// addresses: its levels (those with more than one iteration) split into ones covering exactly a run
// and ones covering exactly the batch with stride 0.
bool par_repeats_per_run(const OpTtu& t, uint64_t length, uint64_t runs);

}  // namespace tinycoral::chip::ops
