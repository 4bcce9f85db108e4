// The Edge TPU's non-linear unit as the host's `edgetpu` rounding mode needs it (docs/host_ops.md
// "The chip's LSTM"): an 8-segment quartic spline in float32 whose output is in units of the
// output scale. The compiler keeps one table per function at a base output scale and scales every
// coefficient to the op's output scale, c' = f32(c * f32(base_scale / out_scale)): evidence in
// docs/chip_ops.md section 7. The evaluation and the LOGISTIC table are the ISA's
// (isa/nlu_spline.h), shared with the simulator; the TANH table lives here (only the host derives
// it); tests/chip/lstm_ops_test.cpp checks both against the tables the LSTM program loads.
#pragma once

#include <array>
#include <cstdint>

namespace tinycoral::host::ops {

struct EdgeTpuSpline {
  std::array<float, 40> coefficients{};  // c[segment][power], segment-major, c0..c4
  std::array<float, 7> breakpoints{};    // segment = number of breakpoints <= x
  bool odd = false;  // TANH's one-sided table: evaluated on |x|, the result takes x's sign
  float clamp = 0;   // the op clamps x to +-clamp before the spline
};

// p = c0 + x(c1 + x(c2 + x(c3 + x c4))), each operation rounded to float32 (Horner, no FMA).
float evaluate(const EdgeTpuSpline& spline, float x);

// The LOGISTIC table (base scale 1/256, the one every compiled LOGISTIC loads) scaled to
// `out_scale`; x is clamped to +-10.396732.
EdgeTpuSpline logistic_spline(float out_scale);

// The TANH table of the compiled LSTM (base scale 1, breakpoints all positive, odd) scaled to
// `out_scale`; x is clamped to +-6.874807.
EdgeTpuSpline tanh_spline(float out_scale);

}  // namespace tinycoral::host::ops
