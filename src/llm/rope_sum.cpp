#include "llm/rope_sum.h"

#include <bit>

#include "common/error.h"
#include "llm/int8_model.h"

namespace tinycoral::llm {

namespace {
constexpr int kGroup = 64;
int whole(int n) { return (n + kGroup - 1) / kGroup * kGroup; }
}  // namespace

compiler::FcLayer rope_sum_layer(const QuantizedRope& q, int n, std::vector<int>& in_at) {
  if (n <= 0 || int(q.base.size()) < n) fail("a RoPE sum of ", n, " channels");
  compiler::FcLayer l;
  l.n = whole(n);
  l.k = 2 * kGroup;
  l.weights.assign(size_t(l.n) * size_t(l.k), 0);
  for (int j = 0; j < n; ++j) {
    l.weights[size_t(j) * size_t(l.k) + size_t(j % kGroup)] = 1;
    l.weights[size_t(j) * size_t(l.k) + size_t(kGroup + j % kGroup)] = 1;
  }
  l.mult.assign(size_t(l.n), 0.0f);
  l.in_zp = l.out_zp = 128;  // P and q~ are symmetric: zero point 0, + 128 on the chip
  l.in_scale = q.product_scale;
  l.out_scale = 1.0f;
  l.clamp_min = -kSymmetricClamp;
  l.clamp_max = kSymmetricClamp;
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  in_at.clear();
  for (int g = 0; g < l.n / kGroup; ++g) in_at.push_back(2 * kGroup * g);
  return l;
}

void rope_sum_input(const int8_t* p1, const int8_t* p2, int n, int8_t* row) {
  std::fill_n(row, 2 * whole(n), int8_t{0});
  for (int j = 0; j < n; ++j) {
    row[2 * kGroup * (j / kGroup) + j % kGroup] = p1[j];
    row[2 * kGroup * (j / kGroup) + kGroup + j % kGroup] = p2[j];
  }
}

compiler::FcRowWrite rope_sum_multipliers(const QuantizedRope& q, int n, float r,
                                          const compiler::FcPlacement& at) {
  compiler::FcRowWrite w;
  for (size_t g = 0; g < at.tiles.size(); ++g) {
    w.rows.push_back({at.tiles[g], at.param_units.empty() ? 0 : at.param_units[g]});
    for (int i = 0; i < kGroup; ++i) {
      const int j = int(g) * kGroup + i;
      const float m = j < n ? rope_multiplier(q, j, r) : 0.0f;
      const uint32_t bits = std::bit_cast<uint32_t>(m);
      for (int b = 0; b < 4; ++b) w.bytes.push_back(static_cast<uint8_t>(bits >> (8 * b)));
    }
  }
  return w;
}

}  // namespace tinycoral::llm
