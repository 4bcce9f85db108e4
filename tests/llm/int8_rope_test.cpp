// RoPE and RMSNorm's scale in the chip's elementwise ops (Int8Options::chip_rope, llm/int8_rope.h,
// docs/llm.md "RoPE in the chip's ops"): the per-token tables against the float path's angles,
// every output byte against the ops written out here (MUL, MUL, ADD through the output stage) and
// within its roundings of the float rotation, and the int8 path with the option against float32
// and against the host's float RoPE.
#include "llm/int8_rope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/error.h"
#include "llama2c_files.h"
#include "llm/int8_model.h"
#include "llm/kernels.h"
#include "llm/sampler.h"

namespace tinycoral::testing {
namespace {

double angle(int pos, int channel, int head_size) {
  const int head_dim = (channel & ~1) % head_size;
  return pos * std::pow(10000.0, -double(head_dim) / head_size);
}

TEST(Int8Rope, TablesAreTheFloatPathsAnglesIn127thSteps) {
  const int hs = 8, n = 24;  // three heads
  std::vector<int8_t> c(n), s(n);
  llm::rope_tables(0, n, hs, c.data(), s.data());
  for (int j = 0; j < n; ++j) {
    EXPECT_EQ(c[size_t(j)], 127);
    EXPECT_EQ(s[size_t(j)], 0);
  }
  for (const int pos : {1, 7, 200}) {
    llm::rope_tables(pos, n, hs, c.data(), s.data());
    for (int j = 0; j < n; ++j) {
      const double a = angle(pos, j, hs);
      // The float path's float32 angle may round a table byte the other way at a half step.
      EXPECT_NEAR(c[size_t(j)], 127 * std::cos(a), 0.51) << pos << " " << j;
      EXPECT_NEAR(s[size_t(j)], (j % 2 == 0 ? -127 : 127) * std::sin(a), 0.51) << pos << " " << j;
    }
  }
}

// The output stage written out: f32(acc) x mult, clamps +-127 in float32, rounding half to even,
// zero point 0 (docs/chip_ops.md 2, "Output stage").
int32_t stage(int32_t acc, float mult) {
  float y = static_cast<float>(acc) * mult;
  y = std::min(std::max(y, -127.0f), 127.0f);
  return static_cast<int32_t>(std::lrint(y));
}

// MUL(x, cos), MUL(swap(x), sin'), ADD with the per-token multiplier f32(base_j r): `sign` -1
// turns the other way (the perturbation the test must see).
std::vector<int8_t> reference(const llm::QuantizedRope& q, const std::vector<int8_t>& x,
                              const std::vector<int8_t>& c, const std::vector<int8_t>& s, float r,
                              int sign = 1) {
  std::vector<int8_t> out(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const int32_t p1 = stage((x[j] - q.in_zero_point) * c[j], q.mul_mult);
    const int32_t p2 = stage((x[j ^ 1] - q.in_zero_point) * sign * s[j], q.mul_mult);
    const volatile float mult = q.base[j] * r;
    out[j] = static_cast<int8_t>(stage(p1 + p2, mult));
  }
  return out;
}

TEST(Int8Rope, IsMulMulAddInTheChipsOutputStage) {
  std::mt19937 rng(3);
  const int hs = 16, n = 64;
  for (int trial = 0; trial < 20; ++trial) {
    SCOPED_TRACE(trial);
    const float in_scale = std::uniform_real_distribution<float>(0.01f, 0.2f)(rng);
    const int32_t zp = std::uniform_int_distribution<int32_t>(-40, 40)(rng);
    std::vector<float> gain(n), out_scale(n);
    for (int j = 0; j < n; j += 2) {  // a pair shares its gain and scale, as the key scales do
      gain[size_t(j)] = gain[size_t(j) + 1] = std::uniform_real_distribution<float>(0.5f, 2)(rng);
      out_scale[size_t(j)] = out_scale[size_t(j) + 1] =
          std::uniform_real_distribution<float>(0.01f, 0.05f)(rng) * in_scale * 127;
    }
    const llm::QuantizedRope q = llm::quantize_rope(in_scale, zp, gain, out_scale);
    // P's scale: the largest |x| the input's bytes hold, over 127; the products' multiplier.
    const float reach = float(std::max(zp + 128, 127 - zp)) * in_scale;
    EXPECT_FLOAT_EQ(q.product_scale, reach / 127);
    EXPECT_EQ(q.mul_mult, [&] {
      const volatile float p = in_scale * (1.0f / 127.0f);
      return p * (1.0f / q.product_scale);
    }());
    std::vector<int8_t> x(n), c(n), s(n), got(n);
    for (int8_t& v : x) v = static_cast<int8_t>(std::uniform_int_distribution<int>(-128, 127)(rng));
    const int pos = std::uniform_int_distribution<int>(1, 255)(rng);
    const float r = std::uniform_real_distribution<float>(0.5f, 3.0f)(rng);
    llm::rope_tables(pos, n, hs, c.data(), s.data());
    llm::rope_q(q, x.data(), c.data(), s.data(), n, r, got.data());
    EXPECT_EQ(got, reference(q, x, c, s, r));
    int differ = 0, inside = 0;
    for (int j = 0; j < n; ++j) {
      // Within the roundings of the float rotation: the tables (half a 1/127 step each), the two
      // products (half of s_p each) and the output's half step, in output steps.
      const double a = angle(pos, j, hs);
      const double x0 = (x[size_t(j)] - zp) * double(in_scale),
                   x1 = (x[size_t(j ^ 1)] - zp) * double(in_scale);
      const double rotated =
          j % 2 == 0 ? x0 * std::cos(a) - x1 * std::sin(a) : x0 * std::cos(a) + x1 * std::sin(a);
      const double unit = r * gain[size_t(j)] / out_scale[size_t(j)];
      const double want = rotated * unit;
      if (std::fabs(want) > 126) continue;  // saturated
      ++inside;
      const double bound =
          0.5 + unit * (q.product_scale + (std::fabs(x0) + std::fabs(x1)) * 0.5 / 127) + 1e-3;
      EXPECT_LE(std::fabs(got[size_t(j)] - want), bound) << "channel " << j;
    }
    EXPECT_GT(inside, n / 2);  // the case is not all saturated
    // Turning the other way changes many bytes: the comparison above would see it.
    const std::vector<int8_t> wrong = reference(q, x, c, s, r, -1);
    for (int j = 0; j < n; ++j) differ += wrong[size_t(j)] != got[size_t(j)];
    EXPECT_GT(differ, n / 4);
  }
}

// The int8 path, exposing its key cache.
class KeyedInt8 : public llm::Int8Transformer {
 public:
  using Int8Transformer::Int8Transformer;
  const int8_t* key(int layer, int t) const { return key_q(layer, t); }
};

// rand_gqa, layer 0 (whose q, k and r are the same in both arithmetics for the same token): the
// keys from the chain's bytes in the chip's ops are the host's float RoPE keys within a step or two
// (the two products' roundings), most of them equal.
TEST(Int8Rope, KeysFromTheChainsBytesAreTheHostsWithinItsRounding) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(model->ck, pool, 16);
  KeyedInt8 host(model->ck, pool, cal, {}), chip(model->ck, pool, cal, {.chip_rope = true});
  const int kv_dim = model->ck.config.kv_dim();
  int equal = 0, total = 0;
  bool later_layer_differs = false;
  int token = llm::kBos;
  for (int pos = 0; pos < 24; ++pos) {
    host.forward(token, pos);
    chip.forward(token, pos);
    for (int j = 0; j < kv_dim; ++j) {
      const int d = host.key(0, pos)[j] - chip.key(0, pos)[j];
      EXPECT_LE(std::abs(d), 2) << "position " << pos << " channel " << j;
      equal += d == 0;
      ++total;
    }
    later_layer_differs |=
        !std::equal(host.key(1, pos), host.key(1, pos) + kv_dim, chip.key(1, pos));
    token = (token * 7 + 11) % model->ck.config.vocab_size;
  }
  EXPECT_GT(equal, total / 2);
  EXPECT_TRUE(later_layer_differs);  // the option changes the arithmetic
  // Without the chip's attention there is nothing to rotate into.
  EXPECT_THROW(
      llm::Int8Transformer(model->ck, pool, cal, {.chip_attention = false, .chip_rope = true}),
      Error);
}

}  // namespace
}  // namespace tinycoral::testing
