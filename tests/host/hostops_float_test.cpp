// float32 kernels (float_*.cpp) on hand-computed cases: convolution with SAME/VALID padding and
// strides, depthwise with a depth multiplier, fully connected with bias, pools whose average
// excludes padding, broadcasting ADD/SUB/MUL with fused activations, softmax/logistic/tanh.
#include <gtest/gtest.h>

#include <cmath>

#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::Activation;
using container::BuiltinOp;
using container::Padding;
using container::TensorType;
using testing::OneOpModel;

const TensorType F = TensorType::kFloat32;

std::vector<float> run(OneOpModel& m, const std::vector<std::vector<float>>& inputs) {
  Interpreter it = m.build();
  for (size_t i = 0; i < inputs.size(); ++i) testing::set_input(it, i, inputs[i]);
  it.invoke();
  return testing::output_as<float>(it, 0);
}

std::vector<float> conv(std::vector<int32_t> in_shape, std::vector<float> in,
                        std::vector<int32_t> w_shape, std::vector<float> w, float bias,
                        std::vector<int32_t> out_shape, container::Conv2DOptions o) {
  OneOpModel m(BuiltinOp::kConv2D);
  const int x = m.tensor(F, in_shape);
  const int k = m.tensor(F, w_shape, 0, 0, OneOpModel::bytes(w));
  const int b =
      m.tensor(F, {w_shape[0]}, 0, 0,
               OneOpModel::bytes(std::vector<float>(static_cast<size_t>(w_shape[0]), bias)));
  const int y = m.tensor(F, out_shape);
  m.wire({x, k, b}, {y});
  m.options(o);
  return run(m, {in});
}

TEST(HostOpsFloat, Conv2DPaddingStridesAndActivation) {
  const std::vector<float> img = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 3x3
  container::Conv2DOptions valid{Padding::kValid, 1, 1, 1, 1, Activation::kNone};
  EXPECT_EQ(conv({1, 3, 3, 1}, img, {1, 2, 2, 1}, {1, 0, 0, -1}, 0.5f, {1, 2, 2, 1}, valid),
            (std::vector<float>{-3.5f, -3.5f, -3.5f, -3.5f}));
  valid.activation = Activation::kRelu6;
  EXPECT_EQ(conv({1, 3, 3, 1}, img, {1, 2, 2, 1}, {1, 1, 1, 1}, 0.5f, {1, 2, 2, 1}, valid),
            (std::vector<float>{6, 6, 6, 6}));
  // SAME, stride 2: padding (2-1)*2 + 2 - 3 = 1 goes after; windows at 0 and 2.
  container::Conv2DOptions same{Padding::kSame, 2, 2, 1, 1, Activation::kNone};
  EXPECT_EQ(conv({1, 3, 3, 1}, img, {1, 2, 2, 1}, {1, 1, 1, 1}, 0.0f, {1, 2, 2, 1}, same),
            (std::vector<float>{12, 9, 15, 9}));
  // Dilation 2 on VALID: the 2x2 filter samples the four corners: 1 + 3 + 7 + 9.
  container::Conv2DOptions dil{Padding::kValid, 1, 1, 2, 2, Activation::kNone};
  EXPECT_EQ(conv({1, 3, 3, 1}, img, {1, 2, 2, 1}, {1, 1, 1, 1}, 0.0f, {1, 1, 1, 1}, dil),
            (std::vector<float>{20}));
}

TEST(HostOpsFloat, DepthwiseWithMultiplier) {
  OneOpModel m(BuiltinOp::kDepthwiseConv2D);
  const int x = m.tensor(F, {1, 1, 2, 2});
  const int k = m.tensor(F, {1, 1, 1, 4}, 0, 0, OneOpModel::bytes(std::vector<float>{1, 2, 3, 4}));
  const int y = m.tensor(F, {1, 1, 2, 4});
  m.wire({x, k, -1}, {y});
  m.options(container::DepthwiseConv2DOptions{Padding::kValid, 1, 1, 2, 1, 1, Activation::kNone});
  // Pixel (a, b): outputs a*1, a*2, b*3, b*4.
  EXPECT_EQ(run(m, {{1, 10, 2, 20}}), (std::vector<float>{1, 2, 30, 40, 2, 4, 60, 80}));
}

TEST(HostOpsFloat, FullyConnectedWithBias) {
  OneOpModel m(BuiltinOp::kFullyConnected);
  const int x = m.tensor(F, {1, 3});
  const int w = m.tensor(F, {2, 3}, 0, 0, OneOpModel::bytes(std::vector<float>{1, 1, 1, 0, -1, 2}));
  const int b = m.tensor(F, {2}, 0, 0, OneOpModel::bytes(std::vector<float>{0.5f, -1}));
  const int y = m.tensor(F, {1, 2});
  m.wire({x, w, b}, {y});
  m.options(container::FullyConnectedOptions{});
  EXPECT_EQ(run(m, {{1, 2, 3}}), (std::vector<float>{6.5f, 3}));
}

