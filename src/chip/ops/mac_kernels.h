// The engine's hottest arithmetic: runs of "one input word times one 256-byte weight row" steps
// into the same accumulators, at two SIMD levels with identical results (the accumulators wrap at
// 32 bits like the chip's, isa.md 2.1.4 step 1, so int32 lanes with wrapping adds give exactly the
// bits of a wider sum, in any order).
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tinycoral::chip::ops {

// One step for columns [begin, end): SSE2 (part of every x86-64) 4 columns at a time, then
// per-column sums in int32 (each of the 4 products is at most 255 * 255 in magnitude) accumulated
// through uint32 so that they wrap (signed overflow would be undefined).
inline void word_times_row_columns(int32_t* acc, const uint8_t* x, const uint8_t* row,
                                   uint32_t begin, uint32_t end, int32_t in_zp, int32_t w_zp) {
  const int32_t x0 = x[0] - in_zp, x1 = x[1] - in_zp, x2 = x[2] - in_zp, x3 = x[3] - in_zp;
  uint32_t c = begin;
#if defined(__SSE2__)
  // Row bytes widen to int16 minus w_zp; pmaddwd against (x0..x3) twice gives each column's two
  // pair sums, which the even/odd shuffles line up and add: exact, like the scalar sum.
  const __m128i xv =
      _mm_setr_epi16(static_cast<int16_t>(x0), static_cast<int16_t>(x1), static_cast<int16_t>(x2),
                     static_cast<int16_t>(x3), static_cast<int16_t>(x0), static_cast<int16_t>(x1),
                     static_cast<int16_t>(x2), static_cast<int16_t>(x3));
  const __m128i zp = _mm_set1_epi16(static_cast<int16_t>(w_zp));
  const __m128i zero = _mm_setzero_si128();
  for (; c + 4 <= end; c += 4) {
    const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 4 * c));
    const __m128i m0 = _mm_madd_epi16(_mm_sub_epi16(_mm_unpacklo_epi8(w, zero), zp), xv);
    const __m128i m1 = _mm_madd_epi16(_mm_sub_epi16(_mm_unpackhi_epi8(w, zero), zp), xv);
    const __m128 a0 = _mm_castsi128_ps(m0), a1 = _mm_castsi128_ps(m1);
    const __m128i sums =
        _mm_add_epi32(_mm_castps_si128(_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(2, 0, 2, 0))),
                      _mm_castps_si128(_mm_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 1, 3, 1))));
    __m128i* a = reinterpret_cast<__m128i*>(acc + c);
    _mm_storeu_si128(a, _mm_add_epi32(_mm_loadu_si128(a), sums));
  }
#endif
  for (; c < end; ++c) {
    const uint8_t* w = row + 4 * c;
    const int32_t sum =
        x0 * (w[0] - w_zp) + x1 * (w[1] - w_zp) + x2 * (w[2] - w_zp) + x3 * (w[3] - w_zp);
    acc[c] = static_cast<int32_t>(static_cast<uint32_t>(acc[c]) + static_cast<uint32_t>(sum));
  }
}

// For every step i < n: acc[c] += sum_b (x[i][b] - in_zp) * (rows[i][4c + b] - w_zp) for
// c < columns (<= 64), wrapping mod 2^32. Columns at and beyond `columns` are left untouched.
using WordTimesRowsKernel = void (*)(int32_t* acc, const uint8_t* const* x,
                                     const uint8_t* const* rows, uint32_t n, uint32_t columns,
                                     int32_t in_zp, int32_t w_zp);

// The fastest kernel this CPU runs (AVX2 when present, else the baseline); chosen once.
WordTimesRowsKernel word_times_rows_kernel();
// Each level, for tests that compare them (nullptr when the CPU lacks it).
WordTimesRowsKernel word_times_rows_portable();
WordTimesRowsKernel word_times_rows_avx2();

// The runs of a depthwise batch: 4 columns, every run over the same `period` weight rows (the
// positions of one channel word). For every run r < runs and column c < 4:
// acc[r * stride + c] += sum_{t < period} sum_b (x[r * period + t][b] - in_zp) * (rows[t][4c + b]
// - w_zp), wrapping mod 2^32. The rows are widened once for all runs instead of once per step.
using FourColumnsBatchKernel = void (*)(int32_t* acc, uint32_t stride, const uint8_t* const* x,
                                        const uint8_t* const* rows, uint32_t runs, uint32_t period,
                                        int32_t in_zp, int32_t w_zp);
FourColumnsBatchKernel four_columns_batch_kernel();
FourColumnsBatchKernel four_columns_batch_portable();
FourColumnsBatchKernel four_columns_batch_avx2();  // nullptr without AVX2

}  // namespace tinycoral::chip::ops
