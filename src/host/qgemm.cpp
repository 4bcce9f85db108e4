// The dispatch of the qgemm.h kernels by SIMD level, and their portable C++ versions (the
// reference the SIMD kernels must equal, and the path on CPUs with neither x86-64 nor aarch64).
#include "host/qgemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "host/qgemm_simd.h"
#include "host/rounding.h"

namespace tinycoral::host {

namespace {

std::atomic<int> g_override{-1};

// Both operands widened to int16 first (u8 x s8 products then fit the int16 x int16 -> int32
// multiply-add every SIMD instruction set has, which compilers find in plain loops), then 2 rows x
// 2 columns per pass over k in blocks of 64, whose fixed length lets compilers vectorize at -O2.
// Products are exact; sums are modulo 2^32.
void gemm_portable(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m,
                   int n, int kp) {
  const auto skp = static_cast<size_t>(kp);
  thread_local std::vector<int16_t> wide;
  wide.resize((static_cast<size_t>(m) + static_cast<size_t>(n)) * skp);
  int16_t* wa = wide.data();
  int16_t* wb = wa + static_cast<size_t>(m) * skp;
  for (size_t i = 0; i < static_cast<size_t>(m); ++i)
    for (size_t k = 0; k < skp; ++k) wa[i * skp + k] = a[i * lda + k];
  for (size_t k = 0; k < static_cast<size_t>(n) * skp; ++k) wb[k] = b[k];
  auto dot2x2 = [kp](const int16_t* x0, const int16_t* x1, const int16_t* y0, const int16_t* y1,
                     uint32_t* s) {
    for (int k = 0; k < kp; k += kGemmKAlign) {
      int32_t s00 = 0, s01 = 0, s10 = 0, s11 = 0;
      for (int t = k; t < k + kGemmKAlign; ++t) {
        s00 += x0[t] * y0[t];
        s01 += x0[t] * y1[t];
        s10 += x1[t] * y0[t];
        s11 += x1[t] * y1[t];
      }
      s[0] += static_cast<uint32_t>(s00);
      s[1] += static_cast<uint32_t>(s01);
      s[2] += static_cast<uint32_t>(s10);
      s[3] += static_cast<uint32_t>(s11);
    }
  };
  for (int i = 0; i < m; i += 2) {
    const int i1 = std::min(i + 1, m - 1);  // an odd last row is computed twice, stored once
    for (int j = 0; j < n; j += 2) {
      const int j1 = std::min(j + 1, n - 1);
      uint32_t s[4] = {0, 0, 0, 0};
      dot2x2(wa + static_cast<size_t>(i) * skp, wa + static_cast<size_t>(i1) * skp,
             wb + static_cast<size_t>(j) * skp, wb + static_cast<size_t>(j1) * skp, s);
      int32_t* cr = c + static_cast<size_t>(i) * ldc + static_cast<size_t>(j);
      cr[0] = static_cast<int32_t>(s[0]);
      if (j1 > j) cr[1] = static_cast<int32_t>(s[1]);
      if (i1 > i) {
        cr[ldc] = static_cast<int32_t>(s[2]);
        if (j1 > j) cr[ldc + 1] = static_cast<int32_t>(s[3]);
      }
    }
  }
}

template <typename T>
void tap_portable(int32_t* acc, const T* x, const int32_t* w, int32_t zx, int n) {
  for (int c = 0; c < n; ++c) acc[c] += (int32_t{x[c]} - zx) * w[c];
}

template <typename T>
void depthwise_tap_at(int32_t* acc, const T* x, const int32_t* w, int32_t zx, int n,
                      SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx2 || level == SimdLevel::kAvx512Vnni)
    return simd::depthwise_tap_avx2(acc, x, w, zx, n);
#elif defined(__aarch64__)
  if (level == SimdLevel::kNeon || level == SimdLevel::kNeonDot)
    return simd::depthwise_tap_neon(acc, x, w, zx, n);
#endif
  (void)level;
  tap_portable(acc, x, w, zx, n);
}

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512Vnni:
      return "avx512-vnni";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kNeon:
      return "neon";
    case SimdLevel::kNeonDot:
      return "neon-dotprod";
    default:
      return "portable";
  }
}

bool simd_level_supported(SimdLevel level) {
#if defined(__x86_64__)
  __builtin_cpu_init();  // needed when called before the constructors ran (idempotent)
#endif
  switch (level) {
    case SimdLevel::kPortable:
      return true;
#if defined(__x86_64__)
    case SimdLevel::kAvx2:
      return __builtin_cpu_supports("avx2");
    case SimdLevel::kAvx512Vnni:
      return __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
#elif defined(__aarch64__)
    case SimdLevel::kNeon:
      return true;
    case SimdLevel::kNeonDot: {
      static const bool dot = simd::cpu_has_dotprod();
      return dot;
    }
#endif
    default:
      return false;
  }
}

