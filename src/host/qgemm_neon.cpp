// aarch64 kernels of qgemm.h. NEON (every aarch64 CPU): u8 x s8 products fit in int16 (-32640 ..
// 32385), so 8 of them are one vmulq_s16 and pairs are summed into int32 by vpadalq_s16, exactly.
// NEON with dot product (Armv8.2 udot, e.g. the Raspberry Pi 5's Cortex-A76; the Pi 4's A72 has
// none): udot multiplies unsigned by unsigned, so B is flipped to B + 128 and 128 * sum A taken
// back: sum A*B = sum A*(B + 128) - 128 * sum A (modulo 2^32, like every level).
#if defined(__aarch64__)
#include <arm_neon.h>

#include <algorithm>
#include <type_traits>

#if defined(__linux__)
#include <sys/auxv.h>
#endif

#include "host/qgemm_simd.h"
#include "host/rounding.h"

#define TC_DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

namespace tinycoral::host::simd {

namespace {

inline int32x4_t dot16_neon(int32x4_t acc, uint8x16_t a, int8x16_t b) {
  const int16x8_t lo =
      vmulq_s16(vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(a))), vmovl_s8(vget_low_s8(b)));
  const int16x8_t hi = vmulq_s16(vreinterpretq_s16_u16(vmovl_high_u8(a)), vmovl_high_s8(b));
  return vpadalq_s16(vpadalq_s16(acc, lo), hi);
}

// R rows x C columns of C = A * B^T, 16 k values per step.
template <int R, int C>
void block_neon(const uint8_t* a, size_t lda, const int8_t* b, size_t ldb, int32_t* c, size_t ldc,
                int kp) {
  int32x4_t acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q) acc[r][q] = vdupq_n_s32(0);
  for (int k = 0; k < kp; k += 16) {
    int8x16_t vb[C];
    for (int q = 0; q < C; ++q) vb[q] = vld1q_s8(b + static_cast<size_t>(q) * ldb + k);
    for (int r = 0; r < R; ++r) {
      const uint8x16_t va = vld1q_u8(a + static_cast<size_t>(r) * lda + k);
      for (int q = 0; q < C; ++q) acc[r][q] = dot16_neon(acc[r][q], va, vb[q]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q)
      c[static_cast<size_t>(r) * ldc + static_cast<size_t>(q)] = vaddvq_s32(acc[r][q]);
}

// sum of kp bytes (kp a multiple of 16), modulo 2^32.
inline uint32_t row_sum(const uint8_t* a, int kp) {
  uint32x4_t s = vdupq_n_u32(0);
  for (int k = 0; k < kp; k += 16) s = vpadalq_u16(s, vpaddlq_u8(vld1q_u8(a + k)));
  return vaddvq_u32(s);
}

template <int R, int C>
TC_DOTPROD void block_dot(const uint8_t* a, size_t lda, const int8_t* b, size_t ldb, int32_t* c,
                          size_t ldc, int kp, const uint32_t* a_sum) {
  const uint8x16_t flip = vdupq_n_u8(0x80);
  uint32x4_t acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q) acc[r][q] = vdupq_n_u32(0);
  for (int k = 0; k < kp; k += 16) {
    uint8x16_t vb[C];
    for (int q = 0; q < C; ++q)
      vb[q] = veorq_u8(vreinterpretq_u8_s8(vld1q_s8(b + static_cast<size_t>(q) * ldb + k)), flip);
    for (int r = 0; r < R; ++r) {
      const uint8x16_t va = vld1q_u8(a + static_cast<size_t>(r) * lda + k);
      for (int q = 0; q < C; ++q) acc[r][q] = vdotq_u32(acc[r][q], va, vb[q]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int q = 0; q < C; ++q)
      c[static_cast<size_t>(r) * ldc + static_cast<size_t>(q)] =
          static_cast<int32_t>(vaddvq_u32(acc[r][q]) - 128u * a_sum[r]);
}

// Tiles C into R x C blocks with single rows and columns at the edges.
template <int R, int C, typename Block>
void tile(int m, int n, Block&& block) {
  int i = 0;
  for (; i + R <= m; i += R) {
    int j = 0;
    for (; j + C <= n; j += C)
      block(std::integral_constant<int, R>{}, std::integral_constant<int, C>{}, i, j);
    for (; j < n; ++j)
      block(std::integral_constant<int, R>{}, std::integral_constant<int, 1>{}, i, j);
  }
  for (; i < m; ++i) {
    int j = 0;
    for (; j + C <= n; j += C)
      block(std::integral_constant<int, 1>{}, std::integral_constant<int, C>{}, i, j);
    for (; j < n; ++j)
      block(std::integral_constant<int, 1>{}, std::integral_constant<int, 1>{}, i, j);
  }
}

template <typename T>
void tap(int32_t* acc, const T* x, const int32_t* w, int32_t zx, int n) {
  const int16x8_t vzx = vdupq_n_s16(static_cast<int16_t>(zx));  // x - zx fits in int16
  int c = 0;
  for (; c + 8 <= n; c += 8) {
    int16x8_t xv;
    if constexpr (std::is_same_v<T, uint8_t>)
      xv = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(x + c)));
    else
      xv = vmovl_s8(vld1_s8(x + c));
    xv = vsubq_s16(xv, vzx);
    vst1q_s32(acc + c,
              vmlaq_s32(vld1q_s32(acc + c), vmovl_s16(vget_low_s16(xv)), vld1q_s32(w + c)));
    vst1q_s32(acc + c + 4,
              vmlaq_s32(vld1q_s32(acc + c + 4), vmovl_high_s16(xv), vld1q_s32(w + c + 4)));
  }
  for (; c < n; ++c) acc[c] += (int32_t{x[c]} - zx) * w[c];
}

