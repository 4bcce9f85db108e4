// RESIZE_BILINEAR, RESIZE_NEAREST_NEIGHBOR and ARG_MAX against hand-computed cases: TFLite's float
// formula with truncation (uint8), its 1/1024 fixed point with round-half-away (int8), half-pixel
// centres with the negative weight at the top edge, align_corners, first index on ties.
#include <gtest/gtest.h>

#include "host/ops/resize_bilinear.h"
#include "hostops_test_util.h"

namespace tinycoral::host {
namespace {

using container::BuiltinOp;
using container::TensorType;
using testing::OneOpModel;

template <typename T>
std::vector<T> resize_row(BuiltinOp op, TensorType type, std::vector<T> row, int out_w,
                          container::ResizeOptions opts) {
  OneOpModel m(op);
  const int w = static_cast<int>(row.size());
  const int in = m.tensor(type, {1, 1, w, 1}, type == TensorType::kFloat32 ? 0.0f : 0.5f, 0);
  const int size =
      m.tensor(TensorType::kInt32, {2}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{1, out_w}));
  const int out = m.tensor(type, {1, 1, out_w, 1}, type == TensorType::kFloat32 ? 0.0f : 0.5f, 0);
  m.wire({in, size}, {out});
  m.options(opts);
  Interpreter it = m.build();
  testing::set_input(it, 0, row);
  it.invoke();
  return testing::output_as<T>(it, 0);
}

TEST(HostOpsResizeBilinear, Uint8TruncatesTheFloatResult) {
  // Legacy corners: x = 0, 0.5, 1, 1.5 -> 10, 15.5 (truncated to 15), 21, 21 (clamped neighbour).
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeBilinear, TensorType::kUInt8, {10, 21}, 4, {}),
            (std::vector<uint8_t>{10, 15, 21, 21}));
  // Half-pixel centres: x = -0.25 (weights 1.25 and -0.25 on the same pixel), 0.25, 0.75, 1.25.
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeBilinear, TensorType::kUInt8, {10, 21}, 4,
                                {false, true}),
            (std::vector<uint8_t>{10, 12, 18, 21}));
  // align_corners: scale (2-1)/(3-1) = 0.5.
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeBilinear, TensorType::kUInt8, {10, 21}, 3,
                                {true, false}),
            (std::vector<uint8_t>{10, 15, 21}));
  // Saturation end: 255 stays 255, 0 stays 0.
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeBilinear, TensorType::kUInt8, {255, 0}, 4, {}),
            (std::vector<uint8_t>{255, 127, 0, 0}));
}

TEST(HostOpsResizeBilinear, Int8RoundsHalfAwayFromZeroInFixedPoint) {
  // Same geometry as above: 15.5 rounds to 16 here (not truncated), -15.5 to -16.
  EXPECT_EQ(resize_row<int8_t>(BuiltinOp::kResizeBilinear, TensorType::kInt8, {10, 21}, 4, {}),
            (std::vector<int8_t>{10, 16, 21, 21}));
  EXPECT_EQ(resize_row<int8_t>(BuiltinOp::kResizeBilinear, TensorType::kInt8, {-10, -21}, 4, {}),
            (std::vector<int8_t>{-10, -16, -21, -21}));
  EXPECT_EQ(resize_row<int8_t>(BuiltinOp::kResizeBilinear, TensorType::kInt8, {-128, 127}, 4, {}),
            (std::vector<int8_t>{-128, -1, 127, 127}));  // -0.5 -> -1 (away from zero)
}

TEST(HostOpsResizeBilinear, FloatKeepsFractions) {
  EXPECT_EQ(
      resize_row<float>(BuiltinOp::kResizeBilinear, TensorType::kFloat32, {10.0f, 21.0f}, 4, {}),
      (std::vector<float>{10.0f, 15.5f, 21.0f, 21.0f}));
}

TEST(HostOpsResizeBilinear, TwoDimensionsWeighRowsAndColumns) {
  // 2x2 -> 4x4 legacy, pixel (1,1) sits at (0.5, 0.5): mean of the four = (0+100+200+40)/4 = 85.
  ops::ResizeGeometry g;
  g.in_h = g.in_w = 2;
  g.out_h = g.out_w = 4;
  const uint8_t in[4] = {0, 100, 200, 40};
  uint8_t out[16];
  ops::resize_bilinear(g, in, out);
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1 * 4 + 1], 85);
  EXPECT_EQ(out[2 * 4 + 0], 200);
  EXPECT_EQ(out[3 * 4 + 3], 40);
}

