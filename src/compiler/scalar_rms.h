// RMSNorm's scale as a scalar-core routine (issue 14; docs/llm.md "RMSNorm's scale from the chip's
// bytes"): the int8 path's chip_rms_scale (llm/int8_rms.h) over x's bytes in scalar memory, in the
// scalar core's integer and float32 ALU only (no special-function unit): per byte b (the chip's
// uint8, int8 + 128) d = b - zero_point, ss += F2I(I2F(d) I2F(d)) in int32 (the ALU has no integer
// multiply; each square is exact in float32); then a = f32(f32(ss) mean_mult) + 1e-5f, the guess
// 0x5f3759df - (bits(a) >> 1) and three Newton steps y = y f32(f32(f32(y y) f32(a -0.5)) + 1.5f).
#pragma once

#include "compiler/emitter.h"

namespace tinycoral::compiler {

// The routine's constants, which the int8 path's r (llm/int8_rms.h) computes with too: RMSNorm's
// epsilon, the first guess's magic number and the Newton steps after it (two leave about 5e-6 of
// relative error; three reach float32's own rounding).
constexpr float kRmsEpsilon = 1e-5f;
constexpr uint32_t kRsqrtMagic = 0x5f3759dfu;
constexpr int kRsqrtNewtonSteps = 3;

struct ScalarRms {
  int x_word = 0;       // x's n bytes from this scalar-memory word on, four to a word, low first
  int n = 0;            // bytes (the last word's bytes past n are not read)
  int zero_point = 0;   // x's zero point as the chip stores it (int8's + 128)
  float mean_mult = 0;  // f32(s_x^2 / n) (llm::rms_mean_multiplier)
  int r_word = 0;       // r (float32) goes to this word
};

// The routine's bundles; registers 12-23 are its own. About 30 bundles per word of x.
void emit_scalar_rms(Emitter& e, const ScalarRms& s);

}  // namespace tinycoral::compiler
