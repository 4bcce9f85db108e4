// The residual stream in int8 (Int8Options::chip_residual, llm/int8_residual.h): each new integer
// step against its arithmetic written out (and against what one rounding promises), and the int8
// path with the option against those steps composed as the docs say, through its seams.
#include "llm/int8_residual.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "common/error.h"
#include "llama2c_files.h"
#include "llm/int8_model.h"
#include "llm/int8_rms.h"
#include "llm/sampler.h"

namespace tinycoral::testing {
namespace {

// (Named: in a unity build other tests' anonymous helpers share the file.)
namespace residual_test {

// The output stage written out: f32(acc) times the multiplier, the float32 clamps, rounding half
// to even, the zero point.
int32_t output_stage(int32_t acc, float mult, float lo, float hi, int32_t zero_point) {
  float y = static_cast<float>(acc) * mult;
  y = std::min(std::max(y, lo), hi);
  return static_cast<int32_t>(std::nearbyint(y)) + zero_point;
}

float product(float a, float b) {
  const volatile float p = a * b;
  return p;
}

}  // namespace residual_test

TEST(Int8Residual, ValueTildeIsWvsOutputStageRoundedOnce) {
  using namespace residual_test;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int twice_worse = 0, clamped = 0;
  for (int trial = 0; trial < 40; ++trial) {
    const int rows = 1 + int(rng() % 70), cols = 1 + int(rng() % 300);
    std::vector<float> w(size_t(rows) * size_t(cols));
    for (float& v : w) v = normal(rng) * 0.1f;
    const float span = 1.0f + float(rng() % 8);
    const llm::QuantizedMatmul wv =
        llm::quantize_matmul({w.data(), rows, cols}, {-span, 0.5f * span}, {-3.0f, 3.0f});
    std::vector<float> v_scale;
    for (int j = 0; j < rows; ++j) v_scale.push_back(0.002f + 0.03f * float(rng() % 100) / 100.0f);
    const std::vector<float> base = llm::value_tilde_base(wv, v_scale);
    std::vector<int8_t> x(static_cast<size_t>(cols));
    for (int8_t& b : x) b = static_cast<int8_t>(int(rng() % 256) - 128);
    const float r = 0.05f + 4.0f * float(rng() % 1000) / 1000.0f;
    std::vector<int8_t> got(static_cast<size_t>(rows));
    llm::value_tilde(wv, base, x.data(), r, got.data());
    for (int j = 0; j < rows; ++j) {
      int32_t acc = 0;
      for (int i = 0; i < cols; ++i)
        acc += (int32_t{x[size_t(i)]} - wv.in.zero_point) *
               int32_t{wv.w[size_t(j) * size_t(cols) + size_t(i)]};
      // base_j = f32(f32(s_x s_w,j) f32(1 / s_v~,j)), then one FMUL by r.
      const float b =
          product(product(wv.in.scale, wv.w_scale[size_t(j)]), 1.0f / v_scale[size_t(j)]);
      ASSERT_EQ(base[size_t(j)], b);
      const int32_t want = output_stage(acc, product(b, r), -127.0f, 127.0f, 0);
      ASSERT_EQ(int32_t{got[size_t(j)]}, want) << trial << " " << j;
      // One rounding: within half a step of r v / s_v~ (exact in double) unless clamped; the two
      // roundings of before (v's bytes, then v~ from them) can be further off.
      const double exact =
          double(acc) * wv.in.scale * wv.w_scale[size_t(j)] * r / v_scale[size_t(j)];
      if (std::fabs(exact) >= 127.0) {
        ++clamped;
        continue;
      }
      EXPECT_LE(std::fabs(double(want) - exact), 0.5 + 1e-4 * std::fabs(exact))
          << trial << " " << j;
      const float v =
          float(llm::requantize_row(wv, j, acc + wv.in.zero_point * wv.w_rowsum[size_t(j)]) -
                wv.out.zero_point) *
          wv.out.scale * r;
      twice_worse +=
          std::fabs(double(llm::quantize_symmetric(v, v_scale[size_t(j)])) - exact) > 0.5 + 1e-3;
    }
  }
  EXPECT_GT(clamped, 0);      // the clamps were reached
  EXPECT_GT(twice_worse, 0);  // and the one rounding is not the two of before
}

TEST(Int8Residual, FfnInputIsADiagonalFcOfTheBytesWithRFromThem) {
  using namespace residual_test;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int checked = 0, clamped = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int dim = 1 + int(rng() % 400);
    const llm::QParams x2{0.001f + float(rng() % 1000) / 4000.0f, int32_t(rng() % 256) - 128};
    const llm::QParams out =
        llm::qparams_for_range(-1.0f - float(rng() % 5), 2.0f + float(rng() % 5));
    std::vector<float> g(static_cast<size_t>(dim));
    for (float& v : g) v = normal(rng);
    g[0] = 0.0f;  // a zero weight gives the zero point
    const llm::QuantizedRmsInput q = llm::quantize_rms_input(x2, out, g.data(), dim);
    std::vector<int8_t> x(static_cast<size_t>(dim));
    for (int8_t& b : x) b = static_cast<int8_t>(int(rng() % 256) - 128);
    // r_ffn is the scalar core's routine of chip_rms, in x2's grid.
    const float r = llm::rms_input_scale(q, x.data(), dim);
    ASSERT_EQ(r, llm::chip_rms_scale(x.data(), dim, x2.scale, x2.zero_point));
    std::vector<int8_t> got(static_cast<size_t>(dim));
    llm::rms_input(q, x.data(), dim, r, got.data());
    float lo = 0, hi = 0;
    llm::output_clamps(out, lo, hi);
    EXPECT_EQ(int32_t{got[0]}, out.zero_point);
    for (int j = 0; j < dim; ++j) {
      const int32_t d = int32_t{x[size_t(j)]} - x2.zero_point;
      const int32_t acc = g[size_t(j)] > 0 ? d : g[size_t(j)] < 0 ? -d : 0;
      const float c = product(product(x2.scale, std::fabs(g[size_t(j)])), 1.0f / out.scale);
      const int32_t want =
          std::clamp(output_stage(acc, product(c, r), lo, hi, out.zero_point), -128, 127);
      ASSERT_EQ(int32_t{got[size_t(j)]}, want) << trial << " " << j;
      // RMSNorm's g_j r x_j on the FFN input's grid: within half a step where not clamped.
      const double exact = double(g[size_t(j)]) * r * double(d) * x2.scale / out.scale;
      if (exact <= lo || exact >= hi) {
        ++clamped;
        continue;
      }
      EXPECT_LE(std::fabs(double(want - out.zero_point) - exact), 0.5 + 1e-4 * std::fabs(exact));
      ++checked;
    }
  }
  EXPECT_GT(clamped, 0);
  EXPECT_GT(checked, 1000);
}

// The int8 path's seams, recording what each step read and wrote.
class RecordingInt8 : public llm::Int8Transformer {
 public:
  using Int8Transformer::Int8Transformer;
  struct Layer {
    std::vector<int8_t> in, o, ffn_in, x2, f, v_tilde;
    float r = 0;
  };
  std::vector<Layer> layers;
  std::vector<float> final_x;

