// The op unit's output stage (isa.md 2.1.4, device-verified): integer accumulator -> float32
// multiply
// -> float32 clamps (relative to out_zp) -> round half to even -> + out_zp -> byte. Shared by every
// class that writes requantized bytes.
#pragma once

#include <cstdint>

namespace tinycoral::chip::ops {

struct OutputStage {
  float mult = 1.0f;
  float clamp_min = 0, clamp_max = 0;  // float32, relative to out_zp
  uint8_t out_zp = 0;
};

// Rounds a float32 to the nearest integer, ties to even (the chip's rounding, not TFLite's).
float round_half_even(float value);

// acc is the exact integer accumulator (int32 on the chip); returns the stored byte. The clamps
// keep compiler-made constants inside 0..255; the final saturation only guards hand-made fields.
uint8_t requantize(int32_t acc, const OutputStage& stage);

// Everything before the rounding: f32(acc) * mult clamped, the value the non-linear unit receives.
float scale_and_clamp(int32_t acc, const OutputStage& stage);

// Rounds, adds out_zp and saturates to a byte.
uint8_t to_output_byte(float value, uint8_t out_zp);

}  // namespace tinycoral::chip::ops
