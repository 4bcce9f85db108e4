// The op engine's output stage (mac_engine.cpp): turns one output group's accumulators into output
// words through the `out` TTU (bias, offset, the 32-bit wrap, then requantize or the NLU spline),
// one group at a time or a batch of runs at once (output_words.h), and keeps count of the words
// `out` still has. The group shapes (full and last group, the last group's skipped words) come
// from the instruction.
#pragma once

#include <cstdint>

#include "chip/ops/mac_engine.h"
#include "chip/ops/output_words.h"
#include "chip/ops/per_channel.h"
#include "chip/ops/requantize.h"
#include "chip/tile.h"

namespace tinycoral::chip::ops {

class GroupWriter {
 public:
  // Checks the group shapes and the bias-store extent of all `groups` (fails the op otherwise).
  // `empty` is the accumulators' start value (a max's "minus infinity" reads as 0).
  GroupWriter(const OpInstr& op, OpEnv& env, const EngineSpec& spec, const PerChannel& pc,
              uint64_t groups, int32_t empty, uint32_t stride);

  // Whether the SSE2 output stage applies (requantize4_fast and finite multipliers).
  bool vector_stage() const { return vector_stage_; }
  bool is_last(uint64_t group) const { return group + 1 == groups_; }
  // Output words of group `group`, and whether the last group skips words of `out` after it.
  uint32_t words(uint64_t group) const { return is_last(group) ? last_words_ : full_words_; }
  bool skips_after(uint64_t group) const { return is_last(group) && last_skip_ > 0; }
  uint64_t words_written() const { return words_written_; }

  // The output words of group `group` from accumulators a[0..64).
  void emit(const int32_t* a, uint64_t group);
  // `runs` runs of group `group` at once, run r's sums at sums + r * stride, `words` words each
  // (the same words in the same order as one emit per run; needs vector_stage()).
  void emit_batch(const int32_t* sums, uint32_t words, uint64_t group, uint64_t runs);

 private:
  void take_words(uint64_t n);
  const uint8_t* biases(uint64_t group) const;
  const uint8_t* mults(uint64_t group) const;

  const OpInstr& op_;
  OpEnv& env_;
  const EngineSpec& spec_;
  const PerChannel& pc_;
  uint64_t groups_;
  int32_t empty_;
  uint32_t stride_;
  uint32_t channels_, full_words_, last_words_, last_skip_ = 0;
  OutputStage stage_;
  bool vector_stage_;
#if defined(__SSE2__)
  RequantizeConstants constants_;  // broadcast once per op
  __m128i offset_;
#endif
  bool is_max_;
  TtuWalker out_;
  uint64_t out_words_left_;
  uint64_t words_written_ = 0;
  uint8_t* narrow_;
  const uint8_t* bias_store_;
  OutputWordsKernel output_words_;
};

}  // namespace tinycoral::chip::ops
