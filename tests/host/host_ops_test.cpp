// The common quantized operators on hand-computed cases (ties where tflite and edgetpu modes
// differ, saturation, zero points at both ends), plus CONV_2D / DEPTHWISE_CONV_2D / FULLY_CONNECTED
// against a naive loop on random data at every SIMD level.
#include <gtest/gtest.h>

#include <random>

#include "host/op_util.h"
#include "host/qgemm.h"
#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::Activation;
using container::BuiltinOp;
using container::Padding;
using container::TensorType;
using testing::OneOpModel;
using testing::output_as;
using testing::set_input;

constexpr auto U8 = TensorType::kUInt8;
constexpr auto I8 = TensorType::kInt8;
constexpr auto I32 = TensorType::kInt32;

// A 1x1 conv over two channels: out = f(in_scale * w_scale / out_scale * (sum + bias)).
OneOpModel dot_conv(std::vector<uint8_t> w, float in_scale, int in_zp, float w_scale, int w_zp,
                    float out_scale, int out_zp, int32_t bias, Activation act = Activation::kNone) {
  OneOpModel m(BuiltinOp::kConv2D);
  const int in = m.tensor(U8, {1, 1, 1, 2}, in_scale, in_zp);
  const int f = m.tensor(U8, {1, 1, 1, 2}, w_scale, w_zp, w);
  const int b =
      m.tensor(I32, {1}, in_scale * w_scale, 0, OneOpModel::bytes(std::vector<int32_t>{bias}));
  const int out = m.tensor(U8, {1, 1, 1, 1}, out_scale, out_zp);
  m.wire({in, f, b}, {out});
  container::Conv2DOptions o;
  o.padding = Padding::kValid;
  o.activation = act;
  m.options(o);
  return m;
}

uint8_t run_u8(const OneOpModel& m, std::vector<uint8_t> in, Rounding r) {
  Interpreter it = m.build(r);
  set_input(it, 0, in);
  it.invoke();
  return output_as<uint8_t>(it, 0)[0];
}

TEST(HostConv2D, TieRoundsAwayInTfliteAndToEvenOnTheChip) {
  // (3 + 5) * 1 + bias 2 = 10; scale 0.5 * 0.5 / 1 = 0.25 -> 2.5.
  const OneOpModel m = dot_conv({1, 1}, 0.5f, 0, 0.5f, 0, 1.0f, 0, 2);
  EXPECT_EQ(run_u8(m, {3, 5}, Rounding::kTflite), 3);
  EXPECT_EQ(run_u8(m, {3, 5}, Rounding::kEdgeTpu), 2);
  // 14 * 0.25 = 3.5: both round up to 4.
  EXPECT_EQ(run_u8(m, {7, 5}, Rounding::kTflite), 4);
  EXPECT_EQ(run_u8(m, {7, 5}, Rounding::kEdgeTpu), 4);
}

TEST(HostConv2D, ZeroPointsAtBothEndsAndSaturation) {
  // Input zp 255, weight zp 0: x - 255 <= 0. Weights 2, 3 (zp 0). Output zp 255, scale 1.
  // x = (250, 254): (-5)*2 + (-1)*3 = -13 -> 255 - 13 = 242.
  const OneOpModel a = dot_conv({2, 3}, 1.0f, 255, 1.0f, 0, 1.0f, 255, 0);
  EXPECT_EQ(run_u8(a, {250, 254}, Rounding::kTflite), 242);
  EXPECT_EQ(run_u8(a, {250, 254}, Rounding::kEdgeTpu), 242);
  // Weight zp 255, weights 255, 254 -> (0, -1); input zp 0 -> -x1; output zp 0 saturates at 0.
  const OneOpModel b = dot_conv({255, 254}, 1.0f, 0, 1.0f, 255, 1.0f, 0, 0);
  EXPECT_EQ(run_u8(b, {9, 9}, Rounding::kTflite), 0);
  EXPECT_EQ(run_u8(b, {9, 9}, Rounding::kEdgeTpu), 0);
  // Large positive sums saturate at 255: 255*255*2 with zp 0.
  const OneOpModel c = dot_conv({255, 255}, 1.0f, 0, 1.0f, 0, 1.0f, 0, 0);
  EXPECT_EQ(run_u8(c, {255, 255}, Rounding::kTflite), 255);
  EXPECT_EQ(run_u8(c, {255, 255}, Rounding::kEdgeTpu), 255);
  // RELU6 with scale 0.1 zp 0 clamps at 60.
  const OneOpModel d = dot_conv({1, 1}, 1.0f, 0, 1.0f, 0, 0.1f, 0, 0, Activation::kRelu6);
  EXPECT_EQ(run_u8(d, {50, 50}, Rounding::kTflite), 60);
  EXPECT_EQ(run_u8(d, {50, 50}, Rounding::kEdgeTpu), 60);
  EXPECT_EQ(run_u8(d, {1, 2}, Rounding::kTflite), 30);
}

