// The non-linear unit's spline evaluation and its LOGISTIC table (see nlu_spline.h).
#include "isa/nlu_spline.h"

#include <bit>
#include <cstddef>
#include <cstdint>

namespace tinycoral::isa {

float evaluate_spline(const SplineCoefficients& c, const SplineBreakpoints& b, float x) {
  size_t segment = 0;
  for (float at : b)
    if (at <= x) ++segment;
  const float* s = &c[segment * 5];
  // Separate statements: GCC does not contract them into fused multiply-adds on x86-64 SSE.
  float p = s[4];
  p = p * x;
  p = p + s[3];
  p = p * x;
  p = p + s[2];
  p = p * x;
  p = p + s[1];
  p = p * x;
  p = p + s[0];
  return p;
}

namespace {

// float32 bit patterns from isa.md 2.4 (segment-major, c0..c4), then the 7 breakpoints.
constexpr uint32_t kLogisticCoefficients[40] = {
    0x4200549c, 0x415db7c6, 0x40111a70, 0x3e29f7bb, 0x3b95f260,  //
    0x4304a187, 0x42ab6803, 0x41aee024, 0x40251eb8, 0x3df136b6,  //
    0x43077562, 0x42a46b63, 0x418371fd, 0x3f05681a, 0xbe04c80f,  //
    0x4300006a, 0x427fe396, 0xbea8c7fe, 0xc0c9f57d, 0xbf94c0e4,  //
    0x430000b8, 0x427fb331, 0x3ef2682d, 0xc0cf35b5, 0x3f9cb2b2,  //
    0x42ddc7c6, 0x42c56c6f, 0xc1d72011, 0x405be5c6, 0xbe2ff6d3,  //
    0x4343d750, 0x41efbc0b, 0xc0b6a9cd, 0x3efb0c86, 0xbc82c2d7,  //
    0x4374cc57, 0x4085560c, 0xbf168355, 0x3d187e2a, 0xba69a584};
constexpr uint32_t kLogisticBreakpoints[7] = {0xc0b479b1, 0xc03dc92e, 0xbfaba1f5, 0x3db069f8,
                                              0x3fe71fbc, 0x4099a343, 0x41078f0a};

}  // namespace

const SplineCoefficients& logistic_coefficients() {
  static const SplineCoefficients c = spline_floats(kLogisticCoefficients);
  return c;
}

const SplineBreakpoints& logistic_breakpoints() {
  static const SplineBreakpoints b = spline_floats(kLogisticBreakpoints);
  return b;
}

}  // namespace tinycoral::isa
