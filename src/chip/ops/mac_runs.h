// What the op engine does within one run of main-loop steps that share their accumulators, their
// FIFO fill and their output group (the innermost loop, when it is reduced: a depthwise tap loop, a
// conv's input words): walk `in` and `par` and combine each operand pair into the accumulators,
// with nothing else in the loop. The engine (mac_engine.cpp) keeps the loop nest's bookkeeping
// outside, once per run instead of once per step; results are exactly those of one step at a time.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <optional>
#include <vector>

#include "chip/ops/mac_engine.h"
#include "chip/ops/mac_kernels.h"
#include "chip/tile.h"

namespace tinycoral::chip::ops {

// The `par` row of a step: resident rows straight from wide memory (the walk's extent was checked
// once), FIFO rows from the current fill, each looked up once per fill (an op re-reads them at
// every position).
class ParRows {
 public:
  ParRows(const OpTtu::Extent& par, OpEnv& env, bool fifo)
      : env_(env), wide_(env.tile().wide.data()), fifo_(fifo) {
    first_row_ = par.lo >> 2;
    const int64_t last_row = par.hi >> 2;
    cache_ = fifo && last_row - first_row_ < static_cast<int64_t>(kWideRows);
    if (!cache_) return;
    // The table is reused by every op on this thread; an entry counts only for the op (generation)
    // and fill it was looked up for, so nothing is cleared between fills or ops.
    thread_local std::vector<Cached> table;
    thread_local uint64_t generation = 0;
    const auto span = static_cast<size_t>(last_row - first_row_ + 1);
    if (table.size() < span) table.resize(span);
    rows_ = table.data();
    generation_ = ++generation;
  }
  void set_fill(uint64_t fill) { fill_ = fill; }
  // Lookups that went to the tile's FIFO (they count their wide bytes there).
  uint64_t lookups() const { return lookups_; }

  const uint8_t* resident_row(int64_t unit) const {
    return wide_ + (unit & ~int64_t{3}) * kWideUnitBytes;
  }
  const uint8_t* row(int64_t unit) {
    const int64_t row_unit = unit & ~int64_t{3};
    if (!fifo_) return wide_ + row_unit * kWideUnitBytes;
    if (!cache_ || row_unit < 0) return lookup(row_unit);
    Cached& c = rows_[static_cast<size_t>((row_unit >> 2) - first_row_)];
    if (c.fill != fill_ || c.generation != generation_) {
      c.bytes = lookup(row_unit);
      c.fill = fill_;
      c.generation = generation_;
    }
    return c.bytes;
  }

 private:
  const uint8_t* lookup(int64_t row_unit) {
    ++lookups_;
    return env_.par_fifo_row(static_cast<uint32_t>(fill_), row_unit);
  }
  struct Cached {
    uint64_t generation = 0, fill = 0;
    const uint8_t* bytes = nullptr;
  };
  OpEnv& env_;
  const uint8_t* wide_;
  bool fifo_, cache_ = false;
  int64_t first_row_ = 0;
  uint64_t fill_ = 0, lookups_ = 0, generation_ = 0;
  Cached* rows_ = nullptr;
};

// Everything a run reads: the walkers stay positioned for the next run.
struct RunSources {
  TtuWalker& in;
  const OpTtu& in_ttu;
  TtuWalker& par;
  ParRows& rows;
  const uint8_t* narrow;
  uint32_t active;  // columns in use (the wider of the group sizes)
  int32_t in_zp, w_zp;
  WordTimesRowsKernel kernel;
};

inline void add_wrapping(int32_t& a, int64_t v) {
  a = static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(v));
}

// A walk whose innermost levels (those with more than one iteration) cover exactly `length` steps
// splits into runs that repeat one pattern of offsets from each run's first address; the run starts
// are the walk of the outer levels alone (`outer`: the same strides, its own rewinding increments,
// isa.md 2.0a). False when the levels do not split there.
inline bool split_walk(const OpTtu& t, uint64_t length, OpTtu& outer) {
  const auto strides = t.strides();
  uint64_t inner = 1;
  int first_outer = 8;
  for (int k = 0; k < 8; ++k) {
    if (t.cnt[k] == 0) continue;
    if (inner == length) {
      first_outer = k;
      break;
    }
    inner *= uint64_t{t.cnt[k]} + 1;
    if (inner > length) return false;
  }
  if (inner != length) return false;
  outer = OpTtu{};
  outer.base = t.base;
  int64_t rewound = 0;  // sum over the outer levels inside k of cnt_e * S_e
  for (int k = first_outer; k < 8; ++k) {
    outer.cnt[k] = t.cnt[k];
    outer.inc[k] = strides[k] - rewound;
    rewound += static_cast<int64_t>(t.cnt[k]) * strides[k];
  }
  return true;
}

