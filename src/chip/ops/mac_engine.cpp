// The op unit's main-loop engine (see mac_engine.h): checks the op's walks against its loop nest
// once, then runs the nest run by run or batch by batch (engine_loops.h), the step arithmetic in
// mac_runs.h / mac_kernels.h and the output stage in engine_output.h.
#include "chip/ops/mac_engine.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "chip/ops/engine_loops.h"
#include "chip/ops/engine_output.h"
#include "chip/ops/mac_kernels.h"
#include "chip/ops/mac_runs.h"
#include "chip/ops/per_channel.h"
#include "chip/ops/psum_rows.h"

namespace tinycoral::chip::ops {
namespace {

// Bounds on input-driven work: 2^26 steps (about a second; the largest op in our test data takes
// 176,418, so a fuzzed loop nest cannot stall the simulator), and at most as many live partial-sum
// positions as wide memory has rows.
constexpr uint64_t kMaxSteps = uint64_t{1} << 26;
constexpr uint64_t kMaxSlots = kWideRows;

int position_loop(uint8_t mask) {
  for (int k = 0; k < kLoops; ++k)
    if (!in_mask(mask, k)) return k;
  return kLoops;
}

uint64_t total_steps(const OpInstr& op) {
  return mixed_count(op, [](int) { return true; });
}

// Bytes one step reads from `in`.
uint32_t in_width(const EngineSpec& spec) {
  if (spec.operand == OperandKind::kByteTimesLane ||
      spec.operand == OperandKind::kByteTimesLaneBroadcast)
    return 1;
  if (spec.operand == OperandKind::kHalfwordsTimesRow16) return 2;
  return 4;
}

// The walks an op's nest drives, checked against it once (isa.md 2.0a: addr = base + sum c_k S_k),
// so that the steps read and write tile memory directly. Fails the op otherwise.
void check_walks(const OpInstr& op, OpEnv& env, const EngineSpec& spec, bool fifo) {
  auto check_narrow = [&](const OpTtu::Extent& e, uint32_t width, const char* what) {
    if (e.lo < 0 || e.hi + width > kNarrowBytes)
      env.fail_op(cat("`", what, "` walk ", e.lo, "..", e.hi, "+", width, " leaves narrow memory (",
                      kNarrowBytes, " bytes)"));
  };
  if (spec.operand != OperandKind::kLaneOnly) check_narrow(op.in.extent(), in_width(spec), "in");
  check_narrow(op.out.extent(), 4, "out");
  if (!fifo) check_wide_walk(op.par.extent(), env, "par");
}

}  // namespace

void check_wide_walk(const OpTtu::Extent& e, OpEnv& env, const char* what) {
  if (e.lo < 0 || (e.hi & ~int64_t{3}) + 4 > int64_t{kWideUnits})
    env.fail_op(cat("`", what, "` walk ", e.lo, "..", e.hi, " leaves wide memory (", kWideUnits,
                    " units)"));
}

bool par_is_fifo(const OpInstr& op) { return (op.par_fifo & 0x1fffu) != 0; }

LoopRoles loop_roles(const OpInstr& op, const EngineSpec& spec) {
  const uint8_t mask = op.reduce_mask | spec.extra_reduce;
  const int p = spec.has_position_loop ? position_loop(mask) : 0;
  int outer_reduced = -1;
  for (int k = 0; k < kLoops; ++k)
    if (in_mask(mask, k)) outer_reduced = k;
  const auto strides = op.par.strides();
  const bool fifo = par_is_fifo(op);
  LoopRoles r;
  for (int k = 0; k < kLoops; ++k) {
    const uint8_t bit = static_cast<uint8_t>(1u << k);
    if (k > p) r.fill |= bit;
    if (!in_mask(mask, k) && ((fifo && k > p) || strides[k] != 0)) r.group |= bit;
    if (k < outer_reduced && !in_mask(mask, k)) r.slot |= bit;
  }
  return r;
}

uint32_t fifo_fill_count(const OpInstr& op, const EngineSpec& spec) {
  if (!par_is_fifo(op)) return 0;
  const uint8_t fill = loop_roles(op, spec).fill;
  return static_cast<uint32_t>(mixed_count(op, [&](int k) { return in_mask(fill, k); }));
}

// Slots (outputs open together) need their rows; a single output interrupted by its FIFO fills only
// when psum_tflags bit 7 is set (0x8C0, 0x880): bright_64x64's two-loop FC (word 2927, psum_tflags
// 0) has its walk at row 0, which holds live data (docs/chip_ops.md).
bool keeps_partial_sums(const OpInstr& op, const EngineSpec& spec) {
  if (!spec.psum_rows) return false;
  const bool flagged = (op.psum.tflags & 0x80u) != 0;
  const uint8_t mask = op.reduce_mask | spec.extra_reduce;
  const LoopRoles roles = loop_roles(op, spec);
  const bool fifo = par_is_fifo(op);
  bool slots_inside = false;
  for (int k = 0; k < kLoops; ++k) {
    if (op.loops[k] == 0) continue;
    const bool reduced = in_mask(mask, k);
    if (reduced && (slots_inside || (flagged && fifo && in_mask(roles.fill, k)))) return true;
    if (!reduced && in_mask(roles.slot, k)) slots_inside = true;
  }
  return false;
}

void run_engine(const OpInstr& op, OpEnv& env, const EngineSpec& spec) {
  const uint64_t steps = total_steps(op);
  if (steps > kMaxSteps) env.fail_op(cat("main loop of ", steps, " steps exceeds the step bound"));
  const bool uses_in = spec.operand != OperandKind::kLaneOnly;
  if (uses_in && op.in.steps() != steps)
    env.fail_op(
        cat("`in` TTU yields ", op.in.steps(), " addresses for ", steps, " main-loop steps"));
  if (op.par.steps() != steps)
    env.fail_op(
        cat("`par` TTU yields ", op.par.steps(), " addresses for ", steps, " main-loop steps"));
  if (op.rsv174 != 0)
    env.fail_op("partial last FIFO round (rsv174 != 0) is not modelled (docs/chip_ops.md)");

  const uint32_t channels = uint32_t{op.out_ch} + 1;
  const uint32_t last_channels = uint32_t{op.out_ch_last} + 1;
  if (channels > kColumns || last_channels > kColumns)
    env.fail_op(cat("out_ch ", int{op.out_ch}, " / out_ch_last ", int{op.out_ch_last},
                    " exceed 64 columns"));

  // Accumulator slots: outputs whose reduction is still open at the same time (non-reduced loops
  // inside the outermost reduced loop, e.g. the positions of a K-chunked conv, isa.md 2.1.3).
  const LoopRoles roles = loop_roles(op, spec);
  const uint64_t slots = mixed_count(op, [&](int k) { return in_mask(roles.slot, k); });
  if (slots > kMaxSlots) env.fail_op(cat(slots, " open partial sums exceed the wide memory rows"));
  const uint64_t groups = mixed_count(op, [&](int k) { return in_mask(roles.group, k); });
  const bool fifo = par_is_fifo(op);
  // Per-channel ops (cfg3 8): the common weight zero point and each column's multiplier.
  const PerChannel pc = per_channel_parameters(op, env, groups, channels, last_channels, fifo);

  // int32 accumulators: sums wrap mod 2^32 like the chip's 32-bit accumulator (isa.md 2.1.4 step
  // 1), so they give the bits a wider sum would after its wrap. A max starts below every value
  // (lanes are at least -255); a column no step updated reads as 0 at the output, the low 32 bits
  // of the "minus infinity" start.
  const bool is_max = spec.combine == Combine::kMax;
  const int32_t init = is_max ? std::numeric_limits<int32_t>::min() : 0;
  thread_local std::vector<int32_t> acc_scratch;  // reused by every op on this thread
  if (acc_scratch.size() < slots * kColumns) acc_scratch.resize(slots * kColumns);
  int32_t* const acc = acc_scratch.data();
  std::fill(acc, acc + slots * kColumns, init);

  if (spec.output == OutputKind::kSpline && !env.nlu().loaded)
    env.fail_op("LOGISTIC op before any NLU table load (0x19)");
  check_walks(op, env, spec, fifo);
  PsumRows psum(op, env, spec, steps);

  const uint32_t active = std::max(channels, last_channels);
  // Every column a step writes (the kernels touch [0, active) only; the others keep their start).
  const uint32_t touched = std::min(kColumns, active);
  // Whole words of them: an output word reads 4 columns.
  const uint32_t touched4 = std::min(kColumns, (touched + 3) & ~3u);
  // Four lanes per store: a fill with a runtime value is a scalar loop, and a memset of these few
  // bytes becomes `rep stos`, whose start-up cost is most of a depthwise run.
  auto start_sums = [&](int32_t* a) {
#if defined(__SSE2__)
    const __m128i v = _mm_set1_epi32(init);
    for (uint32_t c = 0; c < touched4; c += 4)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(a + c), v);
#else
    std::fill(a, a + touched4, init);
#endif
  };
  TtuWalker in(op.in), par(op.par);
  ParRows rows(op.par.extent(), env, fifo);
  RunSources sources{in,
                     op.in,
                     par,
                     rows,
                     env.tile().narrow.data(),
                     active,
                     op.in_zp,
                     pc.w_zp,
                     word_times_rows_kernel()};
  GroupWriter writer(op, env, spec, pc, groups, init, touched4);