// 4 lanes of TFLite's MultiplyByQuantizedMultiplier, bit-exact with the scalar code: vqrdmulh is
// gemmlowp's SaturatingRoundingDoublingHighMul (the same nudge, the same saturation), and a
// rounding shift after subtracting 1 from negative values rounds ties away from zero as
// RoundingDivideByPOT does (the saturating add keeps INT32_MIN, whose quotient is exact).
inline int32x4_t mbqm4(int32x4_t x, int32x4_t mult, int32x4_t left, int32x4_t neg_right) {
  const int32x4_t hm = vqrdmulhq_s32(vshlq_s32(x, left), mult);
  const int32x4_t fixup = vshrq_n_s32(vandq_s32(hm, neg_right), 31);
  return vrshlq_s32(vqaddq_s32(hm, fixup), neg_right);
}

}  // namespace

bool cpu_has_dotprod() {
#if defined(__linux__) && defined(HWCAP_ASIMDDP)
  return (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
#elif defined(__ARM_FEATURE_DOTPROD)
  return true;
#else
  return false;
#endif
}

void gemm_neon(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp) {
  const auto ldb = static_cast<size_t>(kp);
  tile<2, 4>(m, n, [&](auto rows, auto cols, int i, int j) {
    block_neon<decltype(rows)::value, decltype(cols)::value>(
        a + static_cast<size_t>(i) * lda, lda, b + static_cast<size_t>(j) * ldb, ldb,
        c + static_cast<size_t>(i) * ldc + static_cast<size_t>(j), ldc, kp);
  });
}

void gemm_neon_dot(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m,
                   int n, int kp) {
  const auto ldb = static_cast<size_t>(kp);
  constexpr int kRows = 4;
  for (int i0 = 0; i0 < m; i0 += kRows) {
    const int rows = std::min(kRows, m - i0);
    uint32_t a_sum[kRows];
    for (int r = 0; r < rows; ++r) a_sum[r] = row_sum(a + static_cast<size_t>(i0 + r) * lda, kp);
    tile<kRows, 4>(rows, n, [&](auto rr, auto cols, int i, int j) {
      block_dot<decltype(rr)::value, decltype(cols)::value>(
          a + static_cast<size_t>(i0 + i) * lda, lda, b + static_cast<size_t>(j) * ldb, ldb,
          c + static_cast<size_t>(i0 + i) * ldc + static_cast<size_t>(j), ldc, kp, a_sum + i);
    });
  }
}

int32_t copy_flip_sum_neon(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip) {
  const uint8x16_t vf = vdupq_n_u8(flip);
  uint32x4_t sums = vdupq_n_u32(0);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const uint8x16_t v = veorq_u8(vld1q_u8(src + i), vf);
    vst1q_u8(dst + i, v);
    sums = vpadalq_u16(sums, vpaddlq_u8(v));
  }
  uint32_t sum = vaddvq_u32(sums);
  for (; i < n; ++i) {
    dst[i] = src[i] ^ flip;
    sum += dst[i];
  }
  return static_cast<int32_t>(sum);
}

void depthwise_tap_neon(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n) {
  tap(acc, x, w, zx, n);
}
void depthwise_tap_neon(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n) {
  tap(acc, x, w, zx, n);
}

void requantize_row_neon(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                         const TfliteRequantTable& t, int n, uint8_t* out) {
  const int32x4_t vxs = vdupq_n_s32(xs);
  const int32x4_t zp = vdupq_n_s32(t.zero_point);
  const int32x4_t lo = vdupq_n_s32(t.lo), hi = vdupq_n_s32(t.hi);
  int c = 0;
  for (; c + 4 <= n; c += 4) {
    int32x4_t x = vld1q_s32(acc + c);
    if (aw) x = vmlsq_s32(x, vld1q_s32(aw + c), vxs);
    if (offset) x = vaddq_s32(x, vld1q_s32(offset + c));
    int32x4_t v = mbqm4(x, vld1q_s32(t.mult.data() + c), vld1q_s32(t.left.data() + c),
                        vnegq_s32(vld1q_s32(t.right.data() + c)));
    v = vminq_s32(vmaxq_s32(vaddq_s32(v, zp), lo), hi);
    const uint16x4_t narrow = vmovn_u32(vreinterpretq_u32_s32(v));
    const uint8x8_t bytes = vmovn_u16(vcombine_u16(narrow, narrow));
    vst1_lane_u32(reinterpret_cast<uint32_t*>(out + c), vreinterpret_u32_u8(bytes), 0);
  }
  for (; c < n; ++c) {
    const auto cc = static_cast<size_t>(c);
    uint32_t x = static_cast<uint32_t>(acc[c]);
    if (aw) x -= static_cast<uint32_t>(aw[c]) * static_cast<uint32_t>(xs);
    if (offset) x += static_cast<uint32_t>(offset[c]);
    const QuantizedMultiplier q{t.mult[cc], t.left[cc] > 0 ? t.left[cc] : -t.right[cc]};
    const int32_t v = multiply_by_quantized_multiplier(static_cast<int32_t>(x), q) + t.zero_point;
    out[c] = static_cast<uint8_t>(std::clamp(v, t.lo, t.hi));
  }
}

}  // namespace tinycoral::host::simd

#endif  // __aarch64__