// The operands of a stretch of steps, gathered ahead: each step's input (a pointer into narrow
// memory) and its `par` bytes (the row, or for the lane kinds the row plus the lane `unit % 4`).
// In batches (mac_engine.cpp) the steps come in runs of `period`; when the `par` walk repeats the
// first run's addresses in every run (`repeating`: a depthwise op's taps at every position), only
// the first run's rows are looked up and every run reads them.
class OperandGather {
 public:
  OperandGather(RunSources& s, uint64_t capacity, const EngineSpec& spec)
      : s_(s),
        uses_in_(spec.operand != OperandKind::kLaneOnly),
        lanes_(spec.operand != OperandKind::kWordTimesRow &&
               spec.operand != OperandKind::kHalfwordsTimesRow16),
        capacity_(capacity) {
    // Scratch reused by every op on this thread: no allocation or clearing per op (every entry a
    // step reads was written by gather first).
    thread_local std::vector<const uint8_t*> x_scratch, w_scratch;
    if (x_scratch.size() < capacity) x_scratch.resize(capacity);
    if (w_scratch.size() < capacity) w_scratch.resize(capacity);
    x_ = x_scratch.data();
    w_ = w_scratch.data();
  }
  uint64_t capacity() const { return capacity_; }
  // Batches of runs of `length` steps (mac_engine.cpp): when the `in` walk splits into runs
  // (split_walk), each run's input pointers are its start plus one offset pattern, found once
  // here, and the run starts come from the outer levels' walk. Only for ops that run entirely in
  // batches: the `in` walker itself no longer moves.
  void split_in_runs(uint64_t length) {
    if (!uses_in_ || length > kMaxPattern || !split_walk(s_.in_ttu, length, outer_in_)) return;
    TtuWalker first(s_.in_ttu);
    for (uint64_t t = 0; t < length; ++t, first.next())
      in_pattern_[t] = first.address() - s_.in_ttu.base;
    outer_walker_.emplace(outer_in_);
    pattern_length_ = length;
  }
  void gather(uint64_t n, uint64_t period = 0, bool repeating = false) {
    if (uses_in_ && pattern_length_ != 0 && period == pattern_length_) {
      const uint8_t* const narrow = s_.narrow;
      const uint8_t** const x = x_;
      const int64_t* const pattern = in_pattern_.data();
      outer_walker_->walk(n / period, [x, narrow, pattern, period](uint64_t r, int64_t at) {
        const uint8_t** run = x + r * period;
        const uint8_t* start = narrow + at;
        uint64_t t = 0;
#if defined(__SSE2__)
        // Two pointers per add (the compiler does not vectorise this loop on its own: run and
        // pattern might alias).
        const __m128i base = _mm_set1_epi64x(reinterpret_cast<int64_t>(start));
        for (; t + 2 <= period; t += 2)
          _mm_storeu_si128(
              reinterpret_cast<__m128i*>(run + t),
              _mm_add_epi64(base, _mm_loadu_si128(reinterpret_cast<const __m128i*>(pattern + t))));
#endif
        for (; t < period; ++t) run[t] = start + pattern[t];
      });
    } else if (uses_in_) {
      const uint8_t* const narrow = s_.narrow;
      const uint8_t** const x = x_;
      s_.in.walk(n, [x, narrow](uint64_t i, int64_t at) { x[i] = narrow + at; });
    }
    const uint8_t** const w = w_;
    ParRows& rows = s_.rows;
    const uint64_t looked_up = repeating ? period : n;
    if (lanes_)
      s_.par.walk(looked_up,
                  [w, &rows](uint64_t i, int64_t at) { w[i] = rows.row(at) + (at & 3); });
    else
      s_.par.walk(looked_up, [w, &rows](uint64_t i, int64_t at) { w[i] = rows.row(at); });
    if (looked_up < n) s_.par.skip(n - looked_up);
    repeating_ = repeating;
    period_ = period;
  }
  // Operands of the first steps, or of run r of a batch.
  const uint8_t* const* x(uint64_t r = 0) const { return x_ + r * period_; }
  const uint8_t* const* w(uint64_t r = 0) const { return w_ + (repeating_ ? 0 : r * period_); }

 private:
  RunSources& s_;
  bool uses_in_, lanes_;
  uint64_t capacity_;
  const uint8_t** x_;
  const uint8_t** w_;
  uint64_t period_ = 0;
  bool repeating_ = false;
  static constexpr uint64_t kMaxPattern = 64;
  std::array<int64_t, kMaxPattern> in_pattern_{};
  uint64_t pattern_length_ = 0;
  OpTtu outer_in_;
  std::optional<TtuWalker> outer_walker_;
};

