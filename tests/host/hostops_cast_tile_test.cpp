// CAST and TILE on one-operator models with hand-derived results: CAST's C++ conversions
// (truncation, wrap-around, bool), its saturation where TFLite is undefined, and TILE's repetition
// per dimension for several element types, with the errors for malformed operators.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::BuiltinOp;
using container::TensorType;
using testing::OneOpModel;

template <typename To, typename From>
std::vector<To> cast(TensorType from, TensorType to, const std::vector<From>& values) {
  OneOpModel m(BuiltinOp::kCast);
  const int32_t n = static_cast<int32_t>(values.size());
  const int in = m.tensor(from, {n});
  const int out = m.tensor(to, {n});
  m.wire({in}, {out});
  Interpreter it = m.build();
  if constexpr (std::is_same_v<From, bool>) {
    std::vector<uint8_t> bytes(values.begin(), values.end());
    it.set_input(0, bytes);
  } else {
    testing::set_input(it, 0, values);
  }
  it.invoke();
  if constexpr (std::is_same_v<To, bool>) {
    std::vector<To> out_values;
    for (uint8_t b : it.output_bytes(0)) out_values.push_back(b != 0);
    return out_values;
  } else {
    return testing::output_as<To>(it, 0);
  }
}

TEST(HostOpsCast, FloatToIntegerTruncatesTowardZero) {
  EXPECT_EQ((cast<int32_t>(TensorType::kFloat32, TensorType::kInt32,
                           std::vector<float>{2.9f, -2.9f, 0.5f, -0.5f, 1e6f})),
            (std::vector<int32_t>{2, -2, 0, 0, 1000000}));
  EXPECT_EQ((cast<uint8_t>(TensorType::kFloat32, TensorType::kUInt8,
                           std::vector<float>{0.0f, 254.99f, 17.5f})),
            (std::vector<uint8_t>{0, 254, 17}));
}

TEST(HostOpsCast, OutOfRangeFloatsSaturateAndNanIsZero) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ((cast<int8_t>(TensorType::kFloat32, TensorType::kInt8,
                          std::vector<float>{300.0f, -300.0f, nan, -128.0f})),
            (std::vector<int8_t>{127, -128, 0, -128}));
  EXPECT_EQ(
      (cast<int32_t>(TensorType::kFloat32, TensorType::kInt32, std::vector<float>{3e9f, -3e9f})),
      (std::vector<int32_t>{std::numeric_limits<int32_t>::max(),
                            std::numeric_limits<int32_t>::min()}));
}

TEST(HostOpsCast, IntegersWrapAndWidenExactly) {
  EXPECT_EQ(
      (cast<int8_t>(TensorType::kUInt8, TensorType::kInt8, std::vector<uint8_t>{0, 127, 128, 255})),
      (std::vector<int8_t>{0, 127, -128, -1}));
  EXPECT_EQ(
      (cast<uint8_t>(TensorType::kInt32, TensorType::kUInt8, std::vector<int32_t>{256, 257, -1})),
      (std::vector<uint8_t>{0, 1, 255}));
  EXPECT_EQ((cast<int64_t>(TensorType::kInt8, TensorType::kInt64, std::vector<int8_t>{-128, 5})),
            (std::vector<int64_t>{-128, 5}));
  EXPECT_EQ(
      (cast<float>(TensorType::kInt32, TensorType::kFloat32, std::vector<int32_t>{16777217, -3})),
      (std::vector<float>{16777216.0f, -3.0f}));  // rounds to the nearest float
}

TEST(HostOpsCast, BoolIsNonZeroAndZeroOrOne) {
  EXPECT_EQ((cast<bool>(TensorType::kFloat32, TensorType::kBool,
                        std::vector<float>{0.0f, -0.0f, 0.25f, -3.0f})),
            (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ((cast<float>(TensorType::kBool, TensorType::kFloat32, std::vector<bool>{true, false})),
            (std::vector<float>{1.0f, 0.0f}));
}

TEST(HostOpsCast, RefusesUnsupportedTypesAndSizes) {
  OneOpModel strings(BuiltinOp::kCast);
  strings.wire({strings.tensor(TensorType::kString, {2})},
               {strings.tensor(TensorType::kInt32, {2})});
  EXPECT_THROW(strings.build(), Error);
  OneOpModel sizes(BuiltinOp::kCast);
  sizes.wire({sizes.tensor(TensorType::kInt32, {2})}, {sizes.tensor(TensorType::kInt32, {3})});
  EXPECT_THROW(sizes.build(), Error);
}

template <typename T>
std::vector<T> tile(TensorType type, std::vector<int32_t> shape, const std::vector<T>& values,
                    const std::vector<int32_t>& multiples) {
  OneOpModel m(BuiltinOp::kTile);
  std::vector<int32_t> out_shape = shape;
  for (size_t d = 0; d < shape.size(); ++d) out_shape[d] *= multiples[d];
  const int in = m.tensor(type, shape);
  const int mult = m.tensor(TensorType::kInt32, {static_cast<int32_t>(multiples.size())}, 0, 0,
                            OneOpModel::bytes(multiples));
  const int out = m.tensor(type, out_shape);
  m.wire({in, mult}, {out});
  Interpreter it = m.build();
  testing::set_input(it, 0, values);
  it.invoke();
  return testing::output_as<T>(it, 0);
}

TEST(HostOpsTile, RepeatsEachDimension) {
  // [[1, 2], [3, 4]] tiled (2, 3): rows repeat twice, columns three times.
  EXPECT_EQ(tile<int8_t>(TensorType::kInt8, {2, 2}, {1, 2, 3, 4}, {2, 3}),
            (std::vector<int8_t>{1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4,  //
                                 1, 2, 1, 2, 1, 2, 3, 4, 3, 4, 3, 4}));
  EXPECT_EQ(tile<float>(TensorType::kFloat32, {3}, {0.5f, 1.5f, 2.5f}, {2}),
            (std::vector<float>{0.5f, 1.5f, 2.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(tile<int64_t>(TensorType::kInt64, {1, 2, 1}, {7, 8}, {2, 1, 2}),
            (std::vector<int64_t>{7, 7, 8, 8, 7, 7, 8, 8}));
}

TEST(HostOpsTile, AMultipleOfZeroGivesAnEmptyOutput) {
  EXPECT_TRUE(tile<int32_t>(TensorType::kInt32, {2}, {1, 2}, {0}).empty());
}

TEST(HostOpsTile, RefusesShapesThatDisagreeAndGraphInputMultiples) {
  OneOpModel wrong(BuiltinOp::kTile);
  const int in = wrong.tensor(TensorType::kUInt8, {2});
  const int mult = wrong.tensor(TensorType::kInt32, {1}, 0, 0, OneOpModel::bytes<int32_t>({2}));
  wrong.wire({in, mult}, {wrong.tensor(TensorType::kUInt8, {5})});
  EXPECT_THROW(wrong.build(), Error);
  OneOpModel dynamic(BuiltinOp::kTile);
  const int din = dynamic.tensor(TensorType::kUInt8, {2});
  const int dmult = dynamic.tensor(TensorType::kInt32, {1});
  dynamic.wire({din, dmult}, {dynamic.tensor(TensorType::kUInt8, {4})});
  EXPECT_THROW(dynamic.build(), Error);
}

}  // namespace
}  // namespace tinycoral::host