std::vector<SimdLevel> supported_simd_levels() {
  std::vector<SimdLevel> levels;
  for (SimdLevel l : {SimdLevel::kPortable, SimdLevel::kAvx2, SimdLevel::kAvx512Vnni,
                      SimdLevel::kNeon, SimdLevel::kNeonDot})
    if (simd_level_supported(l)) levels.push_back(l);
  return levels;
}

SimdLevel detected_simd_level() {
  static const SimdLevel level = supported_simd_levels().back();
  return level;
}

SimdLevel active_simd_level() {
  const int o = g_override.load(std::memory_order_relaxed);
  if (o < 0 || !simd_level_supported(static_cast<SimdLevel>(o))) return detected_simd_level();
  return static_cast<SimdLevel>(o);
}

void set_simd_level_override(SimdLevel level) { g_override.store(static_cast<int>(level)); }
void clear_simd_level_override() { g_override.store(-1); }

void gemm_u8s8(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni) return simd::gemm_vnni(a, lda, b, c, ldc, m, n, kp);
  if (level == SimdLevel::kAvx2) return simd::gemm_avx2(a, lda, b, c, ldc, m, n, kp);
#elif defined(__aarch64__)
  if (level == SimdLevel::kNeonDot) return simd::gemm_neon_dot(a, lda, b, c, ldc, m, n, kp);
  if (level == SimdLevel::kNeon) return simd::gemm_neon(a, lda, b, c, ldc, m, n, kp);
#endif
  gemm_portable(a, lda, b, c, ldc, m, n, kp);
}

std::vector<int8_t> pack_vnni_panels(const int8_t* b, int n, int kp) {
  const auto skp = static_cast<size_t>(kp);
  std::vector<int8_t> panels(static_cast<size_t>((n + 15) / 16) * 16 * skp, 0);
  for (int r = 0; r < n; ++r)
    for (int q = 0; q < kp; ++q) {
      const size_t at = static_cast<size_t>(r / 16) * 16 * skp + static_cast<size_t>(q / 4) * 64 +
                        static_cast<size_t>(r % 16) * 4 + static_cast<size_t>(q % 4);
      panels[at] = b[static_cast<size_t>(r) * skp + static_cast<size_t>(q)];
    }
  return panels;
}

bool gemm_u8s8_panels(const int8_t* panels, int n, int kp, const uint8_t* a, size_t lda, int m,
                      int32_t* c, size_t ldc, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni) {
    simd::panels_vnni(panels, (n + 15) / 16, kp, a, lda, m, c, ldc);
    return true;
  }
#endif
  (void)panels, (void)n, (void)kp, (void)a, (void)lda, (void)m, (void)c, (void)ldc, (void)level;
  return false;
}

int32_t copy_flip_sum(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx2 || level == SimdLevel::kAvx512Vnni)
    return simd::copy_flip_sum_avx2(dst, src, n, flip);
#elif defined(__aarch64__)
  if (level == SimdLevel::kNeon || level == SimdLevel::kNeonDot)
    return simd::copy_flip_sum_neon(dst, src, n, flip);
#endif
  uint32_t sum = 0;
  for (size_t i = 0; i < n; ++i) {
    dst[i] = src[i] ^ flip;
    sum += dst[i];
  }
  return static_cast<int32_t>(sum);
}

void depthwise_tap(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n,
                   SimdLevel level) {
  depthwise_tap_at(acc, x, w, zx, n, level);
}
void depthwise_tap(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n,
                   SimdLevel level) {
  depthwise_tap_at(acc, x, w, zx, n, level);
}

void tflite_requantize_row(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                           const TfliteRequantTable& t, int n, uint8_t* out, SimdLevel level) {
#if defined(__x86_64__)
  if (level == SimdLevel::kAvx512Vnni)
    return simd::requantize_row_avx512(acc, aw, xs, offset, t, n, out);
#elif defined(__aarch64__)
  if (level == SimdLevel::kNeon || level == SimdLevel::kNeonDot)
    return simd::requantize_row_neon(acc, aw, xs, offset, t, n, out);
#endif
  for (int c = 0; c < n; ++c) {
    const auto cc = static_cast<size_t>(c);
    uint32_t x = static_cast<uint32_t>(acc[c]);
    if (aw) x -= static_cast<uint32_t>(aw[c]) * static_cast<uint32_t>(xs);
    if (offset) x += static_cast<uint32_t>(offset[c]);
    const QuantizedMultiplier q{t.mult[cc], t.left[cc] > 0 ? t.left[cc] : -t.right[cc]};
    // Added modulo 2^32 as the SIMD paths add: defined for every accumulator (real layers never
    // come near the wrap), and the same result on every level.
    const int32_t v = static_cast<int32_t>(
        static_cast<uint32_t>(multiply_by_quantized_multiplier(static_cast<int32_t>(x), q)) +
        static_cast<uint32_t>(t.zero_point));
    out[c] = static_cast<uint8_t>(std::clamp(v, t.lo, t.hi));
  }
}

}  // namespace tinycoral::host
