// The op unit's main-loop engine (see mac_engine.h).
#include "chip/ops/mac_engine.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "chip/ops/mac_kernels.h"
#include "chip/ops/mac_runs.h"
#include "chip/ops/nlu.h"
#include "chip/ops/output_words.h"
#include "chip/ops/per_channel.h"
#include "chip/ops/requantize.h"

namespace tinycoral::chip::ops {
namespace {

constexpr int kLoops = 8;
constexpr uint32_t kColumns = 64;
// Bounds on input-driven work: 2^26 steps (about a second; the largest op in our test data takes
// 176,418, so a fuzzed loop nest cannot stall the simulator), and at most as many live partial-sum
// positions as wide memory has rows.
constexpr uint64_t kMaxSteps = uint64_t{1} << 26;
constexpr uint64_t kMaxSlots = kWideRows;

bool in_mask(uint8_t mask, int k) { return (mask >> k) & 1u; }

int position_loop(uint8_t mask) {
  for (int k = 0; k < kLoops; ++k)
    if (!in_mask(mask, k)) return k;
  return kLoops;
}

template <typename Pick>
uint64_t mixed_count(const OpInstr& op, Pick pick) {
  uint64_t n = 1;
  for (int k = 0; k < kLoops; ++k)
    if (pick(k)) n *= uint64_t{op.loops[k]} + 1;
  return n;
}

uint64_t total_steps(const OpInstr& op) {
  return mixed_count(op, [](int) { return true; });
}

// Whether a walk in batches of `runs` runs of `length` steps gives every run the first run's
// addresses: its levels (those with more than one iteration) split into ones covering exactly a run
// and ones covering exactly the batch with stride 0.
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

}  // namespace

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

void run_engine(const OpInstr& op, OpEnv& env, const EngineSpec& spec) {
  const uint8_t mask = op.reduce_mask | spec.extra_reduce;
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
  auto is_slot_loop = [&](int k) { return in_mask(roles.slot, k); };
  auto is_fill_loop = [&](int k) { return in_mask(roles.fill, k); };
  auto is_group_loop = [&](int k) { return in_mask(roles.group, k); };
  const uint64_t slots = mixed_count(op, is_slot_loop);
  if (slots > kMaxSlots) env.fail_op(cat(slots, " open partial sums exceed the wide memory rows"));
  const uint64_t groups = mixed_count(op, is_group_loop);
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

  const OutputStage stage{op.mult, op.clamp_min, op.clamp_max, op.out_zp};
  // The output stage in SSE2 registers when its constants allow (requantize4_fast).
  const bool vector_stage =
      spec.output == OutputKind::kRequantize && requantize4_fast(stage) && pc.mults_finite;
#if defined(__SSE2__)
  const RequantizeConstants constants(stage);
  const __m128i offset = _mm_set1_epi32(op.offset);
#else
  (void)vector_stage;
#endif
  if (spec.output == OutputKind::kSpline && !env.nlu().loaded)
    env.fail_op("LOGISTIC op before any NLU table load (0x19)");

  // Memory extents are checked once for the whole walk (isa.md 2.0a: addr = base + sum c_k S_k),
  // so the steps read and write tile memory directly; statistics are added in bulk.
  uint32_t in_width = 4;
  if (spec.operand == OperandKind::kByteTimesLane ||
      spec.operand == OperandKind::kByteTimesLaneBroadcast)
    in_width = 1;
  if (spec.operand == OperandKind::kHalfwordsTimesRow16) in_width = 2;
  auto check_narrow = [&](const OpTtu::Extent& e, uint32_t width, const char* what) {
    if (e.lo < 0 || e.hi + width > kNarrowBytes)
      env.fail_op(cat("`", what, "` walk ", e.lo, "..", e.hi, "+", width, " leaves narrow memory (",
                      kNarrowBytes, " bytes)"));
  };
  if (uses_in) check_narrow(op.in.extent(), in_width, "in");
  check_narrow(op.out.extent(), 4, "out");
  const OpTtu::Extent par_extent = op.par.extent();
  if (!fifo && (par_extent.lo < 0 ||
                (par_extent.hi & ~int64_t{3}) * kWideUnitBytes + kWideRowBytes > kWideBytes))
    env.fail_op(cat("`par` walk ", par_extent.lo, "..", par_extent.hi, " leaves wide memory (",
                    kWideUnits, " units)"));
  uint8_t* narrow_out = env.tile().narrow.data();
  const uint8_t* bias_bytes = env.tile().bias_store.data();

  TtuWalker in(op.in), par(op.par), out(op.out);
  uint64_t out_words_left = op.out.steps();
  std::array<uint32_t, 8> counter{};

  // Per-loop weights of the mixed-radix indices (0 for loops outside the role).
  auto weights = [&](auto pick) {
    std::array<uint64_t, 8> w{};
    uint64_t scale = 1;
    for (int k = 0; k < kLoops; ++k)
      if (pick(k)) w[k] = scale, scale *= uint64_t{op.loops[k]} + 1;
    return w;
  };
  const auto slot_w = weights(is_slot_loop), fill_w = weights(is_fill_loop),
             group_w = weights(is_group_loop);

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
  ParRows rows(par_extent, env, fifo);
  RunSources sources{in,
                     op.in,
                     par,
                     rows,
                     env.tile().narrow.data(),
                     active,
                     op.in_zp,
                     pc.w_zp,
                     word_times_rows_kernel()};

  // Output words per group (the last one may differ: out_last_*), their biases checked once for
  // every group.
  const uint32_t full_words = (channels + 3) / 4;
  uint32_t last_words = (last_channels + 3) / 4, last_skip = 0;
  if (op.out_last_mode != 0) {
    last_words = op.out_last_cnt + 1;
    last_skip = op.out_last_skip;
  }
  if (last_words > kColumns / 4)
    env.fail_op(cat("output group of ", last_words, " words exceeds the 64 columns"));
  if (op.cfg4) {
    const uint64_t at = kBiasStoreBase + 4 * (groups - 1) * channels;
    uint64_t end = at + 16 * last_words;
    if (groups > 1) end = std::max(end, at - 4 * channels + 16 * full_words);
    if (end > kBiasStoreBytes)
      env.fail_op(cat("bias store access ", kBiasStoreBase, "..", end, " outside ", kBiasStoreBytes,
                      " bytes"));
  }
  uint64_t words_written = 0;
#if defined(__SSE2__)
  // One output word on the vector path: accumulator + bias + offset in int32 lanes (the 32-bit wrap
  // of the chip's accumulator, isa.md 2.1.4 step 1, is the lanes' own), then the output stage.
  auto write_word = [&](const int32_t* a, const uint8_t* bias, const uint8_t* mults, uint8_t* dst) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    if (is_max) v = _mm_andnot_si128(_mm_cmpeq_epi32(v, _mm_set1_epi32(init)), v);
    if (bias) v = _mm_add_epi32(v, _mm_loadu_si128(reinterpret_cast<const __m128i*>(bias)));
    const __m128 mult =
        mults ? _mm_loadu_ps(reinterpret_cast<const float*>(mults)) : constants.mult;
    const int32_t bytes = requantize4_sse(_mm_add_epi32(v, offset), constants, mult);
    std::memcpy(dst, &bytes, 4);
  };
#endif
  auto emit = [&](const int32_t* a, uint64_t group) {
    const bool last = group + 1 == groups;
    const uint32_t words = last ? last_words : full_words;
    if (out_words_left < words) env.fail_op("`out` TTU exhausted before the last output word");
    out_words_left -= words;
    words_written += words;
    const uint8_t* biases = op.cfg4 ? bias_bytes + kBiasStoreBase + 4 * group * channels : nullptr;
    const uint8_t* mults = pc.mults ? pc.mults + 4 * group * channels : nullptr;
    for (uint32_t w = 0; w < words; ++w) {
      uint8_t* dst = narrow_out + out.address();
      out.next();
#if defined(__SSE2__)
      if (vector_stage) {
        write_word(a + 4 * w, biases ? biases + 16 * w : nullptr, mults ? mults + 16 * w : nullptr,
                   dst);
        continue;
      }
#endif
      uint8_t bytes[4];
      int32_t acc32[4];
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t c = 4 * w + b;
        int64_t value = is_max && a[c] == init ? 0 : a[c];
        if (biases) {
          int32_t bias;
          std::memcpy(&bias, biases + 4 * c, 4);
          value += bias;
        }
        value += op.offset;
        // The accumulator is 32 bits wide on the chip: wrap like it (isa.md 2.1.4 step 1).
        acc32[b] = static_cast<int32_t>(static_cast<uint32_t>(value));
      }
      OutputStage column_stage[4] = {stage, stage, stage, stage};
      if (mults)
        for (uint32_t b = 0; b < 4; ++b)
          std::memcpy(&column_stage[b].mult, mults + 16 * w + 4 * b, 4);
      for (uint32_t b = 0; b < 4; ++b)
        bytes[b] = spec.output == OutputKind::kSpline
                       ? to_output_byte(
                             evaluate_spline(env.nlu(), scale_and_clamp(acc32[b], column_stage[b])),
                             op.out_zp)
                       : requantize(acc32[b], column_stage[b]);
      std::memcpy(dst, bytes, 4);
    }
    if (last)
      for (uint32_t k = 0; k < last_skip && out_words_left > 0; ++k, --out_words_left) out.next();
  };

  // The output words of a batch's runs (sums of run r at r * touched4), `words` per run: their
  // addresses in one walk of `out`, then the output stage over all of them (output_words.h).
  const OutputWordsKernel output_words = output_words_kernel();
  auto write_batch = [&](const int32_t* sums, uint32_t words, uint64_t group, uint64_t total) {
    thread_local std::vector<int64_t> at_scratch;
    if (at_scratch.size() < total) at_scratch.resize(total);
    out.take(at_scratch.data(), total);
    OutputWords o;
    o.sums = sums;
    o.stride = touched4;
    o.words = words;
    o.biases = op.cfg4 ? bias_bytes + kBiasStoreBase + 4 * group * channels : nullptr;
    o.mults = pc.mults ? pc.mults + 4 * group * channels : nullptr;
    o.offset = op.offset;
    o.is_max = is_max;
    o.empty = init;
    output_words(o, stage, narrow_out, at_scratch.data(), total);
  };

  // Incremental bookkeeping, like the TTUs' rewinding increments: when loop k advances and the
  // loops inside it return to 0, an index changes by delta[k]; the reduction starts when no reduced
  // loop is past 0 and ends when every reduced loop is at its last iteration.
  std::array<int64_t, 8> slot_delta{}, fill_delta{}, group_delta{};
  std::array<int, 8> reset_reduced{};  // reduced loops inside k with more than one iteration
  int active_loops[kLoops], n_active = 0, reduced_not_last = 0;
  for (int k = 0; k < kLoops; ++k) {
    slot_delta[k] = static_cast<int64_t>(slot_w[k]);
    fill_delta[k] = static_cast<int64_t>(fill_w[k]);
    group_delta[k] = static_cast<int64_t>(group_w[k]);
    for (int e = 0; e < k; ++e) {
      slot_delta[k] -= static_cast<int64_t>(op.loops[e] * slot_w[e]);
      fill_delta[k] -= static_cast<int64_t>(op.loops[e] * fill_w[e]);
      group_delta[k] -= static_cast<int64_t>(op.loops[e] * group_w[e]);
      reset_reduced[k] += in_mask(mask, e) && op.loops[e] > 0;
    }
    if (op.loops[k] > 0) active_loops[n_active++] = k;
    reduced_not_last += in_mask(mask, k) && op.loops[k] > 0;
  }

  // Runs: when the innermost counted loop is reduced and moves no slot, fill or group, its
  // iterations share everything but their operands, and the engine hands them to the step
  // arithmetic as one run (mac_runs.h). Otherwise a run is a single step.
  auto moves_nothing = [&](int k) {
    return slot_delta[k] == 0 && fill_delta[k] == 0 && group_delta[k] == 0;
  };
  int reduced_past_zero = 0;
  // A run spans every innermost counted loop that is reduced and moves nothing (a conv's input
  // words and taps together).
  int run_loops = 0;
  uint64_t run_length = 1;
  while (run_loops < n_active && in_mask(mask, active_loops[run_loops]) &&
         moves_nothing(active_loops[run_loops]))
    run_length *= uint64_t{op.loops[active_loops[run_loops++]]} + 1;
  const bool by_runs = run_loops > 0;
  // The state at a run's last step: every loop of the run at its last iteration.
  auto end_run = [&] {
    for (int i = 0; i < run_loops; ++i) counter[active_loops[i]] = op.loops[active_loops[i]];
    reduced_past_zero += run_loops;
    reduced_not_last -= run_loops;
  };
  // Batches: when the next loop out is not reduced and moves nothing either (a depthwise op's
  // positions), its runs differ only in their operands and output words. A batch gathers the
  // operands of all its runs at once and finds each FIFO row once (the runs repeat their `par`
  // walk); each run still starts, sums and emits as it would alone. A long loop (the first
  // depthwise layer's 257 positions of 20 steps) goes in chunks of at most kMaxBatchSteps steps.
  constexpr uint64_t kMaxBatchSteps = 4096;
  const int k1 = by_runs && n_active > run_loops ? active_loops[run_loops] : -1;
  // The loop may move the accumulator slot (a K-chunked conv's positions keep their partial sums
  // open): run r of a batch then sums into its own slot.
  const bool by_batches = k1 >= 0 && !in_mask(mask, k1) && fill_delta[k1] == 0 &&
                          group_delta[k1] == 0 && run_length <= kMaxBatchSteps;
  const uint64_t batch_slot_step = by_batches ? static_cast<uint64_t>(slot_delta[k1]) : 0;
  const uint64_t batch_runs = by_batches ? uint64_t{op.loops[k1]} + 1 : 1;
  const uint64_t chunk_runs =
      std::min(batch_runs, std::max<uint64_t>(1, kMaxBatchSteps / run_length));
  const int first_outer = run_loops + (by_batches ? 1 : 0);
  OperandGather gather(
      sources, std::min<uint64_t>(steps, by_batches ? chunk_runs * run_length : uint64_t{64}),
      spec);
  const bool repeating = by_batches && par_repeats_per_run(op.par, run_length, batch_runs);
  if (by_batches) gather.split_in_runs(run_length);
  // A depthwise batch (4 columns, the same rows for every run) widens its rows once.
  const FourColumnsBatchKernel four_columns_batch =
      repeating && spec.operand == OperandKind::kWordTimesRow && active == 4
          ? four_columns_batch_kernel()
          : nullptr;

  uint64_t slot_index = 0, group_index = 0, fill_index = 0;
  for (uint64_t step = 0; step < steps; step += run_length * batch_runs) {
    int32_t* a = &acc[slot_index * kColumns];
    rows.set_fill(fill_index);
    if (by_batches) {
      // The state at every run's start is the batch's (k1 is not reduced); at every run's end the
      // reduction is complete when the loops outside k1 say so.
      const bool starts = reduced_past_zero == 0, ends = reduced_not_last == run_loops;
      const bool last_group = group_index + 1 == groups;
      const uint32_t words = last_group ? last_words : full_words;
      const bool by_vectors =
          starts && ends && vector_stage && !(last_group && last_skip > 0) && 4 * words <= touched4;
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
          const uint64_t total = runs * words;
          if (out_words_left < total)
            env.fail_op("`out` TTU exhausted before the last output word");
          out_words_left -= total;
          words_written += total;
          write_batch(sums, words, group_index, total);
        } else {
          for (uint64_t r = 0; r < runs; ++r) {
            int32_t* const ar = a + (first + r) * batch_slot_step * kColumns;
            if (starts) start_sums(ar);
            accumulate(ar, gather.x(r), gather.w(r), run_length, sources, spec);
            if (ends) emit(ar, group_index);
          }
        }
      }
      end_run();
      counter[k1] = op.loops[k1];
      slot_index += op.loops[k1] * batch_slot_step;  // as if k1 had stepped
    } else {
      if (reduced_past_zero == 0) start_sums(a);
      accumulate_run(a, run_length, sources, gather, spec);
      if (by_runs) end_run();
      if (reduced_not_last == 0) emit(a, group_index);
    }

    // Advance the main loop (the read TTUs advanced with the steps).
    for (int i = first_outer; i < n_active; ++i) {
      const int k = active_loops[i];
      if (counter[k] < op.loops[k]) {
        if (in_mask(mask, k)) {
          reduced_past_zero += counter[k] == 0;
          reduced_not_last -= counter[k] + 1 == op.loops[k];
        }
        ++counter[k];
        for (int j = 0; j < i; ++j) counter[active_loops[j]] = 0;
        reduced_past_zero -= reset_reduced[k];
        reduced_not_last += reset_reduced[k];
        slot_index += static_cast<uint64_t>(slot_delta[k]);
        fill_index += static_cast<uint64_t>(fill_delta[k]);
        group_index += static_cast<uint64_t>(group_delta[k]);
        break;
      }
    }
  }
  finish_per_channel(pc, env);
  TileStats& stats = env.stats();
  stats.narrow_bytes_written += 4 * words_written;
  stats.macs += steps * macs_per_step(spec.operand, active);
  if (uses_in) stats.narrow_bytes_read += steps * in_width;
  // Every step reads a row; FIFO lookups counted theirs already.
  stats.wide_bytes_read += (steps - rows.lookups()) * kWideRowBytes;
}

}  // namespace tinycoral::chip::ops