 protected:
  void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) override {
    Int8Transformer::qkv_q(layer, xq, q, k, v);
    layers.resize(size_t(config().n_layers));
    layers[size_t(layer)].in.assign(xq, xq + config().dim);
  }
  void wo_q(int layer, const int8_t* a, int8_t* o) override {
    Int8Transformer::wo_q(layer, a, o);
    layers[size_t(layer)].o.assign(o, o + config().dim);
  }
  void ffn_add_q(int layer, const int8_t* xq, const int8_t* x2q, int8_t* yq,
                 int8_t* next) override {
    Int8Transformer::ffn_add_q(layer, xq, x2q, yq, next);
    layers[size_t(layer)].x2.assign(x2q, x2q + config().dim);
  }
  void ffn_q(int layer, const int8_t* xq, int8_t* yq) override {
    Int8Transformer::ffn_q(layer, xq, yq);
    Layer& l = layers[size_t(layer)];
    l.ffn_in.assign(xq, xq + config().dim);
    l.f.assign(yq, yq + config().dim);
  }
  void final_residual(float* x) override {
    Int8Transformer::final_residual(x);
    final_x.assign(x, x + config().dim);
  }
};

TEST(Int8Residual, TheLayerIsTheStepsComposedAsTheDocsSay) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  const llm::Checkpoint& ck = model->ck;
  const llm::Config& c = ck.config;
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(ck, pool, 8);
  const llm::Int8Options options{.weighted_sum = llm::WeightedSum::kValueCache,
                                 .chip_rope = true,
                                 .chip_rms = true,
                                 .chip_residual = true};
  RecordingInt8 m(ck, pool, cal, options);
  const llm::Int8Weights& w = *m.weights();
  const int last = c.n_layers - 1;
  ASSERT_EQ(w.attention_adds.size(), size_t(c.n_layers));
  std::vector<int8_t> want(static_cast<size_t>(c.dim));
  std::vector<float> x(static_cast<size_t>(c.dim));
  int token = llm::kBos;
  for (int pos = 0; pos < 12; ++pos) {
    SCOPED_TRACE(pos);
    const std::span<float> logits = m.forward(token, pos);
    for (int l = 0; l < c.n_layers; ++l) {
      SCOPED_TRACE(l);
      const RecordingInt8::Layer& s = m.layers[size_t(l)];
      // x2 = x's bytes + wo's output, the residual add's integers.
      llm::residual_add(w.attention_adds[size_t(l)], s.in.data(), s.o.data(), c.dim, want.data());
      std::vector<int8_t> x2 = want;
      if (l < last) {
        EXPECT_EQ(s.x2, x2);
      }
      // The FFN's input: the diagonal FC of x2's bytes with r_ffn from them.
      const llm::QuantizedRmsInput& n = w.rms_inputs[size_t(l)];
      llm::rms_input(n, x2.data(), c.dim, llm::rms_input_scale(n, x2.data(), c.dim), want.data());
      EXPECT_EQ(s.ffn_in, want);
      // The next layer reads x2's bytes + w2's output; the last one's add is the final residual.
      const llm::QuantizedAdd& add = l < last ? w.adds[size_t(l)] : w.final_add;
      llm::residual_add(add, x2.data(), s.f.data(), c.dim, want.data());
      if (l < last) {
        EXPECT_EQ(m.layers[size_t(l) + 1].in, want);
      } else {
        for (int i = 0; i < c.dim; ++i)
          x[size_t(i)] = float(int32_t{want[size_t(i)]} - add.out.zero_point) * add.out.scale;
        EXPECT_EQ(m.final_x, x);
      }
      // r of the layer is chip_rms of its input bytes.
      EXPECT_EQ(m.rms_scale_at(l, pos),
                llm::chip_rms_scale(s.in.data(), c.dim, w.matmul(l, llm::LayerMatmul::kQ).in.scale,
                                    w.matmul(l, llm::LayerMatmul::kQ).in.zero_point));
    }
    token = llm::argmax(logits);
  }
  // The grids the adds share: x's is q, k and v's input; x2's is the FFN add's x.
  for (int l = 0; l < c.n_layers; ++l) {
    EXPECT_EQ(w.attention_adds[size_t(l)].x.scale, w.matmul(l, llm::LayerMatmul::kQ).in.scale);
    EXPECT_EQ(w.rms_inputs[size_t(l)].in.scale, w.attention_adds[size_t(l)].out.scale);
    EXPECT_EQ(w.rms_inputs[size_t(l)].out.scale, w.matmul(l, llm::LayerMatmul::kW1).in.scale);
    if (l < last) {
      EXPECT_EQ(w.adds[size_t(l)].x.scale, w.attention_adds[size_t(l)].out.scale);
    }
  }
}

