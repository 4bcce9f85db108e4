// SIMD levels of the word-times-row step (see mac_kernels.h).
#include "chip/ops/mac_kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tinycoral::chip::ops {
namespace {

void word_times_row_c(int32_t* acc, const uint8_t* x, const uint8_t* row, uint32_t columns,
                      int32_t in_zp, int32_t w_zp) {
  word_times_row_columns(acc, x, row, 0, columns, in_zp, w_zp);
}

#if defined(__x86_64__)
// 8 columns per iteration: the 32 row bytes widen to int16 minus w_zp, vpmaddwd against (x0..x3)
// repeated gives per-column pair sums (b0+b1, b2+b3), vphaddd adds the pairs. vphaddd interleaves
// the two halves as columns (0 1 4 5 | 2 3 6 7); vpermq puts them back in order. All exact: pair
// sums stay below 2 * 255 * 255.
__attribute__((target("avx2"))) void word_times_row_avx2_impl(int32_t* acc, const uint8_t* x,
                                                              const uint8_t* row, uint32_t columns,
                                                              int32_t in_zp, int32_t w_zp) {
  const auto x0 = static_cast<int16_t>(x[0] - in_zp), x1 = static_cast<int16_t>(x[1] - in_zp),
             x2 = static_cast<int16_t>(x[2] - in_zp), x3 = static_cast<int16_t>(x[3] - in_zp);
  const __m256i xv =
      _mm256_setr_epi16(x0, x1, x2, x3, x0, x1, x2, x3, x0, x1, x2, x3, x0, x1, x2, x3);
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(w_zp));
  uint32_t c = 0;
  for (; c + 8 <= columns; c += 8) {
    const uint8_t* w = row + 4 * c;
    const __m256i lo = _mm256_sub_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))), zp);
    const __m256i hi = _mm256_sub_epi16(
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 16))), zp);
    const __m256i sums = _mm256_permute4x64_epi64(
        _mm256_hadd_epi32(_mm256_madd_epi16(lo, xv), _mm256_madd_epi16(hi, xv)), 0xD8);
    __m256i* a = reinterpret_cast<__m256i*>(acc + c);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), sums));
  }
  if (c < columns) word_times_row_columns(acc, x, row, c, columns, in_zp, w_zp);
}
#endif

}  // namespace

WordTimesRowKernel word_times_row_portable() { return word_times_row_c; }

WordTimesRowKernel word_times_row_avx2() {
#if defined(__x86_64__)
  if (__builtin_cpu_supports("avx2")) return word_times_row_avx2_impl;
#endif
  return nullptr;
}

WordTimesRowKernel word_times_row_kernel() {
  static const WordTimesRowKernel best = [] {
    const WordTimesRowKernel avx2 = word_times_row_avx2();
    return avx2 ? avx2 : word_times_row_portable();
  }();
  return best;
}

}  // namespace tinycoral::chip::ops
