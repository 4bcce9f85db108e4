#include "llm/kernels.h"

#include <atomic>
#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tinycoral::llm {

namespace {

// ------------------------------------------------------------------ portable

float dot_portable(const float* a, const float* b, int n) {
  float lane[16] = {};
  int j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) lane[k] = lane[k] + a[j + k] * b[j + k];
  float y[8];
  for (int k = 0; k < 8; ++k) y[k] = lane[k] + lane[k + 8];
  if (n - j >= 8) {
    for (int k = 0; k < 8; ++k) y[k] = y[k] + a[j + k] * b[j + k];
    j += 8;
  }
  float h[4];
  for (int k = 0; k < 4; ++k) h[k] = y[k + 4] + y[k];
  float s = (h[0] + h[2]) + (h[1] + h[3]);
  for (; j < n; ++j) s = s + a[j] * b[j];
  return s;
}

float sum_portable(const float* a, int n) {
  float lane[16] = {};
  int j = 0;
  for (; j + 16 <= n; j += 16)
    for (int k = 0; k < 16; ++k) lane[k] = lane[k] + a[j + k];
  float y[8];
  for (int k = 0; k < 8; ++k) y[k] = lane[k] + lane[k + 8];
  if (n - j >= 8) {
    for (int k = 0; k < 8; ++k) y[k] = y[k] + a[j + k];
    j += 8;
  }
  float h[4];
  for (int k = 0; k < 4; ++k) h[k] = y[k + 4] + y[k];
  float s = (h[0] + h[2]) + (h[1] + h[3]);
  for (; j < n; ++j) s = s + a[j];
  return s;
}

void exp_shifted_portable(float* x, int n, float shift) {
  for (int j = 0; j < n; ++j) x[j] = std::exp(x[j] - shift);
}

void axpy_portable(float a, const float* x, float* y, int n) {
  for (int j = 0; j < n; ++j) y[j] = y[j] + a * x[j];
}

void axpy_dequantized_portable(float a, const int8_t* q, int32_t zero, float scale, float* y,
                               int n) {
  for (int j = 0; j < n; ++j) y[j] += a * (static_cast<float>(int32_t{q[j]} - zero) * scale);
}

void axpy_int8_portable(int32_t a, const int8_t* q, int32_t* acc, int n) {
  for (int j = 0; j < n; ++j) acc[j] += a * int32_t{q[j]};
}

void matvec_portable(const float* w, const float* x, float* out, int n, int begin, int end) {
  for (int i = begin; i < end; ++i) out[i] = dot_portable(w + size_t(i) * size_t(n), x, n);
}

void matvec_q8f_portable(const int8_t* w, const float* x, float* out, int n, int begin, int end) {
  for (int i = begin; i < end; ++i) {
    const int8_t* row = w + size_t(i) * size_t(n);
    float s = 0;
    for (int j = 0; j < n; ++j) s += float(row[j]) * x[j];
    out[i] = s;
  }
}

void matvec_int8_portable(const int8_t* w, const int8_t* x, int32_t* acc, int n, int begin,
                          int end) {
  for (int i = begin; i < end; ++i) {
    const int8_t* row = w + size_t(i) * size_t(n);
    int32_t s = 0;
    for (int j = 0; j < n; ++j) s += int32_t(row[j]) * int32_t(x[j]);
    acc[i] = s;
  }
}

// ------------------------------------------------------------------ AVX2 + FMA
#if defined(__x86_64__)
#define TC_AVX2 __attribute__((target("avx2,fma")))

// glibc's libmvec (linked through libm's AS_NEEDED group): 8 lanes of expf for AVX2.
extern "C" TC_AVX2 __m256 _ZGVdN8v_expf(__m256 x);

// The 8 -> 1 fold of gcc's reduction epilogue: (h0 + h2) + (h1 + h3) with h = hi128 + lo128.
TC_AVX2 inline float fold8(__m256 y) {
  __m128 h = _mm_add_ps(_mm256_extractf128_ps(y, 1), _mm256_castps256_ps128(y));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_shuffle_ps(h, h, 0x55)));
}