// ---------------------------------------------------------------- random vs naive

struct ConvCase {
  TensorType type;
  int n, h, w, c, oc, fh, fw, sh, sw, dh, dw;
  Padding pad;
  bool per_channel, depthwise;
  Activation act;
};

template <typename T>
std::vector<uint8_t> random_bytes(std::mt19937& rng, size_t n) {
  std::uniform_int_distribution<int> d(0, 255);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(d(rng));
  return v;
}

// The naive definition: sum over in-bounds taps of (x - zx)(w - zw) + bias, TFLite requantization.
template <typename T>
std::vector<T> naive_conv(const ConvCase& k, const std::vector<T>& x, const std::vector<T>& w,
                          const std::vector<int32_t>& bias, int zx, const std::vector<int>& zw,
                          const std::vector<float>& ws, float xs, float ys, int zy, int oh, int ow,
                          int pad_h, int pad_w) {
  const int oc = k.oc;
  std::vector<T> out(static_cast<size_t>(k.n * oh * ow * oc));
  const int mult = k.depthwise ? oc / k.c : 1;
  const QRange act = activation_range(k.act, ys, zy, k.type);
  for (int b = 0; b < k.n; ++b)
    for (int y = 0; y < oh; ++y)
      for (int xo = 0; xo < ow; ++xo)
        for (int o = 0; o < oc; ++o) {
          int64_t acc = bias[static_cast<size_t>(o)];
          for (int fy = 0; fy < k.fh; ++fy)
            for (int fx = 0; fx < k.fw; ++fx) {
              const int iy = y * k.sh - pad_h + fy * k.dh, ix = xo * k.sw - pad_w + fx * k.dw;
              if (iy < 0 || iy >= k.h || ix < 0 || ix >= k.w) continue;
              const size_t pix = ((static_cast<size_t>(b) * k.h + iy) * k.w + ix) * k.c;
              if (k.depthwise) {
                const int ic = o / mult;
                const int wv = w[(static_cast<size_t>(fy) * k.fw + fx) * oc + o];
                acc += (int64_t{x[pix + ic]} - zx) * (wv - zw[static_cast<size_t>(o)]);
              } else {
                for (int ic = 0; ic < k.c; ++ic) {
                  const int wv = w[((static_cast<size_t>(o) * k.fh + fy) * k.fw + fx) * k.c + ic];
                  acc += (int64_t{x[pix + ic]} - zx) * (wv - zw[static_cast<size_t>(o)]);
                }
              }
            }
          const auto q =
              quantize_multiplier(static_cast<double>(xs) * ws[static_cast<size_t>(o)] / ys);
          int32_t v = multiply_by_quantized_multiplier(static_cast<int32_t>(acc), q) + zy;
          v = std::clamp(v, act.min, act.max);
          out[((static_cast<size_t>(b) * oh + y) * ow + xo) * oc + o] = static_cast<T>(v);
        }
  return out;
}

