#include "llm/int8_rope.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "host/rounding.h"
#include "llm/int8_model.h"

namespace tinycoral::llm {

namespace edgetpu = host::edgetpu;

namespace {

constexpr float kTableSteps = 127.0f;  // cos and sin' in 1/127 steps (the seed's per-call inputs)

int8_t table_byte(float v) {
  return static_cast<int8_t>(std::clamp(std::nearbyint(v * kTableSteps), -127.0f, 127.0f));
}

}  // namespace

void rope_tables(int pos, int n, int head_size, int8_t* cos_q, int8_t* sin_q) {
  for (int i = 0; i < n; i += 2) {
    const float val = rope_angle(pos, i, head_size);  // the float path's angle
    const float c = std::cos(val), s = std::sin(val);
    cos_q[i] = table_byte(c);
    sin_q[i] = table_byte(-s);
    if (i + 1 < n) {
      cos_q[i + 1] = table_byte(c);
      sin_q[i + 1] = table_byte(s);
    }
  }
}

QuantizedRope quantize_rope(float in_scale, int32_t in_zero_point, const std::vector<float>& gain,
                            const std::vector<float>& out_scale) {
  if (gain.size() != out_scale.size() || gain.size() % 2 != 0)
    fail("RoPE needs an even number of channels with one gain and one output scale each");
  QuantizedRope q;
  q.in_scale = in_scale;
  q.in_zero_point = in_zero_point;
  // The largest |x| the input's bytes can hold: then |x cos| <= 127 s_p for every byte.
  const float reach =
      std::max(static_cast<float>(in_zero_point + 128), static_cast<float>(127 - in_zero_point)) *
      in_scale;
  q.product_scale = reach > 0 ? reach / 127.0f : 1.0f;
  q.mul_mult = edgetpu::product_scale(in_scale, 1.0f / kTableSteps, q.product_scale);
  for (size_t j = 0; j < gain.size(); ++j)
    q.base.push_back(edgetpu::product_scale(q.product_scale, gain[j], out_scale[j]));
  return q;
}

void rope_products(const QuantizedRope& q, const int8_t* x, const int8_t* cos_q,
                   const int8_t* sin_q, int n, int8_t* p1, int8_t* p2) {
  const edgetpu::Clamps clamps{-kSymmetricClamp, kSymmetricClamp};
  for (int j = 0; j < n; ++j) {
    const int32_t d = int32_t{x[j]} - q.in_zero_point;
    const int32_t swapped = int32_t{x[j ^ 1]} - q.in_zero_point;
    p1[j] = static_cast<int8_t>(edgetpu::requantize(d * int32_t{cos_q[j]}, q.mul_mult, clamps, 0));
    p2[j] = static_cast<int8_t>(
        edgetpu::requantize(swapped * int32_t{sin_q[j]}, q.mul_mult, clamps, 0));
  }
}

void rope_sum(const QuantizedRope& q, const int8_t* p1, const int8_t* p2, int n, float r,
              int8_t* out) {
  const edgetpu::Clamps clamps{-kSymmetricClamp, kSymmetricClamp};
  for (int j = 0; j < n; ++j) {
    out[j] = static_cast<int8_t>(
        edgetpu::requantize(int32_t{p1[j]} + int32_t{p2[j]}, rope_multiplier(q, j, r), clamps, 0));
  }
}

void rope_q(const QuantizedRope& q, const int8_t* x, const int8_t* cos_q, const int8_t* sin_q,
            int n, float r, int8_t* out) {
  std::vector<int8_t> p1(static_cast<size_t>(n)), p2(static_cast<size_t>(n));
  rope_products(q, x, cos_q, sin_q, n, p1.data(), p2.data());
  rope_sum(q, p1.data(), p2.data(), n, r, out);
}

}  // namespace tinycoral::llm