  LoopNest nest(op, spec, roles);
  const uint64_t run_length = nest.run_length(), batch_runs = nest.batch_runs();
  const uint64_t chunk_runs = nest.chunk_runs();
  OperandGather gather(
      sources,
      std::min<uint64_t>(steps, nest.by_batches() ? chunk_runs * run_length : uint64_t{64}), spec);
  const bool repeating = nest.by_batches() && par_repeats_per_run(op.par, run_length, batch_runs);
  if (nest.by_batches()) gather.split_in_runs(run_length);
  // A depthwise batch (4 columns, the same rows for every run) widens its rows once.
  const FourColumnsBatchKernel four_columns_batch =
      repeating && spec.operand == OperandKind::kWordTimesRow && active == 4
          ? four_columns_batch_kernel()
          : nullptr;

  for (uint64_t step = 0; step < steps; step += run_length * batch_runs) {
    int32_t* a = &acc[nest.slot() * kColumns];
    rows.set_fill(nest.fill());
    const uint64_t group = nest.group();
    if (nest.by_batches()) {
      // The state at every run's start is the batch's (its loop is not reduced); at every run's
      // end the reduction is complete when the loops outside it say so.
      const bool starts = nest.reduction_starts(), ends = nest.run_ends_reduction();
      const uint32_t words = writer.words(group);
      const bool by_vectors = starts && ends && writer.vector_stage() &&
                              !writer.skips_after(group) && 4 * words <= touched4;
      for (uint64_t first = 0; first < batch_runs; first += chunk_runs) {
        const uint64_t runs = std::min(chunk_runs, batch_runs - first);
        gather.gather(runs * run_length, run_length, repeating);
        if (by_vectors) {
          // Every run's sums first, each in its own slice, then all the chunk's output words in
          // one walk of `out`: the same words in the same order as one emit per run.
          thread_local std::vector<int32_t> sums_scratch;
          if (sums_scratch.size() < runs * touched4) sums_scratch.resize(runs * touched4);
          int32_t* const sums = sums_scratch.data();
          for (uint64_t r = 0; r < runs; ++r) start_sums(sums + r * touched4);
          if (four_columns_batch) {
            four_columns_batch(sums, touched4, gather.x(0), gather.w(0),
                               static_cast<uint32_t>(runs), static_cast<uint32_t>(run_length),
                               op.in_zp, pc.w_zp);
          } else {
            for (uint64_t r = 0; r < runs; ++r)
              accumulate(sums + r * touched4, gather.x(r), gather.w(r), run_length, sources, spec);
          }
          writer.emit_batch(sums, words, group, runs);
        } else {
          for (uint64_t r = 0; r < runs; ++r) {
            int32_t* const ar = a + (first + r) * nest.batch_slot_step() * kColumns;
            const uint64_t run_step = step + (first + r) * run_length;
            if (starts)
              start_sums(ar);
            else if (psum.active())
              psum.load(ar, run_step);
            accumulate(ar, gather.x(r), gather.w(r), run_length, sources, spec);
            if (ends)
              writer.emit(ar, group);
            else if (psum.active())
              psum.store(ar, run_step);
          }
        }
      }
      nest.end_batch();
    } else {
      if (nest.reduction_starts())
        start_sums(a);
      else if (psum.active())
        psum.load(a, step);
      accumulate_run(a, run_length, sources, gather, spec);
      if (nest.by_runs()) nest.end_run();
      if (nest.reduction_ends())
        writer.emit(a, group);
      else if (psum.active())
        psum.store(a, step);
    }
    nest.advance();  // the read TTUs advanced with the steps
  }
  finish_per_channel(pc, env);
  TileStats& stats = env.stats();
  stats.narrow_bytes_written += 4 * writer.words_written();
  stats.macs += steps * macs_per_step(spec.operand, active);
  if (uses_in) stats.narrow_bytes_read += steps * in_width(spec);
  // Every step reads a row; FIFO lookups counted theirs already.
  stats.wide_bytes_read += (steps - rows.lookups()) * kWideRowBytes;
}

}  // namespace tinycoral::chip::ops
