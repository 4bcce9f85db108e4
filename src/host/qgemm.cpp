// The u8 x s8 integer GEMM at three SIMD levels with identical results (qgemm.h).
#include "host/qgemm.h"

// GCC 12's _mm512_reduce_add_epi32 trips -Wmaybe-uninitialized inside its own header (clang
// has no such warning and would reject the pragma under -Werror).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace tinycoral::host {

namespace {

std::atomic<int> g_override{-1};

void gemm_portable(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m,
                   int n, int kp) {
  for (int i = 0; i < m; ++i) {
    const uint8_t* ar = a + static_cast<size_t>(i) * lda;
    for (int j = 0; j < n; ++j) {
      const int8_t* br = b + static_cast<size_t>(j) * static_cast<size_t>(kp);
      int32_t acc = 0;
      for (int k = 0; k < kp; ++k) acc += int32_t{ar[k]} * int32_t{br[k]};
      c[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = acc;
    }
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) inline int32_t hsum256(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// u8 x s8 products widened to int16, pairs summed to int32 by vpmaddwd: exact.
__attribute__((target("avx2"))) inline __m256i dot16_avx2(__m256i acc, const uint8_t* a,
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
TC_VNNI __m512i high_mul_even(__m512i a, __m512i b) {
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
TC_VNNI __m512i mbqm16(__m512i x, __m512i mult, __m512i left, __m512i right) {
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
#endif

}  // namespace

TfliteRequantTable make_tflite_table(const std::vector<ChannelScale>& scales,
                                     const OutputStage& st) {
  TfliteRequantTable t;
  for (const auto& s : scales) {
    t.mult.push_back(s.q.multiplier);
    t.left.push_back(s.q.shift > 0 ? s.q.shift : 0);
    t.right.push_back(s.q.shift > 0 ? 0 : -s.q.shift);
  }
  t.zero_point = st.zero_point;
  t.lo = st.act.min;
  t.hi = st.act.max;
  return t;
}

void tflite_requantize_row(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                           const TfliteRequantTable& t, int n, uint8_t* out, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni) return requantize_row_avx512(acc, aw, xs, offset, t, n, out);
#endif
  (void)level;
  for (int c = 0; c < n; ++c) {
    const auto cc = static_cast<size_t>(c);
    uint32_t x = static_cast<uint32_t>(acc[c]);
    if (aw) x -= static_cast<uint32_t>(aw[c]) * static_cast<uint32_t>(xs);
    if (offset) x += static_cast<uint32_t>(offset[c]);
    const QuantizedMultiplier q{t.mult[cc], t.left[cc] > 0 ? t.left[cc] : -t.right[cc]};
    const int32_t v = multiply_by_quantized_multiplier(static_cast<int32_t>(x), q) + t.zero_point;
    out[c] = static_cast<uint8_t>(std::clamp(v, t.lo, t.hi));
  }
}

int32_t copy_flip_sum(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip, SimdLevel level) {
#if defined(__x86_64__)
  if (level != SimdLevel::kPortable) return copy_flip_sum_avx2(dst, src, n, flip);
#endif
  (void)level;
  int32_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    dst[i] = src[i] ^ flip;
    sum += dst[i];
  }
  return sum;
}

void set_mac_offsets(PackedWeights& pw, int32_t ax, const OutputStage& stage) {
  if (stage.mode == Rounding::kTflite) pw.table = make_tflite_table(pw.scale, stage);
  pw.offset.resize(static_cast<size_t>(pw.n));
  for (size_t c = 0; c < pw.offset.size(); ++c) {
    const int64_t v =
        int64_t{pw.bias[c]} + int64_t{pw.k} * ax * pw.aw[c] - int64_t{ax} * pw.w_sum[c];
    pw.offset[c] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  }
}

void mac_dots(const PackedWeights& pw, const uint8_t* a, size_t lda, int m, int32_t* dots,
              SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni && !pw.panels.empty())
    return panels_vnni(pw.panels.data(), pw.ldc() / 16, pw.kp, a, lda, m, dots,
                       static_cast<size_t>(pw.ldc()));
#endif
  gemm_u8s8(a, lda, pw.w.data(), dots, static_cast<size_t>(pw.ldc()), m, pw.n, pw.kp, level);
}

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512Vnni:
      return "avx512-vnni";
    case SimdLevel::kAvx2:
      return "avx2";
    default:
      return "portable";
  }
}

SimdLevel detected_simd_level() {
#if defined(__x86_64__)
  static const SimdLevel level = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
      return SimdLevel::kAvx512Vnni;
    if (__builtin_cpu_supports("avx2")) return SimdLevel::kAvx2;
    return SimdLevel::kPortable;
  }();
  return level;
#else
  return SimdLevel::kPortable;
#endif
}

