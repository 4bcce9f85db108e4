// The non-linear unit's splines for the `edgetpu` rounding mode (edgetpu_spline.h).
#include "host/ops/edgetpu_spline.h"

#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "isa/nlu_spline.h"

namespace tinycoral::host::ops {
namespace {

// f32(c * f32(base / out)) for every coefficient: the compiler's rescaling of a base table
// (docs/chip_ops.md 7: 40/40 coefficients of the LSTM's LOGISTIC, both TANH tables).
EdgeTpuSpline scaled(const isa::SplineCoefficients& coefficients,
                     const isa::SplineBreakpoints& breakpoints, float base_scale, float out_scale,
                     bool odd, uint32_t clamp) {
  EdgeTpuSpline s;
  const float ratio = base_scale / out_scale;
  for (size_t i = 0; i < s.coefficients.size(); ++i) s.coefficients[i] = coefficients[i] * ratio;
  s.breakpoints = breakpoints;
  s.odd = odd;
  s.clamp = std::bit_cast<float>(clamp);
  return s;
}

float horner(const EdgeTpuSpline& spline, float x) {
  return isa::evaluate_spline(spline.coefficients, spline.breakpoints, x);
}

}  // namespace

float evaluate(const EdgeTpuSpline& spline, float x) {
  if (!spline.odd) return horner(spline, x);
  const float y = horner(spline, std::fabs(x));
  return x < 0 ? -y : y;
}

EdgeTpuSpline logistic_spline(float out_scale) {
  // 256 sigma(x): the table every compiled LOGISTIC loads (isa.md 2.4), base scale 1/256.
  return scaled(isa::logistic_coefficients(), isa::logistic_breakpoints(), 1.0f / 256.0f, out_scale,
                false, 0x41265904);
}

EdgeTpuSpline tanh_spline(float out_scale) {
  // tanh(x) for x >= 0: recovered from the two TANH tables of gen2021's Keras LSTM (127.5 tanh
  // and 16383.5 tanh), the only float32 values that scale to both (docs/chip_ops.md 7).
  static constexpr uint32_t kCoefficients[40] = {
      0xa4900000, 0x3f7ff70c, 0x3b680451, 0xbeba0904, 0x3dd5f798,  //
      0xba573b0b, 0x3f8093c1, 0x3adbd5c7, 0xbec90026, 0x3e18f5d1,  //
      0xbd3ca9f0, 0x3f9d4c4a, 0xbed767c2, 0xbd0dc79e, 0x3d0ba428,  //
      0xbe1a30e6, 0x3fcafa1b, 0xbf619bbb, 0x3e6d2b1d, 0xbcc4f1f0,  //
      0x3db3d973, 0x3f8fbe7e, 0xbf0af73c, 0x3df7f011, 0xbc2af5e5,  //
      0x3ef8c2c6, 0x3f07de5d, 0xbe581426, 0x3d1c1331, 0xbb2c17e8,  //
      0x3f542a99, 0x3e103ad2, 0xbd346efe, 0x3bcae85e, 0xb9acb424,  //
      0x3f7a3662, 0x3c65a31f, 0xbb56a9c4, 0x39b319ae, 0xb760dafc};
  static constexpr uint32_t kBreakpoints[7] = {0x3eb83694, 0x3f47de0b, 0x3f965533, 0x4001ec93,
                                               0x402bcf21, 0x40630652, 0x409ac3f4};
  return scaled(isa::spline_floats(kCoefficients), isa::spline_floats(kBreakpoints), 1.0f,
                out_scale, true, 0x40dbfe6b);
}

}  // namespace tinycoral::host::ops
