// x86-64 kernels of qgemm.h: AVX2 (vpmaddwd on int16-widened bytes) and AVX-512 VNNI (vpdpbusd),
// compiled with per-function target attributes and chosen at run time (qgemm.cpp).
#if defined(__x86_64__)
// GCC 12's _mm512_reduce_add_epi32 trips -Wmaybe-uninitialized inside its own header (clang
// has no such warning and would reject the pragma under -Werror).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "host/qgemm_simd.h"

namespace tinycoral::host::simd {

static __attribute__((target("avx2"))) inline int32_t hsum256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// u8 x s8 products widened to int16, pairs summed to int32 by vpmaddwd: exact.
static __attribute__((target("avx2"))) inline __m256i dot16_avx2(__m256i acc, const uint8_t* a,
                                                                 const int8_t* b) {
  const __m256i va = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m256i vb = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(va, vb));
}

__attribute__((target("avx2"))) void gemm_avx2(const uint8_t* a, size_t lda, const int8_t* b,
                                               int32_t* c, size_t ldc, int m, int n, int kp) {
  const size_t skp = static_cast<size_t>(kp);
  int i = 0;
  for (; i + 2 <= m; i += 2) {
    const uint8_t* a0 = a + static_cast<size_t>(i) * lda;
    const uint8_t* a1 = a0 + lda;
    int j = 0;
    for (; j + 2 <= n; j += 2) {
      const int8_t* b0 = b + static_cast<size_t>(j) * skp;
      const int8_t* b1 = b0 + skp;
      __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
      for (int k = 0; k < kp; k += 16) {
        const __m256i va0 =
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a0 + k)));
        const __m256i va1 =
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a1 + k)));
        const __m256i vb0 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b0 + k)));
        const __m256i vb1 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b1 + k)));
        c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(va0, vb0));
        c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(va0, vb1));
        c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(va1, vb0));
        c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(va1, vb1));
      }
      int32_t* cr = c + static_cast<size_t>(i) * ldc + static_cast<size_t>(j);
      cr[0] = hsum256(c00);
      cr[1] = hsum256(c01);
      cr[ldc] = hsum256(c10);
      cr[ldc + 1] = hsum256(c11);
    }
    for (; j < n; ++j) {
      const int8_t* b0 = b + static_cast<size_t>(j) * skp;
      __m256i c0 = _mm256_setzero_si256(), c1 = c0;
      for (int k = 0; k < kp; k += 16) {
        c0 = dot16_avx2(c0, a0 + k, b0 + k);
        c1 = dot16_avx2(c1, a1 + k, b0 + k);
      }
      c[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = hsum256(c0);
      c[static_cast<size_t>(i + 1) * ldc + static_cast<size_t>(j)] = hsum256(c1);
    }
  }
  for (; i < m; ++i) {
    const uint8_t* a0 = a + static_cast<size_t>(i) * lda;
    for (int j = 0; j < n; ++j) {
      const int8_t* b0 = b + static_cast<size_t>(j) * skp;
      __m256i c0 = _mm256_setzero_si256();
      for (int k = 0; k < kp; k += 16) c0 = dot16_avx2(c0, a0 + k, b0 + k);
      c[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = hsum256(c0);
    }
  }
}

#define TC_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

