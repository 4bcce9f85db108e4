// The weighted sum's FC layer (value_sum.h).
#include "llm/value_sum.h"

#include <algorithm>
#include <cstring>

#include "llm/int8_model.h"

namespace tinycoral::llm {

compiler::FcLayer value_sum_layer(const ValueSumShape& s, std::vector<int>& in_at) {
  compiler::FcLayer l;
  l.n = s.outputs();
  l.k = s.k();
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  l.mult.assign(size_t(l.n), 0.0f);
  // e's bytes with zero point 0: unsigned, nothing to take off.
  l.in_zp = 0;
  l.in_scale = 1.0f / 255.0f;
  l.out_zp = 128;  // wo's input: int8, zero point 0
  l.out_scale = 1.0f;
  l.clamp_min = -kSymmetricClamp;
  l.clamp_max = kSymmetricClamp;
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = false;
  l.signed_output = true;
  in_at.clear();
  for (int h = 0; h < s.heads; ++h)
    for (int g = 0; g < s.hs_padded() / 64; ++g) in_at.push_back(h * s.k());
  return l;
}

void set_value_column(const ValueSumShape& s, int t, const int8_t* v, compiler::FcLayer& l) {
  const int kv_mul = s.heads / s.kv_heads;
  for (int h = 0; h < s.heads; ++h)
    for (int i = 0; i < s.head_size; ++i)
      l.weights[size_t(h * s.hs_padded() + i) * size_t(l.k) + size_t(t)] =
          v[(h / kv_mul) * s.head_size + i];
}

void set_value_multipliers(const ValueSumShape& s, const float* base, const float* inv_sum,
                           compiler::FcLayer& l) {
  for (int h = 0; h < s.heads; ++h)
    for (int i = 0; i < s.head_size; ++i) {
      const volatile float mult = base[h * s.head_size + i] * inv_sum[h];
      l.mult[size_t(h * s.hs_padded() + i)] = mult;
    }
}

compiler::FcLayer value_sum_prefix(const compiler::FcLayer& l, int n) {
  compiler::FcLayer p = l;
  p.k = std::min(l.k, (n + 63) / 64 * 64);
  p.weights.resize(size_t(p.n) * size_t(p.k));
  for (int r = 0; r < p.n; ++r)
    std::copy_n(l.weights.begin() + long(r) * l.k, p.k, p.weights.begin() + long(r) * p.k);
  return p;
}

void value_sum_input(const ValueSumShape& s, const uint8_t* e, size_t e_stride, int n,
                     uint8_t* row) {
  std::memset(row, 0, size_t(s.row_bytes()));
  for (int h = 0; h < s.heads; ++h)
    std::memcpy(row + size_t(h) * size_t(s.k()), e + size_t(h) * e_stride, size_t(n));
}

}  // namespace tinycoral::llm
