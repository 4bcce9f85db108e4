// The residual stream in int8 between a layer's attention and its FFN, and between layers
// (Int8Options::chip_residual; docs/llm.md "The residual stream in int8"): every step an
// operation a chip program of the whole layer could run, so that a token need not come back to
// the host between layers. Per layer, from x_q (the bytes q, k and v read) with r = RMSNorm's
// scale of x_q (chip_rms):
//  - v~ = r v straight from wv's output stage: v~_j = clamp(rint(f32(acc_j) f32(base_j r))),
//    base_j = f32(f32(s_x s_wv,j) f32(1 / s_v~,j)), clamps +-127, zero point 0 (one rounding;
//    value_tilde);
//  - x2_q = the residual add (residual_add, the chain's pairwise FC) of x_q and wo's output o_q,
//    on the grid of x after attention's residual add;
//  - r_ffn = chip_rms_scale(x2_q) (int8_rms.h), the scalar core's routine;
//  - the FFN's input = a diagonal FC of x2_q (rms_input): weight sign(g_j), the per-token
//    multiplier f32(c_j r_ffn), c_j = f32(f32(s_x2 |g_j|) f32(1 / s_in)), the FFN input's
//    calibrated grid (its zero point and clamps);
//  - the next layer's x_q = residual_add of x2_q and w2's output (the last layer's too, onto the
//    final residual's grid, whose bytes the host dequantizes for the final RMSNorm).
#pragma once

#include <cstdint>
#include <vector>

#include "llm/int8_model.h"

namespace tinycoral::llm {

// The multiplier of a per-token scale: f32(base r), one float32 product (as the scalar core's
// FMUL writes it into a multiplier row).
inline float per_token_multiplier(float base, float r) {
  const volatile float mult = base * r;
  return mult;
}

// wv's output stage to v~ (zero point 0, clamps +-kSymmetricClamp): base[j] = f32(f32(s_x s_w,j)
// f32(1 / s_v~,j)) for wv's rows j.
std::vector<float> value_tilde_base(const QuantizedMatmul& wv, const std::vector<float>& v_scale);
// v~[j] for j < wv.rows from x's bytes (wv's input) and r: the FC's accumulator (input zero point
// taken off), then the output stage with f32(base_j r).
void value_tilde(const QuantizedMatmul& wv, const std::vector<float>& base, const int8_t* x,
                 float r, int8_t* v_tilde);

// RMSNorm before the FFN as a diagonal FC of x2's bytes (QuantizedRmsInput, int8_model.h).
QuantizedRmsInput quantize_rms_input(QParams x2, QParams out, const float* g, int dim);
// r_ffn of x2's bytes: chip_rms_scale in x2's grid.
float rms_input_scale(const QuantizedRmsInput& q, const int8_t* x2, int dim);
// The FFN's input bytes from x2's and r_ffn.
void rms_input(const QuantizedRmsInput& q, const int8_t* x2, int dim, float r, int8_t* out);

}  // namespace tinycoral::llm