// 4 rows x 4 columns of vpdpbusd (64 u8 x s8 products into 16 int32 lanes, exact).
TC_VNNI void gemm_vnni(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m,
                       int n, int kp) {
  const size_t skp = static_cast<size_t>(kp);
  int i = 0;
  for (; i + 4 <= m; i += 4) {
    const uint8_t* ar[4];
    for (int r = 0; r < 4; ++r) ar[r] = a + static_cast<size_t>(i + r) * lda;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t* br = b + static_cast<size_t>(j) * skp;
      __m512i acc[4][4];
      for (auto& row : acc)
        for (auto& v : row) v = _mm512_setzero_si512();
      for (int k = 0; k < kp; k += 64) {
        const __m512i vb0 = _mm512_loadu_si512(br + k);
        const __m512i vb1 = _mm512_loadu_si512(br + skp + k);
        const __m512i vb2 = _mm512_loadu_si512(br + 2 * skp + k);
        const __m512i vb3 = _mm512_loadu_si512(br + 3 * skp + k);
        for (int r = 0; r < 4; ++r) {
          const __m512i va = _mm512_loadu_si512(ar[r] + k);
          acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], va, vb0);
          acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], va, vb1);
          acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], va, vb2);
          acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], va, vb3);
        }
      }
      for (int r = 0; r < 4; ++r)
        for (int q = 0; q < 4; ++q)
          c[static_cast<size_t>(i + r) * ldc + static_cast<size_t>(j + q)] =
              _mm512_reduce_add_epi32(acc[r][q]);
    }
    for (; j < n; ++j) {
      const int8_t* b0 = b + static_cast<size_t>(j) * skp;
      __m512i acc[4];
      for (auto& v : acc) v = _mm512_setzero_si512();
      for (int k = 0; k < kp; k += 64) {
        const __m512i vb = _mm512_loadu_si512(b0 + k);
        for (int r = 0; r < 4; ++r)
          acc[r] = _mm512_dpbusd_epi32(acc[r], _mm512_loadu_si512(ar[r] + k), vb);
      }
      for (int r = 0; r < 4; ++r)
        c[static_cast<size_t>(i + r) * ldc + static_cast<size_t>(j)] =
            _mm512_reduce_add_epi32(acc[r]);
    }
  }
  for (; i < m; ++i) {
    const uint8_t* a0 = a + static_cast<size_t>(i) * lda;
    int j = 0;
    for (; j + 4 <= n; j += 4) {
      const int8_t* br = b + static_cast<size_t>(j) * skp;
      __m512i acc[4];
      for (auto& v : acc) v = _mm512_setzero_si512();
      for (int k = 0; k < kp; k += 64) {
        const __m512i va = _mm512_loadu_si512(a0 + k);
        for (int q = 0; q < 4; ++q)
          acc[q] = _mm512_dpbusd_epi32(acc[q], va,
                                       _mm512_loadu_si512(br + static_cast<size_t>(q) * skp + k));
      }
      for (int q = 0; q < 4; ++q)
        c[static_cast<size_t>(i) * ldc + static_cast<size_t>(j + q)] =
            _mm512_reduce_add_epi32(acc[q]);
    }
    for (; j < n; ++j) {
      const int8_t* b0 = b + static_cast<size_t>(j) * skp;
      __m512i acc = _mm512_setzero_si512();
      for (int k = 0; k < kp; k += 64)
        acc = _mm512_dpbusd_epi32(acc, _mm512_loadu_si512(a0 + k), _mm512_loadu_si512(b0 + k));
      c[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = _mm512_reduce_add_epi32(acc);
    }
  }
}

