// SIMD levels of the word-times-rows run (see mac_kernels.h).
#include "chip/ops/mac_kernels.h"

#include "chip/ops/simd_level.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tinycoral::chip::ops {
namespace {

// Four columns (a depthwise channel word) keep their sums in one register for the whole run.
void four_columns_run(int32_t* acc, const uint8_t* const* x, const uint8_t* const* rows, uint32_t n,
                      int32_t in_zp, int32_t w_zp) {
#if defined(__SSE2__)
  const __m128i zp = _mm_set1_epi16(static_cast<int16_t>(w_zp));
  const __m128i x_zp = _mm_set1_epi16(static_cast<int16_t>(in_zp));
  const __m128i zero = _mm_setzero_si128();
  __m128i sum = _mm_loadu_si128(reinterpret_cast<const __m128i*>(acc));
  for (uint32_t i = 0; i < n; ++i) {
    int32_t word;
    std::memcpy(&word, x[i], 4);
    // (x0..x3) - in_zp as int16, twice: each column's 4 products pair up under pmaddwd.
    const __m128i xv =
        _mm_sub_epi16(_mm_unpacklo_epi8(_mm_shuffle_epi32(_mm_cvtsi32_si128(word), 0), zero), x_zp);
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]));
    const __m128i m0 = _mm_madd_epi16(_mm_sub_epi16(_mm_unpacklo_epi8(w, zero), zp), xv);
    const __m128i m1 = _mm_madd_epi16(_mm_sub_epi16(_mm_unpackhi_epi8(w, zero), zp), xv);
    const __m128 a0 = _mm_castsi128_ps(m0), a1 = _mm_castsi128_ps(m1);
    sum = _mm_add_epi32(
        sum, _mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0))),
                           _mm_castps_si128(_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1)))));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(acc), sum);
#else
  for (uint32_t i = 0; i < n; ++i) word_times_row_columns(acc, x[i], rows[i], 0, 4, in_zp, w_zp);
#endif
}

void word_times_rows_c(int32_t* acc, const uint8_t* const* x, const uint8_t* const* rows,
                       uint32_t n, uint32_t columns, int32_t in_zp, int32_t w_zp) {
  if (columns == 4) return four_columns_run(acc, x, rows, n, in_zp, w_zp);
  for (uint32_t i = 0; i < n; ++i)
    word_times_row_columns(acc, x[i], rows[i], 0, columns, in_zp, w_zp);
}

#if defined(__x86_64__)
// B blocks of 8 columns, their sums in B registers for the whole run. Per block and step: the 32
// row bytes widen to int16 minus w_zp, vpmaddwd against (x0..x3) repeated gives per-column pair
// sums (b0+b1, b2+b3), vphaddd adds the pairs. vphaddd interleaves the two halves as columns
// (0 1 4 5 | 2 3 6 7); the sums are put back in order (vpermq) once, at the end of the run: the
// order of wrapping adds does not matter. All exact: pair sums stay below 2 * 255 * 255.
template <int B>
__attribute__((target("avx2"))) void blocks_run(int32_t* acc, const uint8_t* const* x,
                                                const uint8_t* const* rows, uint32_t n,
                                                int32_t in_zp, int32_t w_zp) {
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(w_zp));
  const __m256i x_zp = _mm256_set1_epi16(static_cast<int16_t>(in_zp));
  __m256i sum[B];
  for (int b = 0; b < B; ++b) sum[b] = _mm256_setzero_si256();
  for (uint32_t i = 0; i < n; ++i) {
    int32_t word;
    std::memcpy(&word, x[i], 4);
    const __m256i xv =
        _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_shuffle_epi32(_mm_cvtsi32_si128(word), 0)), x_zp);
    const uint8_t* w = rows[i];
    for (int b = 0; b < B; ++b) {
      const __m256i lo = _mm256_sub_epi16(
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 32 * b))), zp);
      const __m256i hi = _mm256_sub_epi16(
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 32 * b + 16))),
          zp);
      sum[b] = _mm256_add_epi32(
          sum[b], _mm256_hadd_epi32(_mm256_madd_epi16(lo, xv), _mm256_madd_epi16(hi, xv)));
    }
  }
  for (int b = 0; b < B; ++b) {
    __m256i* a = reinterpret_cast<__m256i*>(acc + 8 * b);
    _mm256_storeu_si256(
        a, _mm256_add_epi32(_mm256_loadu_si256(a), _mm256_permute4x64_epi64(sum[b], 0xD8)));
  }
}

