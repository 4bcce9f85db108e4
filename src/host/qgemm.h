// The integer kernels behind CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED, at several SIMD
// levels with identical results: x86-64 AVX-512 VNNI and AVX2, aarch64 NEON with and without the
// dot-product instructions, and portable C++. Activations and weights are re-biased so that every
// dot product is unsigned-8 x signed-8 with exact (modulo 2^32) int32 accumulation; zero points are
// folded back with per-row and per-column sums (mac_weights.h):
//   x = X + ox (X uint8; ox = 0 for uint8, -128 for int8), w = W + ow (W int8; ow = 128 for uint8)
//   sum (x - zx)(w - zw) = sum X*W - aw*sum X - ax*sum W + K*ax*aw,  ax = zx - ox, aw = zw - ow.
// This file needs only the standard library and rounding.h, so that it alone (with
// tests/host/simd_kernels_check.cpp) cross-compiles for another CPU (tests/host/cross_check.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinycoral::host {

// Which kernels run. x86-64: portable, AVX2, AVX-512 VNNI; aarch64: portable, NEON, NEON with
// udot (Armv8.2 dot product). A level of the other architecture is never supported.
enum class SimdLevel { kPortable = 0, kAvx2 = 1, kAvx512Vnni = 2, kNeon = 3, kNeonDot = 4 };
const char* simd_level_name(SimdLevel level);
bool simd_level_supported(SimdLevel level);      // this CPU runs it
SimdLevel detected_simd_level();                 // the best supported level
std::vector<SimdLevel> supported_simd_levels();  // portable first, the detected one last
// The level the kernels use: the detected one unless overridden (tests, bench); an override this
// CPU cannot run falls back to the detected level.
SimdLevel active_simd_level();
void set_simd_level_override(SimdLevel level);
void clear_simd_level_override();

constexpr int kGemmKAlign = 64;  // K of the packed operands is padded with zeros to a multiple
inline int gemm_padded_k(int k) { return (k + kGemmKAlign - 1) / kGemmKAlign * kGemmKAlign; }

// C[m * ldc + n] = sum_{k < kp} A[m * lda + k] * B[n * kp + k]  (kp a multiple of kGemmKAlign),
// modulo 2^32.
void gemm_u8s8(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp, SimdLevel level);

// The VNNI kernel's own layout of B: panel p, group g of 4 k values = 64 bytes, columns
// 16p..16p+15 x k 4g..4g+3 (zero beyond n); (n + 15) / 16 panels.
std::vector<int8_t> pack_vnni_panels(const int8_t* b, int n, int kp);
// gemm_u8s8 on panels, writing all 16 columns of every panel (ldc >= n rounded up to 16). Only at
// kAvx512Vnni (returns false, writing nothing, at any other level).
bool gemm_u8s8_panels(const int8_t* panels, int n, int kp, const uint8_t* a, size_t lda, int m,
                      int32_t* c, size_t ldc, SimdLevel level);

// Copies n bytes XOR `flip` and returns the sum of the copied bytes (im2col rows).
int32_t copy_flip_sum(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip, SimdLevel level);

// One depthwise tap with multiplier 1: acc[c] += (x[c] - zx) * w[c] for c < n.
void depthwise_tap(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n,
                   SimdLevel level);
void depthwise_tap(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n,
                   SimdLevel level);

// TFLite-mode requantization constants per column, laid out for SIMD.
struct TfliteRequantTable {
  std::vector<int32_t> mult, left, right;  // multiplier, left shift, right shift per column
  int32_t zero_point = 0, lo = 0, hi = 255;
};

// out[c] = clamp(MBQM(acc[c] - aw[c] * xs + offset[c]) + zp) for c < n, TFLite mode, bytes stored
// as the low 8 bits (uint8 or int8). aw/offset may be null (= 0).
void tflite_requantize_row(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                           const TfliteRequantTable& t, int n, uint8_t* out, SimdLevel level);

}  // namespace tinycoral::host