TEST(HostOpsResizeBilinear, RefusesInconsistentSizeTensor) {
  OneOpModel m(BuiltinOp::kResizeBilinear);
  const int in = m.tensor(TensorType::kUInt8, {1, 2, 2, 1}, 0.5f, 0);
  const int size =
      m.tensor(TensorType::kInt32, {2}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{3, 3}));
  const int out = m.tensor(TensorType::kUInt8, {1, 4, 4, 1}, 0.5f, 0);
  m.wire({in, size}, {out});
  EXPECT_THROW(m.build(), Error);
}

TEST(HostOpsResizeNearest, FloorRoundAndHalfPixel) {
  EXPECT_EQ(
      resize_row<uint8_t>(BuiltinOp::kResizeNearestNeighbor, TensorType::kUInt8, {10, 21}, 4, {}),
      (std::vector<uint8_t>{10, 10, 21, 21}));
  // align_corners rounds x * 1/3: 0, 0.33, 0.67, 1 -> 0, 0, 1, 1.
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeNearestNeighbor, TensorType::kUInt8, {10, 21, 32},
                                4, {true, false}),
            (std::vector<uint8_t>{10, 21, 21, 32}));
  // Half-pixel, 3 -> 2: floor((x + 0.5) * 1.5) = 0, 2.
  EXPECT_EQ(resize_row<uint8_t>(BuiltinOp::kResizeNearestNeighbor, TensorType::kUInt8, {10, 21, 32},
                                2, {false, true}),
            (std::vector<uint8_t>{10, 32}));
}

template <typename In, typename Out>
std::vector<Out> arg_max(TensorType in_type, std::vector<int32_t> shape, std::vector<In> values,
                         int32_t axis, TensorType out_type, std::vector<int32_t> out_shape) {
  OneOpModel m(BuiltinOp::kArgMax);
  const int in = m.tensor(in_type, shape, in_type == TensorType::kFloat32 ? 0.0f : 0.1f,
                          in_type == TensorType::kUInt8 ? 128 : 0);
  const int ax =
      m.tensor(TensorType::kInt32, {1}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{axis}));
  const int out = m.tensor(out_type, out_shape);
  m.wire({in, ax}, {out});
  m.options(container::ArgMaxOptions{out_type});
  Interpreter it = m.build();
  testing::set_input(it, 0, values);
  it.invoke();
  return testing::output_as<Out>(it, 0);
}

TEST(HostOpsArgMax, FirstIndexOfTheMaximumAlongTheAxis) {
  EXPECT_EQ((arg_max<uint8_t, int64_t>(TensorType::kUInt8, {1, 4}, {3, 7, 7, 1}, -1,
                                       TensorType::kInt64, {1})),
            (std::vector<int64_t>{1}));
  EXPECT_EQ((arg_max<int8_t, int32_t>(TensorType::kInt8, {1, 3}, {-5, -128, -2}, 1,
                                      TensorType::kInt32, {1})),
            (std::vector<int32_t>{2}));
  // Axis 1 of [1, 2, 3]: per column the larger of two rows.
  EXPECT_EQ((arg_max<float, int32_t>(TensorType::kFloat32, {1, 2, 3}, {1, 5, -1, 2, 5, -3}, 1,
                                     TensorType::kInt32, {1, 3})),
            (std::vector<int32_t>{1, 0, 0}));
}

TEST(HostOpsArgMax, RefusesAxisOutOfRange) {
  OneOpModel m(BuiltinOp::kArgMax);
  const int in = m.tensor(TensorType::kUInt8, {1, 4}, 0.1f, 0);
  const int ax =
      m.tensor(TensorType::kInt32, {1}, 0, 0, OneOpModel::bytes(std::vector<int32_t>{2}));
  const int out = m.tensor(TensorType::kInt64, {1});
  m.wire({in, ax}, {out});
  EXPECT_THROW(m.build(), Error);
}

}  // namespace
}  // namespace tinycoral::host