std::vector<float> pool(BuiltinOp op, Padding p, std::vector<int32_t> out_shape) {
  OneOpModel m(op);
  const int x = m.tensor(F, {1, 3, 3, 1});
  const int y = m.tensor(F, out_shape);
  m.wire({x}, {y});
  m.options(container::Pool2DOptions{p, 2, 2, 2, 2, Activation::kNone});
  return run(m, {{1, 2, 3, 4, 5, 6, 7, 8, 9}});
}

TEST(HostOpsFloat, PoolsClipTheWindow) {
  EXPECT_EQ(pool(BuiltinOp::kAveragePool2D, Padding::kValid, {1, 1, 1, 1}),
            (std::vector<float>{3}));  // (1+2+4+5)/4
  // SAME: the edge windows hold 2 and 1 values, and the average divides by those counts.
  EXPECT_EQ(pool(BuiltinOp::kAveragePool2D, Padding::kSame, {1, 2, 2, 1}),
            (std::vector<float>{3, 4.5f, 7.5f, 9}));
  EXPECT_EQ(pool(BuiltinOp::kMaxPool2D, Padding::kSame, {1, 2, 2, 1}),
            (std::vector<float>{5, 6, 8, 9}));
}

std::vector<float> binary(BuiltinOp op, std::vector<int32_t> sa, std::vector<float> a,
                          std::vector<int32_t> sb, std::vector<float> b, std::vector<int32_t> so,
                          Activation act = Activation::kNone) {
  OneOpModel m(op);
  const int x = m.tensor(F, sa);
  const int y = m.tensor(F, sb);
  const int z = m.tensor(F, so);
  m.wire({x, y}, {z});
  m.options(container::ActivationOptions{act});
  return run(m, {a, b});
}

TEST(HostOpsFloat, BroadcastingArithmetic) {
  EXPECT_EQ(binary(BuiltinOp::kAdd, {1, 3}, {1, 2, 3}, {1}, {10}, {1, 3}),
            (std::vector<float>{11, 12, 13}));
  EXPECT_EQ(binary(BuiltinOp::kSub, {2, 1}, {10, 20}, {1, 3}, {1, 2, 3}, {2, 3}),
            (std::vector<float>{9, 8, 7, 19, 18, 17}));
  EXPECT_EQ(binary(BuiltinOp::kMul, {2, 2}, {1, -2, 3, -4}, {2}, {2, 3}, {2, 2}, Activation::kRelu),
            (std::vector<float>{2, 0, 6, 0}));
}

TEST(HostOpsFloat, SoftmaxLogisticTanh) {
  OneOpModel m(BuiltinOp::kSoftmax);
  const int x = m.tensor(F, {1, 3});
  const int y = m.tensor(F, {1, 3});
  m.wire({x}, {y});
  m.options(container::SoftmaxOptions{1.0f});
  const auto s = run(m, {{1, 2, 3}});
  const double z = std::exp(-2.0) + std::exp(-1.0) + 1.0;
  EXPECT_NEAR(s[0], std::exp(-2.0) / z, 1e-6);
  EXPECT_NEAR(s[2], 1.0 / z, 1e-6);

  OneOpModel l(BuiltinOp::kLogistic);
  const int lx = l.tensor(F, {3});
  const int ly = l.tensor(F, {3});
  l.wire({lx}, {ly});
  const auto ls = run(l, {{0, 100, -100}});
  EXPECT_EQ(ls[0], 0.5f);
  EXPECT_EQ(ls[1], 1.0f);
  EXPECT_NEAR(ls[2], 0.0f, 1e-30);

  OneOpModel t(BuiltinOp::kTanh);
  const int tx = t.tensor(F, {2});
  const int ty = t.tensor(F, {2});
  t.wire({tx}, {ty});
  const auto ts = run(t, {{0, 1}});
  EXPECT_EQ(ts[0], 0.0f);
  EXPECT_FLOAT_EQ(ts[1], std::tanh(1.0f));
}

TEST(HostOpsFloat, MixedFloatAndQuantizedIsRefused) {
  OneOpModel m(BuiltinOp::kFullyConnected);
  const int x = m.tensor(F, {1, 2});
  const int w = m.tensor(TensorType::kInt8, {1, 2}, 0.5f, 0, std::vector<uint8_t>{1, 2});
  const int y = m.tensor(F, {1, 1});
  m.wire({x, w, -1}, {y});
  m.options(container::FullyConnectedOptions{});
  EXPECT_THROW(m.build(), Error);
}

}  // namespace
}  // namespace tinycoral::host