template <typename T>
void check_conv_case(const ConvCase& k, uint32_t seed) {
  std::mt19937 rng(seed);
  const PaddedDim ph = padded_dim(k.pad, k.h, k.fh, k.sh, k.dh);
  const PaddedDim pw = padded_dim(k.pad, k.w, k.fw, k.sw, k.dw);
  const int oh = ph.out, ow = pw.out;
  const size_t wn = k.depthwise ? static_cast<size_t>(k.fh * k.fw * k.oc)
                                : static_cast<size_t>(k.oc * k.fh * k.fw * k.c);
  const auto xb = random_bytes<T>(rng, static_cast<size_t>(k.n * k.h * k.w * k.c));
  const auto wb = random_bytes<T>(rng, wn);
  std::uniform_int_distribution<int> zd(std::is_same_v<T, uint8_t> ? 0 : -128,
                                        std::is_same_v<T, uint8_t> ? 255 : 127);
  std::uniform_int_distribution<int32_t> bd(-5000, 5000);
  std::uniform_real_distribution<float> sd(0.002f, 0.05f);
  const int zx = zd(rng), zy = zd(rng);
  const float xs = sd(rng), ys = sd(rng) * 20;
  std::vector<float> ws(static_cast<size_t>(k.oc));
  std::vector<int> zw(static_cast<size_t>(k.oc));
  std::vector<int32_t> bias(static_cast<size_t>(k.oc));
  const int shared_zw = std::is_same_v<T, uint8_t> ? zd(rng) : 0;
  const float shared_ws = sd(rng);
  for (int o = 0; o < k.oc; ++o) {
    ws[static_cast<size_t>(o)] = k.per_channel ? sd(rng) : shared_ws;
    zw[static_cast<size_t>(o)] = shared_zw;
    bias[static_cast<size_t>(o)] = bd(rng);
  }
  OneOpModel m(k.depthwise ? BuiltinOp::kDepthwiseConv2D : BuiltinOp::kConv2D);
  const int in = m.tensor(k.type, {k.n, k.h, k.w, k.c}, xs, zx);
  const int f = m.tensor(k.type,
                         k.depthwise ? std::vector<int32_t>{1, k.fh, k.fw, k.oc}
                                     : std::vector<int32_t>{k.oc, k.fh, k.fw, k.c},
                         ws[0], shared_zw, wb);
  if (k.per_channel) {
    auto& q = m.model().subgraphs[0].tensors[static_cast<size_t>(f)].quantization;
    q.scale = ws;
    q.zero_point.assign(ws.size(), shared_zw);
    q.quantized_dimension = k.depthwise ? 3 : 0;
  }
  const int b = m.tensor(I32, {k.oc}, xs * ws[0], 0, OneOpModel::bytes(bias));
  const int out = m.tensor(k.type, {k.n, oh, ow, k.oc}, ys, zy);
  m.wire({in, f, b}, {out});
  if (k.depthwise) {
    container::DepthwiseConv2DOptions o;
    o.padding = k.pad;
    o.stride_h = k.sh, o.stride_w = k.sw, o.dilation_h = k.dh, o.dilation_w = k.dw;
    o.depth_multiplier = k.oc / k.c;
    o.activation = k.act;
    m.options(o);
  } else {
    container::Conv2DOptions o;
    o.padding = k.pad;
    o.stride_h = k.sh, o.stride_w = k.sw, o.dilation_h = k.dh, o.dilation_w = k.dw;
    o.activation = k.act;
    m.options(o);
  }
  std::vector<T> x(xb.size()), w(wb.size());
  std::memcpy(x.data(), xb.data(), xb.size());
  std::memcpy(w.data(), wb.data(), wb.size());
  const auto expected =
      naive_conv<T>(k, x, w, bias, zx, zw, ws, xs, ys, zy, oh, ow, ph.pad, pw.pad);
  for (SimdLevel level : supported_simd_levels()) {
    set_simd_level_override(level);
    Interpreter it = m.build(Rounding::kTflite);
    it.set_input(0, xb);
    it.invoke();
    const auto got = output_as<T>(it, 0);
    clear_simd_level_override();
    ASSERT_EQ(got, expected) << "seed " << seed << " level " << simd_level_name(level);
  }
}

TEST(HostConv2D, MatchesNaiveLoopAtEverySimdLevel) {
  const std::vector<ConvCase> cases = {
      {U8, 1, 7, 9, 3, 5, 3, 3, 2, 2, 1, 1, Padding::kSame, false, false, Activation::kNone},
      {U8, 2, 6, 5, 70, 9, 1, 1, 1, 1, 1, 1, Padding::kValid, false, false, Activation::kRelu6},
      {I8, 1, 8, 8, 16, 7, 3, 2, 1, 2, 2, 1, Padding::kSame, true, false, Activation::kRelu},
      {I8, 1, 5, 5, 130, 4, 2, 2, 1, 1, 1, 1, Padding::kValid, true, false, Activation::kNone},
  };
  uint32_t seed = 1;
  for (const auto& k : cases) {
    if (k.type == U8)
      check_conv_case<uint8_t>(k, seed++);
    else
      check_conv_case<int8_t>(k, seed++);
  }
}

