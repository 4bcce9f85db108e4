// The int8 path's FFN elementwise part (gate(): LOGISTIC, MUL, MUL as the chip computes them)
// against SiLU(h1) * h3 in float: within the rounding of its three int8 results, for every h1 byte.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "llm/int8_model.h"

namespace tinycoral::testing {
namespace {

TEST(Int8Gate, FollowsSiluTimesH3WithinItsRounding) {
  const llm::QParams h1 = llm::qparams_for_range(-9.0f, 6.0f);
  const llm::QParams h3 = llm::qparams_for_range(-3.0f, 4.0f);
  const llm::QParams m = llm::qparams_for_range(-18.0f, 24.0f);
  const llm::QuantizedGate q = llm::quantize_gate(h1, h3, {-0.3f, 6.0f}, m);
  std::vector<int8_t> a(256), b(256), out(256);
  for (int i = 0; i < 256; ++i) {
    a[size_t(i)] = static_cast<int8_t>(i - 128);
    b[size_t(i)] = static_cast<int8_t>((i * 37) % 256 - 128);
  }
  llm::gate(q, a.data(), b.data(), 256, out.data());
  int exact = 0;
  for (int i = 0; i < 256; ++i) {
    const float x = float(a[size_t(i)] - h1.zero_point) * h1.scale;
    const float y = float(b[size_t(i)] - h3.zero_point) * h3.scale;
    const float want = x / (1.0f + std::exp(-x)) * y;
    const float got = float(out[size_t(i)] - m.zero_point) * m.scale;
    // g to 1/512 (times |x|), a to half its step (times |y|), m to half its step.
    const float bound = (std::fabs(x) / 512 + q.a.scale / 2) * std::fabs(y) * 1.01f +
                        m.scale / 2 * 1.01f + 0.002f * std::fabs(y);
    EXPECT_LE(std::fabs(got - want), bound) << "h1 byte " << i;
    exact += std::fabs(got - want) <= m.scale / 2;
  }
  EXPECT_GT(exact, 128);  // most land on the nearest step
}

}  // namespace
}  // namespace tinycoral::testing