SimdLevel active_simd_level() {
  const int o = g_override.load(std::memory_order_relaxed);
  const SimdLevel d = detected_simd_level();
  if (o < 0) return d;
  return static_cast<int>(d) < o ? d : static_cast<SimdLevel>(o);
}

void set_simd_level_override(SimdLevel level) { g_override.store(static_cast<int>(level)); }
void clear_simd_level_override() { g_override.store(-1); }

void gemm_u8s8(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni) return gemm_vnni(a, lda, b, c, ldc, m, n, kp);
  if (level == SimdLevel::kAvx2) return gemm_avx2(a, lda, b, c, ldc, m, n, kp);
#endif
  (void)level;
  gemm_portable(a, lda, b, c, ldc, m, n, kp);
}

PackedWeights pack_mac_weights(const OpContext& ctx, const TensorView& input,
                               const TensorView& weights, const TensorView* bias,
                               const TensorView& output, int n, int k) {
  ctx.require(weights.constant, cat("weights '", weights.name(), "' must be constant"));
  ctx.require(
      weights.type() == input.type(),
      cat("weights '", weights.name(), "' are ", container::tensor_type_name(weights.type()),
          " but the input is ", container::tensor_type_name(input.type())));
  ctx.require(weights.elements() == int64_t{n} * k, "weights do not match the operator's shape");
  ctx.require(k > 0 && k <= (1 << 20), cat("reduction size ", k, " out of range"));
  PackedWeights pw;
  pw.n = n;
  pw.k = k;
  pw.kp = gemm_padded_k(k);
  pw.scale = mac_channel_scales(ctx, input, weights, output, n);
  const auto& zps = weights.quant().zero_point;
  ctx.require(zps.size() <= 1 || zps.size() == static_cast<size_t>(n),
              "weight zero points do not match the output channels");
  const bool u8 = weights.type() == container::TensorType::kUInt8;
  const int32_t ow = u8 ? 128 : 0;
  pw.w.assign(static_cast<size_t>(n) * static_cast<size_t>(pw.kp), 0);
  pw.w_sum.assign(static_cast<size_t>(n), 0);
  pw.aw.assign(static_cast<size_t>(n), 0);
  pw.bias.assign(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const size_t rr = static_cast<size_t>(r);
    const int64_t zw = zps.empty() ? 0 : (zps.size() == 1 ? zps[0] : zps[rr]);
    pw.aw[rr] = static_cast<int32_t>(zw) - ow;
    int32_t sum = 0;
    for (int q = 0; q < k; ++q) {
      const size_t src = rr * static_cast<size_t>(k) + static_cast<size_t>(q);
      const int32_t w = u8 ? int32_t{weights.data[src]} : int32_t{weights.as<int8_t>()[src]};
      const auto biased = static_cast<int8_t>(w - ow);
      pw.w[rr * static_cast<size_t>(pw.kp) + static_cast<size_t>(q)] = biased;
      sum += biased;
    }
    pw.w_sum[rr] = sum;
  }
  if (bias && bias->present()) {
    ctx.require(bias->constant, "bias must be constant");
    ctx.require(bias->type() == container::TensorType::kInt32,
                cat("bias '", bias->name(), "' must be int32, is ",
                    container::tensor_type_name(bias->type())));
    ctx.require(bias->elements() == n,
                cat("bias has ", bias->elements(), " values for ", n, " output channels"));
    for (int r = 0; r < n; ++r) pw.bias[static_cast<size_t>(r)] = bias->as<int32_t>()[r];
  }
  if (detected_simd_level() == SimdLevel::kAvx512Vnni) {
    const int np = pw.ldc() / 16;
    pw.panels.assign(static_cast<size_t>(np) * 16 * static_cast<size_t>(pw.kp), 0);
    for (int r = 0; r < n; ++r)
      for (int q = 0; q < k; ++q) {
        const size_t at = static_cast<size_t>(r / 16) * 16 * static_cast<size_t>(pw.kp) +
                          static_cast<size_t>(q / 4) * 64 + static_cast<size_t>(r % 16) * 4 +
                          static_cast<size_t>(q % 4);
        pw.panels[at] =
            pw.w[static_cast<size_t>(r) * static_cast<size_t>(pw.kp) + static_cast<size_t>(q)];
      }
  }
  return pw;
}

}  // namespace tinycoral::host
