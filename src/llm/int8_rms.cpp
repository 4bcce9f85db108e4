#include "llm/int8_rms.h"

#include <bit>

#include "common/error.h"

namespace tinycoral::llm {

int32_t sum_of_squares(const int8_t* x, int n, int32_t zero_point) {
  if (n > 33000) fail("a sum of squares of ", n, " bytes could leave int32");
  int32_t ss = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t d = int32_t{x[i]} - zero_point;
    ss += d * d;
  }
  return ss;
}

float rms_mean_multiplier(float scale, int n) {
  return static_cast<float>(double{scale} * double{scale} / double(n));
}

float scalar_core_rsqrt(float a) {
  float y = std::bit_cast<float>(kRsqrtMagic - (std::bit_cast<uint32_t>(a) >> 1));
  const float minus_half_a = a * -0.5f;
  for (int step = 0; step < kRsqrtNewtonSteps; ++step) {
    float t = y * y;
    t = t * minus_half_a;
    t = t + 1.5f;
    y = y * t;
  }
  return y;
}

float scalar_core_rms_scale(int32_t ss, float c) {
  float a = static_cast<float>(ss);
  a = a * c;
  a = a + kRmsEpsilon;
  return scalar_core_rsqrt(a);
}

float chip_rms_scale(const int8_t* x, int n, float scale, int32_t zero_point) {
  return scalar_core_rms_scale(sum_of_squares(x, n, zero_point), rms_mean_multiplier(scale, n));
}

}  // namespace tinycoral::llm
