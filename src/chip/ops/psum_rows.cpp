// The psum rows of an op (psum_rows.h).
#include "chip/ops/psum_rows.h"

#include <cstring>

namespace tinycoral::chip::ops {

PsumRows::PsumRows(const OpInstr& op, OpEnv& env, const EngineSpec& spec, uint64_t steps)
    : env_(env), walk_(op.psum) {
  if (!keeps_partial_sums(op, spec)) return;
  if (op.psum.steps() != steps)
    env.fail_op(
        cat("`psum` TTU yields ", op.psum.steps(), " addresses for ", steps, " main-loop steps"));
  const OpTtu::Extent e = op.psum.extent();
  check_wide_walk(e, env, "psum");
  const int64_t lo = e.lo & ~int64_t{3}, hi = (e.hi & ~int64_t{3}) + 3;
  // The op's own parameter rows (a FIFO window or resident weights) would be overwritten by its
  // partial sums while it still reads them.
  const OpTtu::Extent p = op.par.extent();
  const int64_t par_lo = p.lo & ~int64_t{3}, par_hi = (p.hi & ~int64_t{3}) + 3;
  if (lo <= par_hi && par_lo <= hi)
    env.fail_op(cat("psum rows at units ", lo, "..", hi, " overlap the op's `par` rows at units ",
                    par_lo, "..", par_hi));
  active_ = true;
}

uint8_t* PsumRows::row(uint64_t step) {
  if (step < at_step_)
    env_.fail_op(cat("psum row of step ", step, " asked after step ", at_step_,
                     " (the engine walks the rows forward only)"));
  walk_.skip(step - at_step_);
  at_step_ = step;
  return env_.tile().wide.data() + (walk_.address() & ~int64_t{3}) * kWideUnitBytes;
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
