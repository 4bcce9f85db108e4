// RMSNorm's scale from the int8 bytes q, k and v read (Int8Options::chip_rms, llm/int8_rms.h):
// the function against the scalar core's operations written out one register at a time, against
// exact arithmetic and float32 r, and the int8 path with the option against the path without it
// whose only change is r.
#include "llm/int8_rms.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "common/error.h"
#include "llama2c_files.h"
#include "llm/int8_model.h"
#include "llm/sampler.h"

namespace tinycoral::testing {
namespace {

// (Named: in a unity build other tests' anonymous helpers share the file.)
namespace rms_test {

// The scalar core's ALU on 32-bit registers, as src/chip/scalar_core.cpp executes each op.
uint32_t i2f(uint32_t r) { return std::bit_cast<uint32_t>(float(int32_t(r))); }
uint32_t f2i(uint32_t r) {
  return uint32_t(int32_t(std::nearbyint(double(std::bit_cast<float>(r)))));
}
uint32_t fmul(uint32_t a, uint32_t b) {
  return std::bit_cast<uint32_t>(std::bit_cast<float>(a) * std::bit_cast<float>(b));
}
uint32_t fadd(uint32_t a, uint32_t b) {
  return std::bit_cast<uint32_t>(std::bit_cast<float>(a) + std::bit_cast<float>(b));
}
uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

// docs/llm.md's sequence, register by register: each square as I2F, FMUL, F2I and an integer add
// (the ALU has no integer multiply), then I2F, FMUL by c, FADD 1e-5, the guess from a shift and a
// subtraction, and three Newton steps of four float ops each.
float reference_r(const std::vector<int8_t>& x, int32_t zero_point, float c) {
  uint32_t ss = 0;
  for (const int8_t b : x) {
    const uint32_t d = i2f(uint32_t(int32_t{b} - zero_point));
    ss += f2i(fmul(d, d));
  }
  const uint32_t a = fadd(fmul(i2f(ss), bits(c)), bits(1e-5f));
  const uint32_t h = fmul(a, bits(-0.5f));
  uint32_t y = 0x5f3759dfu - (a >> 1);
  for (int step = 0; step < 3; ++step) y = fmul(y, fadd(fmul(fmul(y, y), h), bits(1.5f)));
  return std::bit_cast<float>(y);
}

}  // namespace rms_test

TEST(Int8Rms, TheFunctionIsTheScalarCoresSequenceBitForBit) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> byte(-128, 127), length(1, 2048);
  std::uniform_real_distribution<float> log_scale(-12.0f, 4.0f);
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<int8_t> x(size_t(length(rng)));
    // Bytes near the zero point too (small sums of squares: the 1e-5 and the guess's low range
    // matter), and all of them at one extreme (the largest sums).
    const int32_t z = trial % 4 == 0 ? 0 : byte(rng);
    const int spread = trial % 3 == 0 ? 3 : 255;
    std::uniform_int_distribution<int> near(-spread, spread);
    for (int8_t& b : x) b = int8_t(trial % 7 == 0 ? -128 : std::clamp(z + near(rng), -128, 127));
    const float scale = std::exp2(log_scale(rng));
    const int n = int(x.size());
    int64_t exact = 0;
    for (const int8_t b : x) exact += int64_t(int32_t{b} - z) * (int32_t{b} - z);
    ASSERT_EQ(llm::sum_of_squares(x.data(), n, z), exact);
    const float c = llm::rms_mean_multiplier(scale, n);
    EXPECT_EQ(c, float(double(scale) * scale / n));
    const float r = llm::chip_rms_scale(x.data(), n, scale, z);
    ASSERT_EQ(rms_test::bits(r), rms_test::bits(rms_test::reference_r(x, z, c)))
        << "trial " << trial << ", n " << n;
  }
  EXPECT_THROW(llm::sum_of_squares(nullptr, 40000, 0), Error);
}

// The reciprocal square root over float32's range of a (1e-5 up: the sum's epsilon): within 2 ulp
// of the exact value (three Newton steps reach float32's own rounding; two leave about 5e-6).
TEST(Int8Rms, TheNewtonReciprocalSquareRootIsWithinTwoUlp) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> log_a(std::log2(1e-5), 40.0);
  double worst = 0;
  for (int i = 0; i < 200000; ++i) {
    const float a = float(std::exp2(log_a(rng)));
    const float y = llm::scalar_core_rsqrt(a);
    const double exact = 1.0 / std::sqrt(double(a));
    // ulp of the exact value's binade.
    const double ulp = std::ldexp(1.0, std::ilogb(exact) - 23);
    worst = std::max(worst, std::fabs(double(y) - exact) / ulp);
  }
  EXPECT_LE(worst, 2.0);
  EXPECT_GT(worst, 0.0);  // not the correctly rounded value everywhere (what the 2 ulp are for)
  EXPECT_NEAR(llm::scalar_core_rsqrt(4.0f), 0.5f, 0x1p-24f);
}

