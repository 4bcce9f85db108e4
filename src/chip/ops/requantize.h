// The op unit's output stage (isa.md 2.1.4, device-verified): integer accumulator -> float32
// multiply -> float32 clamps (relative to out_zp) -> round half to even -> + out_zp -> byte. Shared
// by every class that writes requantized bytes. Inline: it runs once per output byte.
#pragma once

#include <cmath>
#include <cstdint>

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

}  // namespace tinycoral::chip::ops