// Four columns, two steps per 256-bit register: step i in the low lane, step i + 1 in the high
// lane (row bytes 0-15 of each, x words repeated per lane). Within a lane the pair sums of columns
// 0-1 (unpacklo) and 2-3 (unpackhi) come out of vphaddd in column order; the lanes are added at the
// end.
__attribute__((target("avx2"))) void four_columns_run_avx2(int32_t* acc, const uint8_t* const* x,
                                                           const uint8_t* const* rows, uint32_t n,
                                                           int32_t in_zp, int32_t w_zp) {
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(w_zp));
  const __m256i x_zp = _mm256_set1_epi16(static_cast<int16_t>(in_zp));
  const __m256i zero = _mm256_setzero_si256();
  __m256i sum = _mm256_setzero_si256();
  uint32_t i = 0;
  for (; i + 2 <= n; i += 2) {
    int32_t x0, x1;
    std::memcpy(&x0, x[i], 4);
    std::memcpy(&x1, x[i + 1], 4);
    const __m256i xv = _mm256_sub_epi16(
        _mm256_unpacklo_epi8(_mm256_setr_epi32(x0, x0, x0, x0, x1, x1, x1, x1), zero), x_zp);
    const __m256i w = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i]))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[i + 1])), 1);
    const __m256i m0 = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_unpacklo_epi8(w, zero), zp), xv);
    const __m256i m1 = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_unpackhi_epi8(w, zero), zp), xv);
    sum = _mm256_add_epi32(sum, _mm256_hadd_epi32(m0, m1));
  }
  __m128i* a = reinterpret_cast<__m128i*>(acc);
  _mm_storeu_si128(
      a, _mm_add_epi32(_mm_loadu_si128(a), _mm_add_epi32(_mm256_castsi256_si128(sum),
                                                         _mm256_extracti128_si256(sum, 1))));
  if (i < n) four_columns_run(acc, x + i, rows + i, n - i, in_zp, w_zp);
}

__attribute__((target("avx2"))) void word_times_rows_avx2_impl(int32_t* acc,
                                                               const uint8_t* const* x,
                                                               const uint8_t* const* rows,
                                                               uint32_t n, uint32_t columns,
                                                               int32_t in_zp, int32_t w_zp) {
  if (columns == 4) return four_columns_run_avx2(acc, x, rows, n, in_zp, w_zp);
  using Run =
      void (*)(int32_t*, const uint8_t* const*, const uint8_t* const*, uint32_t, int32_t, int32_t);
  static constexpr Run kRuns[] = {nullptr,       blocks_run<1>, blocks_run<2>,
                                  blocks_run<3>, blocks_run<4>, blocks_run<5>,
                                  blocks_run<6>, blocks_run<7>, blocks_run<8>};
  const uint32_t blocks = columns / 8;
  if (blocks > 0) kRuns[blocks](acc, x, rows, n, in_zp, w_zp);
  if (8 * blocks < columns)
    for (uint32_t i = 0; i < n; ++i)
      word_times_row_columns(acc, x[i], rows[i], 8 * blocks, columns, in_zp, w_zp);
}