TEST(HostDepthwiseConv2D, MatchesNaiveLoopWithMultipliers) {
  const std::vector<ConvCase> cases = {
      {U8, 1, 9, 9, 19, 19, 3, 3, 2, 2, 1, 1, Padding::kSame, false, true, Activation::kRelu6},
      {U8, 1, 6, 7, 3, 6, 3, 3, 1, 1, 2, 2, Padding::kSame, false, true, Activation::kNone},
      {I8, 2, 5, 5, 4, 12, 2, 3, 1, 1, 1, 1, Padding::kValid, true, true, Activation::kNone},
      {I8, 1, 8, 8, 24, 24, 3, 3, 1, 1, 1, 1, Padding::kSame, true, true, Activation::kRelu},
  };
  uint32_t seed = 100;
  for (const auto& k : cases) {
    if (k.type == U8)
      check_conv_case<uint8_t>(k, seed++);
    else
      check_conv_case<int8_t>(k, seed++);
  }
}

TEST(HostFullyConnected, PerChannelInt8ByHand) {
  // x = (10, -20) zp -2 -> (12, -18); rows (1, 2) scale 0.5 and (3, -1) scale 0.25; s_x 1, s_y 1.
  // row 0: (12 - 36) * 0.5 = -12; row 1: (36 + 18) * 0.25 = 13.5 -> 14 (tflite) / 14 (even).
  OneOpModel m(BuiltinOp::kFullyConnected);
  const int in = m.tensor(I8, {1, 2}, 1.0f, -2);
  const int w = m.tensor(I8, {2, 2}, 0.5f, 0, OneOpModel::bytes(std::vector<int8_t>{1, 2, 3, -1}));
  auto& q = m.model().subgraphs[0].tensors[static_cast<size_t>(w)].quantization;
  q.scale = {0.5f, 0.25f};
  q.zero_point = {0, 0};
  const int out = m.tensor(I8, {1, 2}, 1.0f, 0);
  m.wire({in, w, -1}, {out});
  m.options(container::FullyConnectedOptions{});
  for (Rounding r : {Rounding::kTflite, Rounding::kEdgeTpu}) {
    Interpreter it = m.build(r);
    set_input(it, 0, std::vector<int8_t>{10, -20});
    it.invoke();
    EXPECT_EQ(output_as<int8_t>(it, 0), (std::vector<int8_t>{-12, 14}));
  }
  // 12.5 on row 1 (x = (-2 + 12, ...)) would differ: x = (8, -20): (30 + 18) * 0.25 = 12 exactly;
  // x = (9, -20) -> (33 + 18) * .25 = 12.75 -> 13; x = (10, -18) -> (36 + 16) * .25 = 13.
}

// ---------------------------------------------------------------- pools

OneOpModel pool_model(BuiltinOp op, TensorType t, int zp, Activation act = Activation::kNone) {
  OneOpModel m(op);
  const int in = m.tensor(t, {1, 2, 2, 1}, 0.5f, zp);
  const int out = m.tensor(t, {1, 1, 1, 1}, 0.5f, zp);
  m.wire({in}, {out});
  container::Pool2DOptions o;
  o.padding = Padding::kValid;
  o.filter_h = o.filter_w = o.stride_h = o.stride_w = 2;
  o.activation = act;
  m.options(o);
  return m;
}

