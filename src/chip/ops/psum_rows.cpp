// The psum rows of an op (psum_rows.h).
#include "chip/ops/psum_rows.h"

#include <cstring>

namespace tinycoral::chip::ops {

PsumRows::PsumRows(const OpInstr& op, OpEnv& env, const EngineSpec& spec, uint64_t steps)
    : env_(env) {
  if (!keeps_partial_sums(op, spec)) return;
  if (op.psum.steps() != steps)
    env.fail_op(
        cat("`psum` TTU yields ", op.psum.steps(), " addresses for ", steps, " main-loop steps"));
  const OpTtu::Extent e = op.psum.extent();
  const int64_t lo = e.lo & ~int64_t{3}, hi = (e.hi & ~int64_t{3}) + 3;
  if (e.lo < 0 || hi >= kWideUnits)
    env.fail_op(
        cat("`psum` walk ", e.lo, "..", e.hi, " leaves wide memory (", kWideUnits, " units)"));
  // The op's own parameter rows (a FIFO window or resident weights) would be overwritten by its
  // partial sums while it still reads them.
  const OpTtu::Extent p = op.par.extent();
  const int64_t par_lo = p.lo & ~int64_t{3}, par_hi = (p.hi & ~int64_t{3}) + 3;
  if (lo <= par_hi && par_lo <= hi)
    env.fail_op(cat("psum rows at units ", lo, "..", hi, " overlap the op's `par` rows at units ",
                    par_lo, "..", par_hi));
  active_ = true;
  wide_ = env.tile().wide.data();
  base_ = op.psum.base;
  const auto strides = op.psum.strides();
  for (int k = 0; k < kLoops; ++k)
    if (op.psum.cnt[k] != 0) {
      count_[levels_] = uint64_t{op.psum.cnt[k]} + 1;
      stride_[levels_++] = strides[k];
    }
}

void PsumRows::digits_of(uint64_t n, uint64_t* digits) const {
  for (int i = 0; i < levels_; ++i) {
    digits[i] = n % count_[i];
    n /= count_[i];
  }
}

// The walk's address at step `step` (isa.md 2.0a: base + sum of counter x stride), rounded down to
// its row: the sums are one whole row, whatever the walk's lane.
uint8_t* PsumRows::row(uint64_t step) {
  if (step < at_step_) {  // (never from the engine)
    digits_of(step, counter_);
  } else if (step != at_step_) {
    if (step - at_step_ != delta_) {
      delta_ = step - at_step_;
      digits_of(delta_, delta_digits_);
    }
    uint64_t carry = 0;
    for (int i = 0; i < levels_; ++i) {
      counter_[i] += delta_digits_[i] + carry;
      carry = counter_[i] >= count_[i];
      if (carry) counter_[i] -= count_[i];
    }
  }
  at_step_ = step;
  int64_t unit = base_;
  for (int i = 0; i < levels_; ++i) unit += static_cast<int64_t>(counter_[i]) * stride_[i];
  return wide_ + (unit & ~int64_t{3}) * kWideUnitBytes;
}

void PsumRows::load(int32_t* sums, uint64_t step) {
  std::memcpy(sums, row(step), kWideRowBytes);
  env_.stats().wide_bytes_read += kWideRowBytes;
}

void PsumRows::store(const int32_t* sums, uint64_t step) {
  std::memcpy(row(step), sums, kWideRowBytes);
  env_.stats().wide_bytes_written += kWideRowBytes;
}

}  // namespace tinycoral::chip::ops
