// The non-linear unit's spline (isa.md 2.4), shared by the simulator (chip/ops/nlu.h) and the CPU
// reference's `edgetpu` rounding (host/ops/edgetpu_spline.h), which must compute the same floats:
// an 8-segment quartic in float32 whose table the 0x19 instruction loads, and the one LOGISTIC
// table every compiled LOGISTIC loads.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

namespace tinycoral::isa {

using SplineCoefficients = std::array<float, 40>;  // c[segment][power], segment-major, c0..c4
using SplineBreakpoints = std::array<float, 7>;    // segment = number of breakpoints <= x

// A table written as float32 bit patterns (as isa.md gives them).
template <size_t N>
std::array<float, N> spline_floats(const uint32_t (&bits)[N]) {
  std::array<float, N> out{};
  for (size_t i = 0; i < N; ++i) out[i] = std::bit_cast<float>(bits[i]);
  return out;
}

// p = c0 + x(c1 + x(c2 + x(c3 + x c4))), every operation rounded to float32 (Horner, no FMA).
float evaluate_spline(const SplineCoefficients& c, const SplineBreakpoints& b, float x);

// 256 sigma(x): the LOGISTIC table (41/41 compiled instances, isa.md 2.4), base scale 1/256.
const SplineCoefficients& logistic_coefficients();
const SplineBreakpoints& logistic_breakpoints();

}  // namespace tinycoral::isa