// Panel layout: one zmm of B = 16 output columns x 4 k values; A's 4 bytes broadcast. 4 rows x 2
// panels per step, no horizontal reductions.
TC_VNNI void panels_vnni(const int8_t* panels, int np, int kp, const uint8_t* a, size_t lda, int m,
                         int32_t* c, size_t ldc) {
  const size_t panel_bytes = static_cast<size_t>(kp) * 16;
  const int groups = kp / 4;
  int p = 0;
  for (; p + 2 <= np; p += 2) {
    const int8_t* b0 = panels + static_cast<size_t>(p) * panel_bytes;
    const int8_t* b1 = b0 + panel_bytes;
    int i = 0;
    for (; i + 4 <= m; i += 4) {
      const uint8_t* ar = a + static_cast<size_t>(i) * lda;
      __m512i c00 = _mm512_setzero_si512(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00,
              c30 = c00, c31 = c00;
      for (int g = 0; g < groups; ++g) {
        const __m512i w0 = _mm512_loadu_si512(b0 + static_cast<size_t>(g) * 64);
        const __m512i w1 = _mm512_loadu_si512(b1 + static_cast<size_t>(g) * 64);
        int32_t v;
        std::memcpy(&v, ar + 4 * g, 4);
        __m512i x = _mm512_set1_epi32(v);
        c00 = _mm512_dpbusd_epi32(c00, x, w0);
        c01 = _mm512_dpbusd_epi32(c01, x, w1);
        std::memcpy(&v, ar + lda + 4 * g, 4);
        x = _mm512_set1_epi32(v);
        c10 = _mm512_dpbusd_epi32(c10, x, w0);
        c11 = _mm512_dpbusd_epi32(c11, x, w1);
        std::memcpy(&v, ar + 2 * lda + 4 * g, 4);
        x = _mm512_set1_epi32(v);
        c20 = _mm512_dpbusd_epi32(c20, x, w0);
        c21 = _mm512_dpbusd_epi32(c21, x, w1);
        std::memcpy(&v, ar + 3 * lda + 4 * g, 4);
        x = _mm512_set1_epi32(v);
        c30 = _mm512_dpbusd_epi32(c30, x, w0);
        c31 = _mm512_dpbusd_epi32(c31, x, w1);
      }
      int32_t* cr = c + static_cast<size_t>(i) * ldc + static_cast<size_t>(p) * 16;
      _mm512_storeu_si512(cr, c00);
      _mm512_storeu_si512(cr + 16, c01);
      _mm512_storeu_si512(cr + ldc, c10);
      _mm512_storeu_si512(cr + ldc + 16, c11);
      _mm512_storeu_si512(cr + 2 * ldc, c20);
      _mm512_storeu_si512(cr + 2 * ldc + 16, c21);
      _mm512_storeu_si512(cr + 3 * ldc, c30);
      _mm512_storeu_si512(cr + 3 * ldc + 16, c31);
    }
    for (; i < m; ++i) {
      const uint8_t* ar = a + static_cast<size_t>(i) * lda;
      __m512i c0 = _mm512_setzero_si512(), c1 = c0;
      for (int g = 0; g < groups; ++g) {
        int32_t v;
        std::memcpy(&v, ar + 4 * g, 4);
        const __m512i x = _mm512_set1_epi32(v);
        c0 = _mm512_dpbusd_epi32(c0, x, _mm512_loadu_si512(b0 + static_cast<size_t>(g) * 64));
        c1 = _mm512_dpbusd_epi32(c1, x, _mm512_loadu_si512(b1 + static_cast<size_t>(g) * 64));
      }
      int32_t* cr = c + static_cast<size_t>(i) * ldc + static_cast<size_t>(p) * 16;
      _mm512_storeu_si512(cr, c0);
      _mm512_storeu_si512(cr + 16, c1);
    }
  }
  for (; p < np; ++p) {
    const int8_t* b0 = panels + static_cast<size_t>(p) * panel_bytes;
    for (int i = 0; i < m; ++i) {
      const uint8_t* ar = a + static_cast<size_t>(i) * lda;
      __m512i c0 = _mm512_setzero_si512();
      for (int g = 0; g < groups; ++g) {
        int32_t v;
        std::memcpy(&v, ar + 4 * g, 4);
        c0 = _mm512_dpbusd_epi32(c0, _mm512_set1_epi32(v),
                                 _mm512_loadu_si512(b0 + static_cast<size_t>(g) * 64));
      }
      _mm512_storeu_si512(c + static_cast<size_t>(i) * ldc + static_cast<size_t>(p) * 16, c0);
    }
  }
}

__attribute__((target("avx2"))) int32_t copy_flip_sum_avx2(uint8_t* dst, const uint8_t* src,
                                                           size_t n, uint8_t flip) {
  const __m256i vf = _mm256_set1_epi8(static_cast<char>(flip));
  __m256i sums = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v =
        _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)), vf);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), v);
    sums = _mm256_add_epi64(sums, _mm256_sad_epu8(v, _mm256_setzero_si256()));
  }
  alignas(32) int64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), sums);
  int64_t sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < n; ++i) {
    dst[i] = src[i] ^ flip;
    sum += dst[i];
  }
  return static_cast<int32_t>(sum);
}

// gemmlowp's rounding doubling high multiply on the even 32-bit lanes (results in the low halves).
static TC_VNNI __m512i high_mul_even(__m512i a, __m512i b) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i pos_nudge = _mm512_set1_epi64(int64_t{1} << 30);
  const __m512i neg_nudge = _mm512_set1_epi64(1 - (int64_t{1} << 30));
  const __m512i trunc_bias = _mm512_set1_epi64((int64_t{1} << 31) - 1);
  const __m512i p = _mm512_mul_epi32(a, b);  // signed low 32 x low 32 -> 64
  const __mmask8 neg = _mm512_cmplt_epi64_mask(p, zero);
  __m512i t = _mm512_add_epi64(p, _mm512_mask_blend_epi64(neg, pos_nudge, neg_nudge));
  // Division by 2^31 truncating toward zero.
  const __mmask8 tneg = _mm512_cmplt_epi64_mask(t, zero);
  t = _mm512_mask_add_epi64(t, tneg, t, trunc_bias);
  return _mm512_srai_epi64(t, 31);
}