// The batch's rows widened once: pair p holds rows 2p (low lane) and 2p + 1 (high lane) as int16
// minus w_zp, bytes 0-7 (lo) and 8-15 (hi); an odd last row has a zero high lane, so that its
// step can pair with anything. Long periods (never seen) take the one-run kernel per run.
__attribute__((target("avx2"))) void four_columns_batch_avx2_impl(int32_t* acc, uint32_t stride,
                                                                  const uint8_t* const* x,
                                                                  const uint8_t* const* rows,
                                                                  uint32_t runs, uint32_t period,
                                                                  int32_t in_zp, int32_t w_zp) {
  constexpr uint32_t kMaxPairs = 16;
  const uint32_t pairs = (period + 1) / 2;
  if (pairs > kMaxPairs) {
    for (uint32_t r = 0; r < runs; ++r)
      four_columns_run_avx2(acc + size_t{r} * stride, x + size_t{r} * period, rows, period, in_zp,
                            w_zp);
    return;
  }
  const __m256i zp = _mm256_set1_epi16(static_cast<int16_t>(w_zp));
  const __m256i x_zp = _mm256_set1_epi16(static_cast<int16_t>(in_zp));
  const __m256i zero = _mm256_setzero_si256();
  __m256i lo[kMaxPairs], hi[kMaxPairs];
  for (uint32_t p = 0; p < pairs; ++p) {
    const uint8_t* second = 2 * p + 1 < period ? rows[2 * p + 1] : rows[2 * p];
    const __m256i w = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[2 * p]))),
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(second)), 1);
    lo[p] = _mm256_sub_epi16(_mm256_unpacklo_epi8(w, zero), zp);
    hi[p] = _mm256_sub_epi16(_mm256_unpackhi_epi8(w, zero), zp);
    if (2 * p + 1 == period) {  // keep the low lane only
      lo[p] = _mm256_permute2x128_si256(lo[p], lo[p], 0x80);
      hi[p] = _mm256_permute2x128_si256(hi[p], hi[p], 0x80);
    }
  }
  for (uint32_t r = 0; r < runs; ++r) {
    const uint8_t* const* xr = x + size_t{r} * period;
    __m256i sum = zero;
    for (uint32_t p = 0; p < pairs; ++p) {
      int32_t x0, x1;
      std::memcpy(&x0, xr[2 * p], 4);
      std::memcpy(&x1, xr[2 * p + 1 < period ? 2 * p + 1 : 2 * p], 4);
      const __m256i xv = _mm256_sub_epi16(
          _mm256_unpacklo_epi8(_mm256_set_m128i(_mm_set1_epi32(x1), _mm_set1_epi32(x0)), zero),
          x_zp);
      sum = _mm256_add_epi32(
          sum, _mm256_hadd_epi32(_mm256_madd_epi16(lo[p], xv), _mm256_madd_epi16(hi[p], xv)));
    }
    __m128i* a = reinterpret_cast<__m128i*>(acc + size_t{r} * stride);
    _mm_storeu_si128(
        a, _mm_add_epi32(_mm_loadu_si128(a), _mm_add_epi32(_mm256_castsi256_si128(sum),
                                                           _mm256_extracti128_si256(sum, 1))));
  }
}
#endif

void four_columns_batch_c(int32_t* acc, uint32_t stride, const uint8_t* const* x,
                          const uint8_t* const* rows, uint32_t runs, uint32_t period, int32_t in_zp,
                          int32_t w_zp) {
  for (uint32_t r = 0; r < runs; ++r)
    four_columns_run(acc + size_t{r} * stride, x + size_t{r} * period, rows, period, in_zp, w_zp);
}

}  // namespace

FourColumnsBatchKernel four_columns_batch_portable() { return four_columns_batch_c; }

FourColumnsBatchKernel four_columns_batch_avx2() {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return four_columns_batch_avx2_impl;
#endif
  return nullptr;
}

FourColumnsBatchKernel four_columns_batch_kernel() {
  static const FourColumnsBatchKernel best =
      best_kernel(four_columns_batch_avx2(), four_columns_batch_portable());
  return best;
}

WordTimesRowsKernel word_times_rows_portable() { return word_times_rows_c; }

WordTimesRowsKernel word_times_rows_avx2() {
#if defined(__x86_64__)
  if (cpu_has_avx2()) return word_times_rows_avx2_impl;
#endif
  return nullptr;
}

WordTimesRowsKernel word_times_rows_kernel() {
  static const WordTimesRowsKernel best =
      best_kernel(word_times_rows_avx2(), word_times_rows_portable());
  return best;
}

}  // namespace tinycoral::chip::ops
