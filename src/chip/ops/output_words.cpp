// SIMD levels of the batch output stage (see output_words.h).
#include "chip/ops/output_words.h"

#include <cstring>

#include "chip/ops/simd_level.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tinycoral::chip::ops {
namespace {

// Word i of the batch: run i / words, word i % words, stepped without dividing.
struct WordCursor {
  const OutputWords& o;
  const int32_t* run;
  uint32_t w = 0;
  explicit WordCursor(const OutputWords& words) : o(words), run(words.sums) {}
  const int32_t* sums() const { return run + 4 * w; }
  const uint8_t* bias() const { return o.biases + 16 * w; }
  const uint8_t* mult() const { return o.mults + 16 * w; }
  void next() {
    if (++w == o.words) {
      w = 0;
      run += o.stride;
    }
  }
};

void output_words_c(const OutputWords& o, const OutputStage& stage, uint8_t* narrow,
                    const int64_t* at, uint64_t total) {
  WordCursor cursor(o);
  for (uint64_t i = 0; i < total; ++i, cursor.next()) {
    int32_t acc[4];
    for (int b = 0; b < 4; ++b) {
      int32_t v = cursor.sums()[b];
      if (o.is_max && v == o.empty) v = 0;
      uint32_t sum = static_cast<uint32_t>(v) + static_cast<uint32_t>(o.offset);
      if (o.biases) {
        int32_t bias;
        std::memcpy(&bias, cursor.bias() + 4 * b, 4);
        sum += static_cast<uint32_t>(bias);
      }
      acc[b] = static_cast<int32_t>(sum);  // the chip's 32-bit accumulator wraps (isa.md 2.1.4)
    }
    if (o.mults) {
      for (int b = 0; b < 4; ++b) {
        OutputStage column = stage;
        std::memcpy(&column.mult, cursor.mult() + 4 * b, 4);
        narrow[at[i] + b] = requantize(acc[b], column);
      }
      continue;
    }
    requantize4(acc, stage, requantize4_fast(stage), narrow + at[i]);
  }
}

#if defined(__x86_64__)
// Two words per register (word i in the low lane, i + 1 in the high lane); every step is the
// lane-wise one of requantize4_sse, and the packs work within lanes, so each lane's first 4 bytes
// are its word.
__attribute__((target("avx2"))) void output_words_avx2_impl(const OutputWords& o,
                                                            const OutputStage& stage,
                                                            uint8_t* narrow, const int64_t* at,
                                                            uint64_t total) {
  const RequantizeConstants k(stage);
  const __m256i mult_offset = _mm256_set1_epi32(o.offset);
  const __m256 mult = _mm256_set_m128(k.mult, k.mult), lo = _mm256_set_m128(k.lo, k.lo),
               hi = _mm256_set_m128(k.hi, k.hi);
  const __m256i zp = _mm256_set_m128i(k.zp, k.zp), empty = _mm256_set1_epi32(o.empty);
  WordCursor cursor(o);
  uint64_t i = 0;
  for (; i + 2 <= total; i += 2) {
    const int32_t* s0 = cursor.sums();
    const uint8_t* b0 = o.biases ? cursor.bias() : nullptr;
    const uint8_t* m0 = o.mults ? cursor.mult() : nullptr;
    cursor.next();
    const int32_t* s1 = cursor.sums();
    const uint8_t* b1 = o.biases ? cursor.bias() : nullptr;
    const uint8_t* m1 = o.mults ? cursor.mult() : nullptr;
    cursor.next();
    __m256i v = _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s1)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0)));
    if (o.is_max) v = _mm256_andnot_si256(_mm256_cmpeq_epi32(v, empty), v);
    if (o.biases)
      v = _mm256_add_epi32(v,
                           _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1)),
                                            _mm_loadu_si128(reinterpret_cast<const __m128i*>(b0))));
    v = _mm256_add_epi32(v, mult_offset);
    const __m256 m = o.mults ? _mm256_set_m128(_mm_loadu_ps(reinterpret_cast<const float*>(m1)),
                                               _mm_loadu_ps(reinterpret_cast<const float*>(m0)))
                             : mult;
    __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(v), m);
    y = _mm256_min_ps(_mm256_max_ps(y, lo), hi);
    const __m256i r = _mm256_add_epi32(_mm256_cvtps_epi32(y), zp);
    const __m256i halves = _mm256_packs_epi32(r, r);
    const __m256i bytes = _mm256_packus_epi16(halves, halves);
    const int32_t w0 = _mm_cvtsi128_si32(_mm256_castsi256_si128(bytes));
    const int32_t w1 = _mm_cvtsi128_si32(_mm256_extracti128_si256(bytes, 1));
    std::memcpy(narrow + at[i], &w0, 4);
    std::memcpy(narrow + at[i + 1], &w1, 4);
  }
  if (i < total) {
    OutputWords rest = o;
    rest.sums = cursor.run;
    // The remaining word is word cursor.w of its run: shift the run so that it is word 0.
    rest.sums += 4 * cursor.w;
    if (o.biases) rest.biases = o.biases + 16 * cursor.w;
    if (o.mults) rest.mults = o.mults + 16 * cursor.w;
    output_words_c(rest, stage, narrow, at + i, total - i);
  }
}
#endif

}  // namespace

OutputWordsKernel output_words_portable() { return output_words_c; }

OutputWordsKernel output_words_avx2() {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return output_words_avx2_impl;
#endif
  return nullptr;
}

OutputWordsKernel output_words_kernel() {
  static const OutputWordsKernel best = best_kernel(output_words_avx2(), output_words_portable());
  return best;
}

}  // namespace tinycoral::chip::ops