TEST(HostPool2D, AverageRoundsLikeTfliteOrTheChip) {
  // uint8 (1, 2, 2, 2) sum 7 / 4 = 1.75 -> 2 in both; (1, 1, 1, 2) = 1.25 -> 1;
  // (1, 2, 1, 2) = 1.5: tflite (6 + 2) / 4 = 2; chip: (x - zp) sum with zp 0 -> 1.5 -> 2 (even).
  // With zp 1: chip sums (x - 1) = 2 -> 0.5 -> 0 (even) + 1 = 1; tflite stays 2.
  const OneOpModel a = pool_model(BuiltinOp::kAveragePool2D, U8, 0);
  const OneOpModel b = pool_model(BuiltinOp::kAveragePool2D, U8, 1);
  auto run = [](const OneOpModel& m, std::vector<uint8_t> x, Rounding r) {
    Interpreter it = m.build(r);
    set_input(it, 0, x);
    it.invoke();
    return output_as<uint8_t>(it, 0)[0];
  };
  EXPECT_EQ(run(a, {1, 2, 2, 2}, Rounding::kTflite), 2);
  EXPECT_EQ(run(a, {1, 1, 1, 2}, Rounding::kTflite), 1);
  EXPECT_EQ(run(a, {1, 2, 1, 2}, Rounding::kTflite), 2);
  EXPECT_EQ(run(a, {1, 2, 1, 2}, Rounding::kEdgeTpu), 2);
  EXPECT_EQ(run(b, {1, 2, 1, 2}, Rounding::kTflite), 2);
  EXPECT_EQ(run(b, {1, 2, 1, 2}, Rounding::kEdgeTpu), 1);
  EXPECT_EQ(run(b, {255, 255, 255, 255}, Rounding::kEdgeTpu), 255);
  // int8 rounds half away from zero: (-1, -2, -1, -2) = -1.5 -> -2.
  const OneOpModel c = pool_model(BuiltinOp::kAveragePool2D, I8, 0);
  Interpreter it = c.build();
  set_input(it, 0, std::vector<int8_t>{-1, -2, -1, -2});
  it.invoke();
  EXPECT_EQ(output_as<int8_t>(it, 0)[0], -2);
}

TEST(HostPool2D, MaxWithActivation) {
  // RELU6 at scale 0.5 zp 10: max 10 + 12 = 22.
  const OneOpModel m = pool_model(BuiltinOp::kMaxPool2D, U8, 10, Activation::kRelu6);
  for (Rounding r : {Rounding::kTflite, Rounding::kEdgeTpu}) {
    Interpreter it = m.build(r);
    set_input(it, 0, std::vector<uint8_t>{3, 200, 14, 7});
    it.invoke();
    EXPECT_EQ(output_as<uint8_t>(it, 0)[0], 22);
    set_input(it, 0, std::vector<uint8_t>{3, 2, 4, 7});
    it.invoke();
    EXPECT_EQ(output_as<uint8_t>(it, 0)[0], 10);
  }
}

// ---------------------------------------------------------------- binary

OneOpModel binary_model(BuiltinOp op, float s1, int z1, float s2, int z2, float so, int zo,
                        std::vector<int32_t> shape2 = {1, 4}) {
  OneOpModel m(op);
  const int a = m.tensor(U8, {1, 4}, s1, z1);
  const int b = m.tensor(U8, shape2, s2, z2);
  const int o = m.tensor(U8, {1, 4}, so, zo);
  m.wire({a, b}, {o});
  m.options(container::ActivationOptions{});
  return m;
}

std::vector<uint8_t> run2(const OneOpModel& m, std::vector<uint8_t> a, std::vector<uint8_t> b,
                          Rounding r) {
  Interpreter it = m.build(r);
  set_input(it, 0, a);
  set_input(it, 1, b);
  it.invoke();
  return output_as<uint8_t>(it, 0);
}

TEST(HostBinary, AddSubMulByHand) {
  // Equal scales 1, zero points 10/20/5: (a - 10) + (b - 20) + 5.
  const OneOpModel add = binary_model(BuiltinOp::kAdd, 1, 10, 1, 20, 1, 5);
  for (Rounding r : {Rounding::kTflite, Rounding::kEdgeTpu}) {
    EXPECT_EQ(run2(add, {10, 20, 0, 255}, {20, 30, 0, 255}, r),
              (std::vector<uint8_t>{5, 25, 0, 255}));
  }
  // Output scale 2: (3 + 0) / 2 = 1.5 -> tflite 2, chip 2 (even); (5 + 0) / 2 = 2.5 -> 3 vs 2.
  const OneOpModel half = binary_model(BuiltinOp::kAdd, 1, 0, 1, 0, 2, 0);
  EXPECT_EQ(run2(half, {3, 5, 7, 1}, {0, 0, 0, 0}, Rounding::kTflite),
            (std::vector<uint8_t>{2, 3, 4, 1}));
  EXPECT_EQ(run2(half, {3, 5, 7, 1}, {0, 0, 0, 0}, Rounding::kEdgeTpu),
            (std::vector<uint8_t>{2, 2, 4, 0}));
  // SUB saturates at 0.
  const OneOpModel sub = binary_model(BuiltinOp::kSub, 1, 0, 1, 0, 1, 0);
  for (Rounding r : {Rounding::kTflite, Rounding::kEdgeTpu})
    EXPECT_EQ(run2(sub, {9, 5, 0, 255}, {4, 9, 0, 0}, r), (std::vector<uint8_t>{5, 0, 0, 255}));
  // MUL: (a - 1)(b - 2) * (0.5 * 0.5 / 1) with broadcasting of b = [1, 1].
  const OneOpModel mul = binary_model(BuiltinOp::kMul, 0.5f, 1, 0.5f, 2, 1.0f, 0, {1, 1});
  EXPECT_EQ(run2(mul, {3, 5, 7, 11}, {8}, Rounding::kTflite), (std::vector<uint8_t>{3, 6, 9, 15}));
  // (7-1)(4-2) = 12 * .25 = 3; (3-1)*1 = 2 * .25 = 0.5 -> tflite 1, chip 0.
  const OneOpModel mul2 = binary_model(BuiltinOp::kMul, 0.5f, 1, 0.5f, 2, 1.0f, 0, {1, 4});
  EXPECT_EQ(run2(mul2, {7, 3, 1, 1}, {4, 3, 2, 2}, Rounding::kTflite),
            (std::vector<uint8_t>{3, 1, 0, 0}));
  EXPECT_EQ(run2(mul2, {7, 3, 1, 1}, {4, 3, 2, 2}, Rounding::kEdgeTpu),
            (std::vector<uint8_t>{3, 0, 0, 0}));
}