TC_AVX2 float dot_avx2(const float* a, const float* b, int n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    lo = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), lo);
    hi = _mm256_fmadd_ps(_mm256_loadu_ps(a + j + 8), _mm256_loadu_ps(b + j + 8), hi);
  }
  __m256 y = _mm256_add_ps(lo, hi);
  if (n - j >= 8) {
    y = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), y);
    j += 8;
  }
  float s = fold8(y);
  for (; j < n; ++j) s = __builtin_fmaf(a[j], b[j], s);
  return s;
}

TC_AVX2 float sum_avx2(const float* a, int n) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    lo = _mm256_add_ps(_mm256_loadu_ps(a + j), lo);
    hi = _mm256_add_ps(_mm256_loadu_ps(a + j + 8), hi);
  }
  __m256 y = _mm256_add_ps(lo, hi);
  if (n - j >= 8) {
    y = _mm256_add_ps(_mm256_loadu_ps(a + j), y);
    j += 8;
  }
  float s = fold8(y);
  for (; j < n; ++j) s = s + a[j];
  return s;
}

TC_AVX2 void exp_shifted_avx2(float* x, int n, float shift) {
  const __m256 s = _mm256_set1_ps(shift);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(x + j, _ZGVdN8v_expf(_mm256_sub_ps(_mm256_loadu_ps(x + j), s)));
  for (; j < n; ++j) x[j] = std::exp(x[j] - shift);
}

TC_AVX2 void axpy_avx2(float a, const float* x, float* y, int n) {
  const __m256 va = _mm256_set1_ps(a);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(y + j, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + j), _mm256_loadu_ps(y + j)));
  for (; j < n; ++j) y[j] = __builtin_fmaf(a, x[j], y[j]);
}

// AVX2 without FMA: the compiler may not contract the product and the sum into one rounding.
__attribute__((target("avx2"))) void axpy_dequantized_avx2(float a, const int8_t* q, int32_t zero,
                                                           float scale, float* y, int n) {
  const __m256 va = _mm256_set1_ps(a), vs = _mm256_set1_ps(scale);
  const __m256i vz = _mm256_set1_epi32(zero);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + j));
    const __m256 x =
        _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_cvtepi8_epi32(bytes), vz)), vs);
    _mm256_storeu_ps(y + j, _mm256_add_ps(_mm256_loadu_ps(y + j), _mm256_mul_ps(va, x)));
  }
  axpy_dequantized_portable(a, q + j, zero, scale, y + j, n - j);
}

__attribute__((target("avx2"))) void axpy_int8_avx2(int32_t a, const int8_t* q, int32_t* acc,
                                                    int n) {
  const __m256i va = _mm256_set1_epi32(a);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + j));
    const __m256i x = _mm256_mullo_epi32(_mm256_cvtepi8_epi32(bytes), va);
    __m256i* y = reinterpret_cast<__m256i*>(acc + j);
    _mm256_storeu_si256(y, _mm256_add_epi32(_mm256_loadu_si256(y), x));
  }
  axpy_int8_portable(a, q + j, acc + j, n - j);
}

// One row at a time, front to back: the weights stream through memory in order, which measured
// faster than interleaving 2 or 4 rows (bench: 9 ms vs 12-15 ms per token of stories15M's matmuls).
TC_AVX2 void matvec_avx2(const float* w, const float* x, float* out, int n, int begin, int end) {
  for (int i = begin; i < end; ++i) out[i] = dot_avx2(w + size_t(i) * size_t(n), x, n);
}