// 16 lanes of TFLite's MultiplyByQuantizedMultiplier, bit-exact with the scalar code.
static TC_VNNI __m512i mbqm16(__m512i x, __m512i mult, __m512i left, __m512i right) {
  x = _mm512_sllv_epi32(x, left);
  const __m512i zero = _mm512_setzero_si512();

  const __m512i even = high_mul_even(x, mult);
  const __m512i odd = high_mul_even(_mm512_srli_epi64(x, 32), _mm512_srli_epi64(mult, 32));
  const __m512i hm = _mm512_mask_blend_epi32(0xAAAA, even, _mm512_slli_epi64(odd, 32));
  // Rounding divide by 2^right, ties away from zero.
  const __m512i one = _mm512_set1_epi32(1);
  const __m512i mask = _mm512_sub_epi32(_mm512_sllv_epi32(one, right), one);
  const __m512i rem = _mm512_and_si512(hm, mask);
  __m512i threshold = _mm512_srai_epi32(mask, 1);
  threshold = _mm512_mask_add_epi32(threshold, _mm512_cmplt_epi32_mask(hm, zero), threshold, one);
  const __m512i q = _mm512_srav_epi32(hm, right);
  return _mm512_mask_add_epi32(q, _mm512_cmpgt_epi32_mask(rem, threshold), q, one);
}

TC_VNNI void requantize_row_avx512(const int32_t* acc, const int32_t* aw, int32_t xs,
                                   const int32_t* offset, const TfliteRequantTable& t, int n,
                                   uint8_t* out) {
  const __m512i vxs = _mm512_set1_epi32(xs);
  const __m512i zp = _mm512_set1_epi32(t.zero_point);
  const __m512i lo = _mm512_set1_epi32(t.lo), hi = _mm512_set1_epi32(t.hi);
  for (int c = 0; c < n; c += 16) {
    const __mmask16 k =
        n - c >= 16 ? __mmask16(0xFFFF) : static_cast<__mmask16>((1u << (n - c)) - 1);
    __m512i x = _mm512_maskz_loadu_epi32(k, acc + c);
    if (aw) x = _mm512_sub_epi32(x, _mm512_mullo_epi32(_mm512_maskz_loadu_epi32(k, aw + c), vxs));
    if (offset) x = _mm512_add_epi32(x, _mm512_maskz_loadu_epi32(k, offset + c));
    __m512i v = mbqm16(x, _mm512_maskz_loadu_epi32(k, t.mult.data() + c),
                       _mm512_maskz_loadu_epi32(k, t.left.data() + c),
                       _mm512_maskz_loadu_epi32(k, t.right.data() + c));
    v = _mm512_min_epi32(_mm512_max_epi32(_mm512_add_epi32(v, zp), lo), hi);
    _mm512_mask_cvtepi32_storeu_epi8(out + c, k, v);
  }
}

// acc[c] += (x[c] - zx) * w[c], 8 channels at a time in int32.
template <typename T>
static __attribute__((target("avx2"))) void tap_avx2(int32_t* acc, const T* x, const int32_t* w,
                                                     int32_t zx, int n) {
  const __m256i vzx = _mm256_set1_epi32(zx);
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    const __m128i raw = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(x + c));
    const __m256i xv =
        std::is_same_v<T, uint8_t> ? _mm256_cvtepu8_epi32(raw) : _mm256_cvtepi8_epi32(raw);
    const __m256i prod = _mm256_mullo_epi32(
        _mm256_sub_epi32(xv, vzx), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + c)));
    auto* a = reinterpret_cast<__m256i*>(acc + c);
    _mm256_storeu_si256(a, _mm256_add_epi32(_mm256_loadu_si256(a), prod));
  }
  for (; c < n; ++c) acc[c] += (int32_t{x[c]} - zx) * w[c];
}

void depthwise_tap_avx2(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n) {
  tap_avx2(acc, x, w, zx, n);
}
void depthwise_tap_avx2(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n) {
  tap_avx2(acc, x, w, zx, n);
}

}  // namespace tinycoral::host::simd

#endif  // __x86_64__
