// The op unit's output stage over many words at once (a batch of runs, mac_engine.cpp): each word
// is 4 accumulators + their biases + the op's offset, requantized (requantize.h) and stored at its
// `out` address. Two SIMD levels with identical results: SSE2 one word at a time, AVX2 two.
#pragma once

#include <cstdint>

#include "chip/ops/requantize.h"

namespace tinycoral::chip::ops {

struct OutputWords {
  const int32_t* sums = nullptr;  // run r's accumulators at sums + r * stride
  uint32_t stride = 0;
  uint32_t words = 0;               // output words per run
  const uint8_t* biases = nullptr;  // word w's 4 int32 biases at biases + 16 * w, or none
  // Per-channel ops: word w's 4 float32 multipliers at mults + 16 * w (all finite), else the
  // stage's multiplier for every column.
  const uint8_t* mults = nullptr;
  int32_t offset = 0;
  // Max-combined sums: a column no step updated (still `empty`) reads as 0.
  bool is_max = false;
  int32_t empty = 0;
};

// Writes words.words words per run for runs 0, 1, ... (`total` words in all) to narrow + at[i].
// The stage must pass requantize4_fast.
using OutputWordsKernel = void (*)(const OutputWords& words, const OutputStage& stage,
                                   uint8_t* narrow, const int64_t* at, uint64_t total);

OutputWordsKernel output_words_kernel();  // AVX2 when present, else SSE2 (or scalar)
OutputWordsKernel output_words_portable();
OutputWordsKernel output_words_avx2();  // nullptr without AVX2

}  // namespace tinycoral::chip::ops
