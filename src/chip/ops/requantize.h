// The op unit's output stage (isa.md 2.1.4, device-verified): integer accumulator -> float32
// multiply -> float32 clamps (relative to out_zp) -> round half to even -> + out_zp -> byte. Shared
// by every class that writes requantized bytes. Inline: it runs once per output byte.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tinycoral::chip::ops {

struct OutputStage {
  float mult = 1.0f;
  float clamp_min = 0, clamp_max = 0;  // float32, relative to out_zp
  uint8_t out_zp = 0;
};

// Rounds a float32 to the nearest integer, ties to even (the chip's rounding, not TFLite's).
// Below 2^23 in magnitude, adding and removing 2^23 leaves an integer rounded in the current
// rounding mode, which is round-to-nearest-even by default and never changed in tinycoral: the same
// result as std::nearbyint without its library call. From 2^23 on (and for NaN) every float is
// already integral.
inline float round_half_even(float value) {
  constexpr float kTwo23 = 8388608.0f;
  const float magnitude = std::fabs(value);
  if (!(magnitude < kTwo23)) return value;
  return std::copysign((magnitude + kTwo23) - kTwo23, value);
}

// Everything before the rounding: f32(acc) * mult clamped, the value the non-linear unit receives.
inline float scale_and_clamp(int32_t acc, const OutputStage& stage) {
  // Each step in float32: the int->f32 conversion rounds to nearest, then one f32 multiply.
  float y = static_cast<float>(acc) * stage.mult;
  if (y < stage.clamp_min) y = stage.clamp_min;
  if (y > stage.clamp_max) y = stage.clamp_max;
  return y;
}

// Rounds, adds out_zp and saturates to a byte.
inline uint8_t to_output_byte(float value, uint8_t out_zp) {
  if (std::isnan(value)) return out_zp;  // only reachable with hand-made NaN constants
  const float r = round_half_even(value) + static_cast<float>(out_zp);
  if (r <= 0.0f) return 0;
  if (r >= 255.0f) return 255;
  return static_cast<uint8_t>(r);
}

// acc is the exact integer accumulator (int32 on the chip); returns the stored byte. The clamps
// keep compiler-made constants inside 0..255; the final saturation only guards hand-made fields.
inline uint8_t requantize(int32_t acc, const OutputStage& stage) {
  return to_output_byte(scale_and_clamp(acc, stage), stage.out_zp);
}

// Whether requantize4 may take its SIMD path for this stage: a finite multiplier (f32(acc) * mult
// is then never NaN) and clamps that are not NaN. The SIMD path also clamps to +-2^24, where every
// rounded value and its sum with out_zp are exact in both int32 and float32: anything beyond
// saturates to 0 or 255 on both paths.
inline bool requantize4_fast(const OutputStage& stage) {
  return std::isfinite(stage.mult) && !std::isnan(stage.clamp_min) && !std::isnan(stage.clamp_max);
}

#if defined(__SSE2__)
// The SIMD steps of requantize4 on accumulators already in a register, with the stage's constants
// broadcast once per op (RequantizeConstants): the 4 bytes as one little-endian word.
struct RequantizeConstants {
  static constexpr float kExact = 16777216.0f;
  explicit RequantizeConstants(const OutputStage& stage)
      : mult(_mm_set1_ps(stage.mult)),
        lo(_mm_set1_ps(std::max(stage.clamp_min, -kExact))),
        hi(_mm_set1_ps(std::min(stage.clamp_max, kExact))),
        zp(_mm_set1_epi32(stage.out_zp)) {}
  __m128 mult, lo, hi;
  __m128i zp;
};
// `mult`: the 4 columns' multipliers (per-channel ops), else k.mult.
inline int32_t requantize4_sse(__m128i acc, const RequantizeConstants& k, __m128 mult) {
  __m128 y = _mm_mul_ps(_mm_cvtepi32_ps(acc), mult);
  y = _mm_min_ps(_mm_max_ps(y, k.lo), k.hi);
  const __m128i r = _mm_add_epi32(_mm_cvtps_epi32(y), k.zp);
  const __m128i words = _mm_packs_epi32(r, r);
  return _mm_cvtsi128_si32(_mm_packus_epi16(words, words));
}
inline int32_t requantize4_sse(__m128i acc, const RequantizeConstants& k) {
  return requantize4_sse(acc, k, k.mult);
}
#endif

// requantize() of 4 accumulators into 4 bytes. With `fast` (requantize4_fast), SSE2 does the same
// float32 steps: int->f32 conversion and multiply rounding to nearest, the clamps as max then min
// (no NaN can arise: finite multiplier), cvtps2dq's round half to even (the default rounding
// mode), then + out_zp with the packs saturating to 0..255 exactly like the scalar comparisons.
inline void requantize4(const int32_t* acc, const OutputStage& stage, bool fast, uint8_t* out) {
#if defined(__SSE2__)
  if (fast) {
    const int32_t bytes = requantize4_sse(_mm_loadu_si128(reinterpret_cast<const __m128i*>(acc)),
                                          RequantizeConstants(stage));
    std::memcpy(out, &bytes, 4);
    return;
  }
#endif
  for (int b = 0; b < 4; ++b) out[b] = requantize(acc[b], stage);
}

}  // namespace tinycoral::chip::ops