// Against float r: r of the dequantized bytes in exact arithmetic within 3 x 2^-24 (the sum is
// exact, the float32 steps round a few times; a bound these trials meet, tighter than the 2 ulp
// allowed the rsqrt alone above, not one derived), and the host's float32 r of the unquantized x
// within what rounding x to the bytes can move mean(x^2): each |x_i^2 - x'_i^2| <= s/2 (2|x_i| +
// s/2).
TEST(Int8Rms, FollowsFloatRWithinTheQuantizationsBound) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_real_distribution<float> sigma(0.05f, 8.0f), shift(-0.5f, 0.5f);
  for (int trial = 0; trial < 400; ++trial) {
    const int n = trial % 2 == 0 ? 288 : 64 + trial;
    const float sd = sigma(rng), mean = shift(rng) * sd;
    std::vector<float> x(static_cast<size_t>(n));
    float lo = 0, hi = 0;
    for (float& v : x) {
      v = mean + sd * g(rng);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const llm::QParams q = llm::qparams_for_range(lo, hi);
    std::vector<int8_t> xq(static_cast<size_t>(n));
    llm::quantize(x.data(), n, q, xq.data());
    const float r = llm::chip_rms_scale(xq.data(), n, q.scale, q.zero_point);
    double dequantized = 0, bound = 0;
    for (int i = 0; i < n; ++i) {
      const double d = double(int32_t{xq[size_t(i)]} - q.zero_point) * q.scale;
      dequantized += d * d;
      bound += q.scale / 2.0 * (2.0 * std::fabs(x[size_t(i)]) + q.scale / 2.0);
    }
    const double a = dequantized / n + 1e-5;
    const double exact = 1.0 / std::sqrt(a);
    EXPECT_LE(std::fabs(r - exact) / exact, 3 * 0x1p-24) << "trial " << trial;
    // r = a^(-1/2): a relative change e of a moves r by at most e relative, for e < 1/2.
    const float host = llm::rms_scale(x.data(), n);
    const double e = bound / n / a;
    ASSERT_LT(e, 0.5);
    EXPECT_LE(std::fabs(double(r) - host) / host, e + 4 * 0x1p-24) << "trial " << trial;
  }
}

// The int8 path without chip_rms whose r is chip_rms_scale of q, k and v's bytes: the option's
// arithmetic if the option changes only r.
class RFromBytes : public llm::Int8Transformer {
 public:
  using Int8Transformer::Int8Transformer;
  std::vector<float> rs, host_rs;
  std::vector<bool> saturated;  // a byte at the int8 range's ends (x past its calibrated range)

 protected:
  float rms_scale_q(int layer, const int8_t* xq, const float* x) override {
    const llm::QParams in = matmul(layer, llm::LayerMatmul::kQ).in;
    rs.push_back(llm::chip_rms_scale(xq, ck_.config.dim, in.scale, in.zero_point));
    host_rs.push_back(llm::rms_scale(x, ck_.config.dim));
    saturated.push_back(
        std::any_of(xq, xq + ck_.config.dim, [](int8_t b) { return b == -128 || b == 127; }));
    return rs.back();
  }
};

std::vector<std::vector<float>> greedy_logits(llm::Transformer& t, int positions) {
  std::vector<std::vector<float>> out;
  int token = llm::kBos;
  for (int pos = 0; pos < positions; ++pos) {
    const std::span<float> l = t.forward(token, pos);
    out.emplace_back(l.begin(), l.end());
    token = llm::argmax(out.back());
  }
  return out;
}

// On rand_gqa, in the default attention, with RoPE in the chip's ops (r in q~'s and the key's
// per-token multipliers) and with the value cache (r in v~): the option's logits are bit for bit
// those of the path without it whose r alone is replaced, they differ from the path without it,
// and they do not depend on the thread count. Each layer's r from the bytes is within 0.5% of the
// host's float32 r where no byte saturates; where x leaves the residual's calibrated range (here
// the embedding of tokens calibration did not see, and the residual of layer 1) a clamped byte
// makes r up to 3% larger (4% allowed).
TEST(Int8Rms, TheOptionChangesOnlyR) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  llm::ThreadPool pool(1), pool2(2);
  const llm::Calibration cal = llm::calibrate(model->ck, pool, 16);
  const int positions = 24;
  for (const llm::Int8Options base :
       {llm::Int8Options{}, llm::Int8Options{.chip_rope = true},
        llm::Int8Options{.weighted_sum = llm::WeightedSum::kValueCache, .chip_rope = true}}) {
    SCOPED_TRACE(std::string("chip_rope ") + (base.chip_rope ? "on" : "off") + ", value cache " +
                 (base.weighted_sum == llm::WeightedSum::kValueCache ? "on" : "off"));
    llm::Int8Options with = base;
    with.chip_rms = true;
    llm::Int8Transformer on(model->ck, pool, cal, with), on2(model->ck, pool2, cal, with),
        off(model->ck, pool, cal, base);
    RFromBytes replaced(model->ck, pool, cal, base);
    const auto want = greedy_logits(on, positions);
    EXPECT_TRUE(greedy_logits(on2, positions) == want);
    EXPECT_TRUE(greedy_logits(replaced, positions) == want);
    EXPECT_FALSE(greedy_logits(off, positions) == want);
    ASSERT_EQ(replaced.rs.size(), size_t(positions * model->ck.config.n_layers));
    int clipped = 0;
    for (size_t i = 0; i < replaced.rs.size(); ++i) {
      const double ratio = double(replaced.rs[i]) / replaced.host_rs[i];
      if (!replaced.saturated[i]) {
        EXPECT_NEAR(ratio, 1.0, 0.005) << "call " << i;
        continue;
      }
      // A clamped byte lies nearer the zero point than x: a smaller sum, a larger r.
      ++clipped;
      EXPECT_GE(ratio, 0.995) << "call " << i;
      EXPECT_LE(ratio, 1.04) << "call " << i;
    }
    EXPECT_LT(clipped, positions);
  }
  const llm::Int8Options unfused{.fused_layers = false, .chip_attention = false, .chip_rms = true};
  EXPECT_THROW(llm::Int8Transformer(model->ck, pool, cal, unfused), Error);
}

}  // namespace
}  // namespace tinycoral::testing
