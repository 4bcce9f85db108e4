// RMSNorm's scale r = 1 / sqrt(mean(x^2) + 1e-5) from the int8 bytes of x that q, k and v read,
// in operations the scalar core has (Int8Options::chip_rms; docs/llm.md "RMSNorm's scale from
// the chip's bytes"). The scalar core has an integer ALU without a multiply, float32 FADD, FSUB and
// FMUL, int-to-float and float-to-int conversions, and a special-function unit with exp2 and the
// reciprocal only (isa.md 2.11). So, per token and layer, with x_q's scale s and zero point z:
//  - ss = sum_i (x_q,i - z)^2, exact in int32 (each square I2F, FMUL, F2I: exact below 2^24);
//  - a = f32(f32(ss) c) + 1e-5f, c = f32(s^2 / n) a constant of the layer (the scales are static);
//  - r = rsqrt(a): the bits 0x5f3759df - (bits(a) >> 1) as the first guess, then three Newton
//    steps y = y f32(f32(f32(y y) f32(-a / 2)) + 1.5f), every product and sum rounded to float32.
// No special-function unit in it: its results are within a few ulp on the chip (not the
// simulator's), while float32 multiplies and adds are IEEE's, so a stick should give these bits.
#pragma once

#include <cstdint>

#include "compiler/scalar_rms.h"

namespace tinycoral::llm {

// (The constants, kRmsEpsilon, kRsqrtMagic and kRsqrtNewtonSteps, are the scalar-core routine's:
// compiler/scalar_rms.h.)
using compiler::kRmsEpsilon;
using compiler::kRsqrtMagic;
using compiler::kRsqrtNewtonSteps;

// sum_i (x_i - zero_point)^2 for i < n, exact (n up to 33,000: 255^2 n < 2^31).
int32_t sum_of_squares(const int8_t* x, int n, int32_t zero_point);
// c = f32(scale^2 / n): mean(x^2) = ss c.
float rms_mean_multiplier(float scale, int n);
// 1 / sqrt(a) for a > 0 in the ALU's float32 ops (the guess, kRsqrtNewtonSteps Newton steps).
float scalar_core_rsqrt(float a);
// r from ss and c: rsqrt(f32(f32(ss) c) + 1e-5f).
float scalar_core_rms_scale(int32_t ss, float c);
// r of n bytes x in the quantization (scale, zero_point).
float chip_rms_scale(const int8_t* x, int n, float scale, int32_t zero_point);

}  // namespace tinycoral::llm