// ---------------------------------------------------------------- data movement and the rest

TEST(HostOps, ConcatenationRescalesMismatchedInputs) {
  OneOpModel m(BuiltinOp::kConcatenation);
  const int a = m.tensor(U8, {1, 2}, 1.0f, 0);
  const int b = m.tensor(U8, {1, 1}, 0.5f, 10);
  const int o = m.tensor(U8, {1, 3}, 1.0f, 0);
  m.wire({a, b}, {o});
  container::ConcatenationOptions opt;
  opt.axis = 1;
  m.options(opt);
  Interpreter it = m.build();
  set_input(it, 0, std::vector<uint8_t>{7, 250});
  set_input(it, 1, std::vector<uint8_t>{15});  // (15 - 10) * 0.5 = 2.5 -> 3 (half away)
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), (std::vector<uint8_t>{7, 250, 3}));
}

TEST(HostOps, SplitReshapePad) {
  OneOpModel s(BuiltinOp::kSplit);
  const int axis = s.tensor(I32, {}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{1}));
  const int in = s.tensor(U8, {2, 4}, 1, 0);
  const int o1 = s.tensor(U8, {2, 2}, 1, 0), o2 = s.tensor(U8, {2, 2}, 1, 0);
  s.wire({axis, in}, {o1, o2});
  container::SplitOptions so;
  so.num_splits = 2;
  s.options(so);
  Interpreter it = s.build();
  set_input(it, 0, std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), (std::vector<uint8_t>{1, 2, 5, 6}));
  EXPECT_EQ(output_as<uint8_t>(it, 1), (std::vector<uint8_t>{3, 4, 7, 8}));

  OneOpModel p(BuiltinOp::kPad);
  const int pin = p.tensor(U8, {1, 2, 1, 1}, 0.1f, 42);
  const int pads =
      p.tensor(I32, {4, 2}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{0, 0, 1, 0, 0, 1, 0, 0}));
  const int pout = p.tensor(U8, {1, 3, 2, 1}, 0.1f, 42);
  p.wire({pin, pads}, {pout});
  Interpreter pi = p.build();
  set_input(pi, 0, std::vector<uint8_t>{7, 9});
  pi.invoke();
  EXPECT_EQ(output_as<uint8_t>(pi, 0), (std::vector<uint8_t>{42, 42, 7, 42, 9, 42}));

  OneOpModel r(BuiltinOp::kReshape);
  const int rin = r.tensor(I8, {2, 3}, 0.5f, -3);
  const int rout = r.tensor(I8, {3, 2}, 0.5f, -3);
  r.wire({rin}, {rout});
  Interpreter ri = r.build();
  set_input(ri, 0, std::vector<int8_t>{-128, 1, 2, 3, 4, 127});
  ri.invoke();
  EXPECT_EQ(output_as<int8_t>(ri, 0), (std::vector<int8_t>{-128, 1, 2, 3, 4, 127}));
}