// n gathered steps of the operand kinds other than word times row (mac_engine.h defines each).
inline void other_steps(int32_t* a, const uint8_t* const* xs, const uint8_t* const* ws, uint64_t n,
                        const RunSources& s, const EngineSpec& spec) {
  const uint32_t active = s.active;
  const int32_t in_zp = s.in_zp, w_zp = s.w_zp;
#if defined(__SSE2__)
  if (spec.operand == OperandKind::kByteTimesLane && active == 4) {
    // A narrow copy's 4 columns in one register: the lane bytes w[0], w[4], w[8], w[12] are the
    // low bytes of 4 int32 lanes; minus w_zp they fit int16, so pmaddwd against (x, 0) pairs gives
    // each product exactly (16 bytes from w stay inside the row: w is at most its byte 3).
    const __m128i low_byte = _mm_set1_epi32(0xff), zp = _mm_set1_epi32(w_zp);
    __m128i sum = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
    for (uint64_t i = 0; i < n; ++i) {
      const __m128i lane =
          _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws[i])), low_byte);
      const __m128i x = _mm_set1_epi32((*xs[i] - in_zp) & 0xffff);
      sum = _mm_add_epi32(sum, _mm_madd_epi16(_mm_sub_epi32(lane, zp), x));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a), sum);
    return;
  }
#endif
  for (uint64_t i = 0; i < n; ++i) {
    const uint8_t* w = ws[i];
    switch (spec.operand) {
      case OperandKind::kWordTimesRow:
        break;  // the word-times-rows kernels
      case OperandKind::kByteTimesLane: {
        const int32_t x = *xs[i] - in_zp;
        for (uint32_t c = 0; c < active; ++c) add_wrapping(a[c], x * (w[4 * c] - w_zp));
        break;
      }
      case OperandKind::kByteTimesLaneBroadcast: {
        const int32_t x = *xs[i] - in_zp;
        const int32_t b = w[0] - w_zp;
        for (uint32_t c = 0; c < active; ++c) add_wrapping(a[c], x * b);
        break;
      }
      case OperandKind::kHalfwordsTimesRow16: {
        const uint8_t* x = xs[i];
        for (uint32_t c = 0; c < active; ++c) {
          int16_t w0, w1;
          std::memcpy(&w0, w + 4 * c, 2);
          std::memcpy(&w1, w + 4 * c + 2, 2);
          add_wrapping(a[c], int64_t{x[0]} * w0 + int64_t{x[1]} * w1);
        }
        break;
      }
      case OperandKind::kLaneOnly: {
        if (spec.combine == Combine::kMax) {
          for (uint32_t c = 0; c < active; ++c) a[c] = std::max<int32_t>(a[c], w[4 * c] - w_zp);
        } else {
          for (uint32_t c = 0; c < active; ++c) add_wrapping(a[c], w[4 * c] - w_zp);
        }
        break;
      }
    }
  }
}

// n gathered steps into the same accumulators.
inline void accumulate(int32_t* a, const uint8_t* const* xs, const uint8_t* const* ws, uint64_t n,
                       const RunSources& s, const EngineSpec& spec) {
  if (spec.operand == OperandKind::kWordTimesRow)
    s.kernel(a, xs, ws, static_cast<uint32_t>(n), s.active, s.in_zp, s.w_zp);
  else
    other_steps(a, xs, ws, n, s, spec);
}

// n steps into the same accumulators, gathered in chunks of the gather's capacity.
inline void accumulate_run(int32_t* a, uint64_t n, const RunSources& s, OperandGather& gather,
                           const EngineSpec& spec) {
  while (n > 0) {
    const uint64_t m = std::min(n, gather.capacity());
    gather.gather(m);
    accumulate(a, gather.x(), gather.w(), m, s, spec);
    n -= m;
  }
}

// MACs one step counts (statistics).
inline uint64_t macs_per_step(OperandKind kind, uint32_t active) {
  switch (kind) {
    case OperandKind::kWordTimesRow:
      return 4 * uint64_t{active};
    case OperandKind::kByteTimesLane:
      return active;
    case OperandKind::kByteTimesLaneBroadcast:
      return 1;
    case OperandKind::kHalfwordsTimesRow16:
      return 2 * uint64_t{active};
    case OperandKind::kLaneOnly:
      return 0;
  }
  return 0;
}

}  // namespace tinycoral::chip::ops