TC_AVX2 void matvec_q8f_avx2(const int8_t* w, const float* x, float* out, int n, int begin,
                             int end) {
  for (int i = begin; i < end; ++i) {
    const int8_t* row = w + size_t(i) * size_t(n);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + j));
      a0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b)), _mm256_loadu_ps(x + j), a0);
      a1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(b, 8))),
                           _mm256_loadu_ps(x + j + 8), a1);
    }
    float s = fold8(_mm256_add_ps(a0, a1));
    for (; j < n; ++j) s += float(row[j]) * x[j];
    out[i] = s;
  }
}

TC_AVX2 inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

TC_AVX2 inline __m256i load16(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// int8 x int8 -> int32 exactly: both widened to int16, pairs multiplied and added into int32
// (madd never saturates on int8 inputs).
TC_AVX2 void matvec_int8_avx2(const int8_t* w, const int8_t* x, int32_t* acc, int n, int begin,
                              int end) {
  int i = begin;
  for (; i + 4 <= end; i += 4) {
    const int8_t* r0 = w + size_t(i) * size_t(n);
    __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
    int j = 0;
    for (; j + 16 <= n; j += 16) {
      const __m256i xv = load16(x + j);
      s0 = _mm256_add_epi32(s0, _mm256_madd_epi16(load16(r0 + j), xv));
      s1 = _mm256_add_epi32(s1, _mm256_madd_epi16(load16(r0 + n + j), xv));
      s2 = _mm256_add_epi32(s2, _mm256_madd_epi16(load16(r0 + 2 * size_t(n) + j), xv));
      s3 = _mm256_add_epi32(s3, _mm256_madd_epi16(load16(r0 + 3 * size_t(n) + j), xv));
    }
    int32_t t[4] = {hsum_epi32(s0), hsum_epi32(s1), hsum_epi32(s2), hsum_epi32(s3)};
    for (int r = 0; r < 4; ++r) {
      for (int k = j; k < n; ++k) t[r] += int32_t(r0[size_t(r) * size_t(n) + k]) * int32_t(x[k]);
      acc[i + r] = t[r];
    }
  }
  if (i < end) matvec_int8_portable(w, x, acc, n, i, end);
}
#endif

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

std::atomic<bool> use_avx2{cpu_has_avx2_fma()};

}  // namespace

bool kernels_use_avx2() { return use_avx2.load(std::memory_order_relaxed); }
void set_kernels_use_avx2(bool use) { use_avx2 = use && cpu_has_avx2_fma(); }

#if defined(__x86_64__)
#define TC_DISPATCH(name, ...) \
  return kernels_use_avx2() ? name##_avx2(__VA_ARGS__) : name##_portable(__VA_ARGS__)
#else
#define TC_DISPATCH(name, ...) return name##_portable(__VA_ARGS__)
#endif

float dot(const float* a, const float* b, int n) { TC_DISPATCH(dot, a, b, n); }
float sum16(const float* a, int n) { TC_DISPATCH(sum, a, n); }
void exp_shifted(float* x, int n, float shift) { TC_DISPATCH(exp_shifted, x, n, shift); }
void axpy(float a, const float* x, float* y, int n) { TC_DISPATCH(axpy, a, x, y, n); }
void axpy_dequantized(float a, const int8_t* q, int32_t zero, float scale, float* y, int n) {
  TC_DISPATCH(axpy_dequantized, a, q, zero, scale, y, n);
}
void axpy_int8(int32_t a, const int8_t* q, int32_t* acc, int n) {
  TC_DISPATCH(axpy_int8, a, q, acc, n);
}
void matvec_rows(const float* w, const float* x, float* out, int n, int begin, int end) {
  TC_DISPATCH(matvec, w, x, out, n, begin, end);
}
void matvec_q8f_rows(const int8_t* w, const float* x, float* out, int n, int begin, int end) {
  TC_DISPATCH(matvec_q8f, w, x, out, n, begin, end);
}
void matvec_int8_rows(const int8_t* w, const int8_t* x, int32_t* acc, int n, int begin, int end) {
  TC_DISPATCH(matvec_int8, w, x, acc, n, begin, end);
}

}  // namespace tinycoral::llm
