// The non-linear unit's splines for the `edgetpu` rounding mode (edgetpu_spline.h).
#include "host/ops/edgetpu_spline.h"

#include <bit>
#include <cmath>

namespace tinycoral::host::ops {
namespace {

// f32(c * f32(base / out)) for every coefficient: the compiler's rescaling of a base table
// (docs/chip_ops.md 7: 40/40 coefficients of the LSTM's LOGISTIC, both TANH tables).
EdgeTpuSpline scaled(const uint32_t (&coefficients)[40], const uint32_t (&breakpoints)[7],
                     float base_scale, float out_scale, bool odd, uint32_t clamp) {
  EdgeTpuSpline s;
  const float ratio = base_scale / out_scale;
  for (int i = 0; i < 40; ++i) s.coefficients[i] = std::bit_cast<float>(coefficients[i]) * ratio;
  for (int i = 0; i < 7; ++i) s.breakpoints[i] = std::bit_cast<float>(breakpoints[i]);
  s.odd = odd;
  s.clamp = std::bit_cast<float>(clamp);
  return s;
}

float horner(const EdgeTpuSpline& spline, float x) {
  int segment = 0;
  for (float b : spline.breakpoints)
    if (b <= x) ++segment;
  const float* c = &spline.coefficients[static_cast<size_t>(segment) * 5];
  // Separate statements: GCC does not contract them into fused multiply-adds on x86-64.
  float p = c[4];
  p = p * x;
  p = p + c[3];
  p = p * x;
  p = p + c[2];
  p = p * x;
  p = p + c[1];
  p = p * x;
  p = p + c[0];
  return p;
}

}  // namespace

float evaluate(const EdgeTpuSpline& spline, float x) {
  if (!spline.odd) return horner(spline, x);
  const float y = horner(spline, std::fabs(x));
  return x < 0 ? -y : y;
}

EdgeTpuSpline logistic_spline(float out_scale) {
  // 256 sigma(x): the table of isa.md 2.4 (float32 bits), the chip's ops/nlu.cpp.
  static constexpr uint32_t kCoefficients[40] = {
      0x4200549c, 0x415db7c6, 0x40111a70, 0x3e29f7bb, 0x3b95f260,  //
      0x4304a187, 0x42ab6803, 0x41aee024, 0x40251eb8, 0x3df136b6,  //
      0x43077562, 0x42a46b63, 0x418371fd, 0x3f05681a, 0xbe04c80f,  //
      0x4300006a, 0x427fe396, 0xbea8c7fe, 0xc0c9f57d, 0xbf94c0e4,  //
      0x430000b8, 0x427fb331, 0x3ef2682d, 0xc0cf35b5, 0x3f9cb2b2,  //
      0x42ddc7c6, 0x42c56c6f, 0xc1d72011, 0x405be5c6, 0xbe2ff6d3,  //
      0x4343d750, 0x41efbc0b, 0xc0b6a9cd, 0x3efb0c86, 0xbc82c2d7,  //
      0x4374cc57, 0x4085560c, 0xbf168355, 0x3d187e2a, 0xba69a584};
  static constexpr uint32_t kBreakpoints[7] = {0xc0b479b1, 0xc03dc92e, 0xbfaba1f5, 0x3db069f8,
                                               0x3fe71fbc, 0x4099a343, 0x41078f0a};
  return scaled(kCoefficients, kBreakpoints, 1.0f / 256.0f, out_scale, false, 0x41265904);
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
  return scaled(kCoefficients, kBreakpoints, 1.0f, out_scale, true, 0x40dbfe6b);
}

}  // namespace tinycoral::host::ops
