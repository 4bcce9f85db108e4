// The op engine's loop nest (engine_loops.h).
#include "chip/ops/engine_loops.h"

#include <algorithm>

namespace tinycoral::chip::ops {

LoopNest::LoopNest(const OpInstr& op, const EngineSpec& spec, const LoopRoles& roles)
    : op_(op), mask_(op.reduce_mask | spec.extra_reduce) {
  // Per-loop weights of the mixed-radix indices (0 for loops outside the role).
  auto weights = [&](uint8_t role) {
    std::array<uint64_t, kLoops> w{};
    uint64_t scale = 1;
    for (int k = 0; k < kLoops; ++k)
      if (in_mask(role, k)) w[k] = scale, scale *= uint64_t{op.loops[k]} + 1;
    return w;
  };
  const auto slot_w = weights(roles.slot), fill_w = weights(roles.fill),
             group_w = weights(roles.group);
  for (int k = 0; k < kLoops; ++k) {
    slot_delta_[k] = static_cast<int64_t>(slot_w[k]);
    fill_delta_[k] = static_cast<int64_t>(fill_w[k]);
    group_delta_[k] = static_cast<int64_t>(group_w[k]);
    for (int e = 0; e < k; ++e) {
      slot_delta_[k] -= static_cast<int64_t>(op.loops[e] * slot_w[e]);
      fill_delta_[k] -= static_cast<int64_t>(op.loops[e] * fill_w[e]);
      group_delta_[k] -= static_cast<int64_t>(op.loops[e] * group_w[e]);
      reset_reduced_[k] += in_mask(mask_, e) && op.loops[e] > 0;
    }
    if (op.loops[k] > 0) active_[n_active_++] = k;
    reduced_not_last_ += in_mask(mask_, k) && op.loops[k] > 0;
  }

  // Runs: when the innermost counted loop is reduced and moves no slot, fill or group, its
  // iterations share everything but their operands, and the engine hands them to the step
  // arithmetic as one run (mac_runs.h). Otherwise a run is a single step. A run spans every
  // innermost counted loop that is reduced and moves nothing (a conv's input words and taps
  // together).
  auto moves_nothing = [&](int k) {
    return slot_delta_[k] == 0 && fill_delta_[k] == 0 && group_delta_[k] == 0;
  };
  while (run_loops_ < n_active_ && in_mask(mask_, active_[run_loops_]) &&
         moves_nothing(active_[run_loops_]))
    run_length_ *= uint64_t{op.loops[active_[run_loops_++]]} + 1;
  // Batches: when the next loop out is not reduced and moves nothing either (a depthwise op's
  // positions), its runs differ only in their operands and output words. A batch gathers the
  // operands of all its runs at once and finds each FIFO row once (the runs repeat their `par`
  // walk); each run still starts, sums and emits as it would alone. The loop may move the
  // accumulator slot (a K-chunked conv's positions keep their partial sums open): run r of a
  // batch then sums into its own slot.
  k1_ = run_loops_ > 0 && n_active_ > run_loops_ ? active_[run_loops_] : -1;
  by_batches_ = k1_ >= 0 && !in_mask(mask_, k1_) && fill_delta_[k1_] == 0 &&
                group_delta_[k1_] == 0 && run_length_ <= kMaxBatchSteps;
  batch_slot_step_ = by_batches_ ? static_cast<uint64_t>(slot_delta_[k1_]) : 0;
  batch_runs_ = by_batches_ ? uint64_t{op.loops[k1_]} + 1 : 1;
  chunk_runs_ = std::min(batch_runs_, std::max<uint64_t>(1, kMaxBatchSteps / run_length_));
  first_outer_ = run_loops_ + (by_batches_ ? 1 : 0);
}

bool par_repeats_per_run(const OpTtu& t, uint64_t length, uint64_t runs) {
  const auto strides = t.strides();
  uint64_t within_run = 1, across_runs = 1;
  for (int k = 0; k < kLoops; ++k) {
    if (t.cnt[k] == 0) continue;
    const uint64_t count = uint64_t{t.cnt[k]} + 1;
    if (within_run < length) {
      within_run *= count;
      if (within_run > length) return false;
    } else if (across_runs < runs) {
      if (strides[k] != 0) return false;
      across_runs *= count;
      if (across_runs > runs) return false;
    }
  }
  return within_run == length && across_runs == runs;
}

}  // namespace tinycoral::chip::ops
