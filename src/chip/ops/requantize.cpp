// Output stage arithmetic (see requantize.h; isa.md 2.1.4).
#include "chip/ops/requantize.h"

#include <cmath>

namespace tinycoral::chip::ops {

float round_half_even(float value) {
  // std::nearbyint follows the current rounding mode, which is round-to-nearest-even by default and
  // is never changed in tinycoral.
  return std::nearbyint(value);
}

float scale_and_clamp(int32_t acc, const OutputStage& stage) {
  // Each step in float32: the int->f32 conversion rounds to nearest, then one f32 multiply.
  float y = static_cast<float>(acc) * stage.mult;
  if (y < stage.clamp_min) y = stage.clamp_min;
  if (y > stage.clamp_max) y = stage.clamp_max;
  return y;
}

uint8_t to_output_byte(float value, uint8_t out_zp) {
  if (std::isnan(value)) return out_zp;  // only reachable with hand-made NaN constants
  const float r = round_half_even(value) + static_cast<float>(out_zp);
  if (r <= 0.0f) return 0;
  if (r >= 255.0f) return 255;
  return static_cast<uint8_t>(r);
}

uint8_t requantize(int32_t acc, const OutputStage& stage) {
  return to_output_byte(scale_and_clamp(acc, stage), stage.out_zp);
}

}  // namespace tinycoral::chip::ops
