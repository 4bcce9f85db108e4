// RoPE and RMSNorm's scale r on the int8 q and k of the layer's chain, in the chip's elementwise
// arithmetic (Int8Options::chip_rope; docs/llm.md "RoPE in the chip's ops"). Per pair (2i, 2i + 1)
// of channels, angle a = pos theta_i (the float path's angle):
//   out_2i = x_2i cos a - x_2i+1 sin a,  out_2i+1 = x_2i+1 cos a + x_2i sin a
// is MUL(x, cos) + MUL(swap(x), sin') with swap exchanging the channels of each pair and sin' the
// signed sine (-sin a at the even channel, +sin a at the odd one):
//  - cos and sin' are per-token inputs, int8 with scale 1/127 and zero point 0 (rope_tables);
//  - P1 = MUL(x, cos), P2 = MUL(swap(x), sin'): the chip's MUL, f32((x - z_x) c) *
//    f32(f32(s_x / 127) f32(1 / s_p)), clamps +-127, rounding half to even, zero point 0; P's scale
//    s_p is the largest |x| x's quantization can hold, over 127 (no product can leave it);
//  - out = ADD(P1, P2) with weights 1, 1 (P1 and P2 share their scale) and one multiplier per
//    output channel, times r: f32(acc) * f32(base_j r), clamps +-127, zero point 0. base_j =
//    f32(f32(s_p gain_j) f32(1 / s_out,j)) is a constant; r (a float per token, from the host's
//    residual stream) makes it a per-token multiplier, as the value cache's 1 / S is. A per-channel
//    multiplier is an FC's output stage (the residual add's two-weight form), not the ADD op's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tinycoral::llm {

// cos and sin' of position `pos` for channels j < n of heads of `head_size` channels (the pair
// (j & ~1) turns by pos 10000^(-(j & ~1) % head_size / head_size), as the float path computes it),
// quantized with scale 1/127, zero point 0.
void rope_tables(int pos, int n, int head_size, int8_t* cos_q, int8_t* sin_q);

struct QuantizedRope {
  float in_scale = 1.0f;  // x: the chain's output quantization of q or k
  int32_t in_zero_point = 0;
  float product_scale = 1.0f;  // s_p, P1 and P2 symmetric
  float mul_mult = 0;          // f32(f32(s_x / 127) f32(1 / s_p))
  std::vector<float> base;     // [channel] f32(f32(s_p gain_j) f32(1 / s_out,j))
};
// The rotation of n channels read in quantization (in_scale, in_zero_point) to symmetric outputs of
// scale out_scale[j], their real value gain_j times the rotated one (times r at run time).
QuantizedRope quantize_rope(float in_scale, int32_t in_zero_point, const std::vector<float>& gain,
                            const std::vector<float>& out_scale);
// P1 = MUL(x, cos) and P2 = MUL(swap(x), sin') for j < n (n even): the products, r not in them.
void rope_products(const QuantizedRope& q, const int8_t* x, const int8_t* cos_q,
                   const int8_t* sin_q, int n, int8_t* p1, int8_t* p2);
// Channel j's per-token multiplier f32(base_j r), one float32 product as the chip's parameter row
// holds it (rope_sum and the scores' program's rows: rope_sum.cpp).
inline float rope_multiplier(const QuantizedRope& q, int j, float r) {
  const volatile float mult = q.base[size_t(j)] * r;
  return mult;
}
// out = ADD(P1, P2) with the per-token multipliers f32(base_j r).
void rope_sum(const QuantizedRope& q, const int8_t* p1, const int8_t* p2, int n, float r,
              int8_t* out);
// out[j] for j < n (n even) from x's bytes, the tables and r: rope_products, then rope_sum.
void rope_q(const QuantizedRope& q, const int8_t* x, const int8_t* cos_q, const int8_t* sin_q,
            int n, float r, int8_t* out);

}  // namespace tinycoral::llm