TEST(HostOps, SoftmaxLogisticTanh) {
  OneOpModel s(BuiltinOp::kSoftmax);
  const int in = s.tensor(U8, {1, 4}, 0.1f, 0);
  const int out = s.tensor(U8, {1, 4}, 1.0f / 256, 0);
  s.wire({in}, {out});
  s.options(container::SoftmaxOptions{});
  Interpreter it = s.build();
  set_input(it, 0, std::vector<uint8_t>{9, 9, 9, 9});
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), (std::vector<uint8_t>{64, 64, 64, 64}));
  // One dominant class: exp(0) / (1 + 3 exp(-25.5)) * 256 -> 256 saturates to 255.
  set_input(it, 0, std::vector<uint8_t>{255, 0, 0, 0});
  it.invoke();
  EXPECT_EQ(output_as<uint8_t>(it, 0), (std::vector<uint8_t>{255, 0, 0, 0}));

  OneOpModel l(BuiltinOp::kLogistic);
  const int lin = l.tensor(U8, {4}, 0.1f, 128);
  const int lout = l.tensor(U8, {4}, 1.0f / 256, 0);
  l.wire({lin}, {lout});
  Interpreter li = l.build();
  set_input(li, 0, std::vector<uint8_t>{128, 255, 0, 138});
  li.invoke();
  // 0.5 -> 128; sigmoid(12.7) -> 256 -> 255; sigmoid(-12.8) -> 0; sigmoid(1) = .7311 -> 187.
  EXPECT_EQ(output_as<uint8_t>(li, 0), (std::vector<uint8_t>{128, 255, 0, 187}));

  OneOpModel t(BuiltinOp::kTanh);
  const int tin = t.tensor(I8, {3}, 0.05f, 0);
  const int tout = t.tensor(I8, {3}, 1.0f / 128, 0);
  t.wire({tin}, {tout});
  Interpreter ti = t.build();
  set_input(ti, 0, std::vector<int8_t>{0, 127, -20});
  ti.invoke();
  // tanh(0) = 0; tanh(6.35) -> 128 -> 127; tanh(-1) = -.7616 * 128 = -97.5 -> -97 (half away:
  // -97.48).
  EXPECT_EQ(output_as<int8_t>(ti, 0), (std::vector<int8_t>{0, 127, -97}));
}

TEST(HostOps, QuantizeAndDequantize) {
  OneOpModel q(BuiltinOp::kQuantize);
  const int fin = q.tensor(TensorType::kFloat32, {4});
  const int qout = q.tensor(U8, {4}, 0.5f, 10);
  q.wire({fin}, {qout});
  Interpreter qi = q.build();
  set_input(qi, 0, std::vector<float>{0.25f, -0.25f, 1000.0f, -1000.0f});  // 0.5 -> 1, -0.5 -> -1
  qi.invoke();
  EXPECT_EQ(output_as<uint8_t>(qi, 0), (std::vector<uint8_t>{11, 9, 255, 0}));

  // uint8 -> int8 requantization, scale ratio 0.5: (x - 0) * 0.5 + (-128).
  OneOpModel r(BuiltinOp::kQuantize);
  const int rin = r.tensor(U8, {3}, 0.5f, 0);
  const int rout = r.tensor(I8, {3}, 1.0f, -128);
  r.wire({rin}, {rout});
  Interpreter rt = r.build(Rounding::kTflite), re = r.build(Rounding::kEdgeTpu);
  for (Interpreter* it : {&rt, &re}) {
    set_input(*it, 0, std::vector<uint8_t>{5, 7, 255});
    it->invoke();
  }
  EXPECT_EQ(output_as<int8_t>(rt, 0),
            (std::vector<int8_t>{-125, -124, 0}));  // 2.5->3, 3.5->4, 127.5->128
  EXPECT_EQ(output_as<int8_t>(re, 0),
            (std::vector<int8_t>{-126, -124, 0}));  // 2.5->2, 3.5->4, 127.5->128

  OneOpModel d(BuiltinOp::kDequantize);
  const int din = d.tensor(I8, {2}, 0.25f, -1);
  const int dout = d.tensor(TensorType::kFloat32, {2});
  d.wire({din}, {dout});
  Interpreter di = d.build();
  set_input(di, 0, std::vector<int8_t>{-128, 127});
  di.invoke();
  EXPECT_EQ(output_as<float>(di, 0), (std::vector<float>{-31.75f, 32.0f}));
}

}  // namespace
}  // namespace tinycoral::host
