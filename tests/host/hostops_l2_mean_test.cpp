// L2_NORMALIZATION and MEAN against hand-computed cases: the fixed-point inverse square root, the
// 1/128 output scale, rounding ties of the requantization, the zero-point bias of quantized MEAN.
#include <gtest/gtest.h>

#include <cmath>

#include "host/ops/l2_normalization.h"
#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::BuiltinOp;
using container::TensorType;
using testing::OneOpModel;

TEST(HostOpsL2Normalization, InverseSquareRootMultiplier) {
  for (int32_t v : {2, 4, 100, 12345, 1 << 20, (1 << 30) + 7, INT32_MAX}) {
    const QuantizedMultiplier m = inv_sqrt_multiplier(v);
    EXPECT_LE(m.shift, 0);
    const double got = std::ldexp(static_cast<double>(m.multiplier), m.shift - 31);
    EXPECT_NEAR(got * std::sqrt(static_cast<double>(v)), 1.0, 5e-6) << v;  // 5 Newton steps
  }
  EXPECT_EQ(inv_sqrt_multiplier(0).multiplier, INT32_MAX);
  EXPECT_EQ(inv_sqrt_multiplier(1).shift, 0);
}

template <typename T>
std::vector<T> l2(TensorType type, int32_t in_zp, int32_t out_zp, std::vector<T> values) {
  OneOpModel m(BuiltinOp::kL2Normalization);
  const int n = static_cast<int>(values.size());
  const float s = type == TensorType::kFloat32 ? 0.0f : 0.05f;
  const float os = type == TensorType::kFloat32 ? 0.0f : 1.0f / 128.0f;
  const int x = m.tensor(type, {1, n}, s, in_zp);
  const int y = m.tensor(type, {1, n}, os, out_zp);
  m.wire({x}, {y});
  Interpreter it = m.build();
  testing::set_input(it, 0, values);
  it.invoke();
  return testing::output_as<T>(it, 0);
}

TEST(HostOpsL2Normalization, ThreeFourFive) {
  // (3, 4) / 5 = (0.6, 0.8): uint8 128 + 76.8 -> 205, 128 + 102.4 -> 230.
  EXPECT_EQ(l2<uint8_t>(TensorType::kUInt8, 128, 128, {131, 132}),
            (std::vector<uint8_t>{205, 230}));
  EXPECT_EQ(l2<int8_t>(TensorType::kInt8, 0, 0, {3, 4}), (std::vector<int8_t>{77, 102}));
  EXPECT_EQ(l2<int8_t>(TensorType::kInt8, 0, 0, {-3, -4}), (std::vector<int8_t>{-77, -102}));
  // A zero vector stays at the zero point (TFLite treats the zero norm as 1).
  EXPECT_EQ(l2<uint8_t>(TensorType::kUInt8, 128, 128, {128, 128}),
            (std::vector<uint8_t>{128, 128}));
  const auto f = l2<float>(TensorType::kFloat32, 0, 0, {3.0f, 4.0f});
  EXPECT_FLOAT_EQ(f[0], 0.6f);
  EXPECT_FLOAT_EQ(f[1], 0.8f);
}

TEST(HostOpsL2Normalization, RefusesAnotherOutputScale) {
  OneOpModel m(BuiltinOp::kL2Normalization);
  const int x = m.tensor(TensorType::kUInt8, {1, 2}, 0.05f, 128);
  const int y = m.tensor(TensorType::kUInt8, {1, 2}, 0.01f, 128);
  m.wire({x}, {y});
  EXPECT_THROW(m.build(), Error);
}

std::vector<uint8_t> mean_u8(std::vector<uint8_t> values, int32_t in_zp, int32_t out_zp,
                             std::vector<int32_t> axes = {1, 2}) {
  OneOpModel m(BuiltinOp::kMean);
  const int x = m.tensor(TensorType::kUInt8, {1, 2, 2, 1}, 0.5f, in_zp);
  const int a = m.tensor(TensorType::kInt32, {static_cast<int32_t>(axes.size())}, 0, 0,
                         OneOpModel::bytes(axes));
  const int y = m.tensor(TensorType::kUInt8, {1, 1, 1, 1}, 0.5f, out_zp);
  m.wire({x, a}, {y});
  m.options(container::ReducerOptions{true});
  Interpreter it = m.build();
  it.set_input(0, values);
  it.invoke();
  return testing::output_as<uint8_t>(it, 0);
}

TEST(HostOpsMean, QuantizedSpatialMean) {
  EXPECT_EQ(mean_u8({10, 20, 30, 40}, 0, 0), (std::vector<uint8_t>{25}));
  // 101 / 4 = 25.25 gives 26: TFLite's requantization rounds twice (101 * 0.5 = 50.5 -> 51 in the
  // doubling high multiply, then 51 / 2 = 25.5 -> 26 in the shift), and so do we.
  EXPECT_EQ(mean_u8({10, 20, 30, 41}, 0, 0), (std::vector<uint8_t>{26}));
  EXPECT_EQ(mean_u8({10, 20, 30, 39}, 0, 0), (std::vector<uint8_t>{25}));  // 24.75
  // Zero points: bias = 10 - round_half_away(2 * 0.5 / 0.5) = 8; 25 + 8.
  EXPECT_EQ(mean_u8({10, 20, 30, 40}, 2, 10), (std::vector<uint8_t>{33}));
  EXPECT_EQ(mean_u8({255, 255, 255, 255}, 0, 100), (std::vector<uint8_t>{255}));  // saturates
  EXPECT_THROW(mean_u8({1, 2, 3, 4}, 0, 0, {3}), Error);
}

TEST(HostOpsMean, FloatOverAnyAxes) {
  OneOpModel m(BuiltinOp::kMean);
  const int x = m.tensor(TensorType::kFloat32, {2, 2});
  const int a =
      m.tensor(TensorType::kInt32, {1}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{-1}));
  const int y = m.tensor(TensorType::kFloat32, {2});
  m.wire({x, a}, {y});
  Interpreter it = m.build();
  testing::set_input(it, 0, std::vector<float>{1, 2, 3, 5});
  it.invoke();
  EXPECT_EQ(testing::output_as<float>(it, 0), (std::vector<float>{1.5f, 4.0f}));
}

}  // namespace
}  // namespace tinycoral::host