// v~ in the cache is wv's output stage of the layer's input bytes with r (one rounding), not the
// value cache's quantization of r v.
class ValueCacheReader : public llm::Int8Transformer {
 public:
  using Int8Transformer::Int8Transformer;
  std::vector<int8_t> value(int layer, int t) const {
    const int8_t* v = value_q(layer, t);
    return {v, v + config().kv_dim()};
  }
  std::vector<std::vector<int8_t>> inputs, v_bytes;  // [layer] of the last position

 protected:
  void qkv_q(int layer, const int8_t* xq, int8_t* q, int8_t* k, int8_t* v) override {
    Int8Transformer::qkv_q(layer, xq, q, k, v);
    inputs.resize(size_t(config().n_layers));
    inputs[size_t(layer)].assign(xq, xq + config().dim);
    v_bytes.resize(size_t(config().n_layers));
    v_bytes[size_t(layer)].assign(v, v + config().kv_dim());
  }
};

TEST(Int8Residual, TheValueCacheHoldsWvsOutputStageWithR) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  const llm::Config& c = model->ck.config;
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(model->ck, pool, 8);
  llm::Int8Options options{.weighted_sum = llm::WeightedSum::kValueCache,
                           .chip_rope = true,
                           .chip_rms = true,
                           .chip_residual = true};
  ValueCacheReader m(model->ck, pool, cal, options);
  const llm::Int8Weights& w = *m.weights();
  std::vector<int8_t> want(static_cast<size_t>(c.kv_dim()));
  int token = llm::kBos, differs = 0;
  for (int pos = 0; pos < 8; ++pos) {
    token = llm::argmax(m.forward(token, pos));
    for (int l = 0; l < c.n_layers; ++l) {
      const llm::QuantizedMatmul& wv = w.matmul(l, llm::LayerMatmul::kV);
      llm::value_tilde(wv, w.attention[size_t(l)].v_base, m.inputs[size_t(l)].data(),
                       m.rms_scale_at(l, pos), want.data());
      EXPECT_EQ(m.value(l, pos), want) << l << " " << pos;
      // The value cache's two roundings without the option (v's bytes, then r v quantized) give
      // other bytes somewhere.
      const llm::QParams vq = wv.out;
      for (int j = 0; j < c.kv_dim(); ++j) {
        const float v = float(int32_t{m.v_bytes[size_t(l)][size_t(j)]} - vq.zero_point) * vq.scale *
                        m.rms_scale_at(l, pos);
        differs += llm::quantize_symmetric(v, w.attention[size_t(l)].v_scale[size_t(j)]) !=
                   want[size_t(j)];
      }
    }
  }
  EXPECT_GT(differs, 0);
}

TEST(Int8Residual, TheOptionNeedsItsParts) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto model = reference_model(data, "rand_gqa", why);
  if (!model) GTEST_SKIP() << why;
  llm::ThreadPool pool(1);
  const llm::Calibration cal = llm::calibrate(model->ck, pool, 4);
  const llm::Int8Options whole{.weighted_sum = llm::WeightedSum::kValueCache,
                               .chip_rope = true,
                               .chip_rms = true,
                               .chip_residual = true};
  EXPECT_NO_THROW(llm::Int8Weights(model->ck, cal, whole));
  for (int missing = 0; missing < 3; ++missing) {
    llm::Int8Options o = whole;
    if (missing == 0) o.chip_rms = false;
    if (missing == 1) o.chip_rope = false;
    if (missing == 2) o.weighted_sum = llm::WeightedSum::kScalarCore;
    EXPECT_THROW(llm::Int8Weights(model->ck, cal, o), Error) << missing;
  }
}

// `generate --int8 --chip-residual` with the options it builds on writes another text than without
// it (greedy: the arithmetic changed), and is refused without them (on an Edge TPU device too).
TEST(Int8Residual, GenerateTakesTheFlagWithItsParts) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::string why;
  const auto path = reference_checkpoint(data, "rand_gqa", why);
  if (!path) GTEST_SKIP() << why;
  const std::string parts =
      "-n 24 -t 0 --calibration 8 --int8 --chip-rms --chip-rope "
      "--weighted-sum value-cache";
  const CommandResult base = run_cli(generate_args(data, *path, parts));
  const CommandResult residual = run_cli(generate_args(data, *path, parts + " --chip-residual"));
  ASSERT_EQ(base.exit_code, 0) << base.err;
  ASSERT_EQ(residual.exit_code, 0) << residual.err;
  EXPECT_GT(residual.out.size(), 10u);
  EXPECT_NE(residual.out, base.out);
  for (const std::string bad :
       {"--int8 --chip-rope --weighted-sum value-cache --chip-residual",
        "--int8 --chip-rms --weighted-sum value-cache --chip-residual",
        "--int8 --chip-rms --chip-rope --chip-residual",
        "--device sim --chip-rms --chip-rope --chip-residual", "--chip-residual"}) {
    const CommandResult r = run_cli(generate_args(data, *path, "-n 4 " + bad));
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--chip-residual needs --int8"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace tinycoral::testing
