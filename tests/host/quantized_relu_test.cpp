// Quantized RELU and RELU6 (src/host/ops/quantized_relu.cpp) in both roundings, against values
// computed here from their definitions: tflite = TFLite's QuantizedReluX (x - z_in rescaled by
// s_in / s_out, + z_out, clamped to the activation's quantized bounds); edgetpu = the chip's
// requantize op (float32 scale and clamps, ties to even).
#include <gtest/gtest.h>

#include <cmath>

#include "container/tflite_model.h"
#include "host/interpreter.h"

namespace tinycoral::host {
namespace {

using container::TensorType;

container::Model relu_model(container::BuiltinOp op, TensorType type, float si, int zi, float so,
                            int zo) {
  container::Model m;
  m.operator_codes = {{static_cast<int32_t>(op), "", 1}};
  m.buffers = {{}};
  container::Subgraph g;
  auto tensor = [&](const char* name, float s, int z) {
    container::Tensor t;
    t.name = name;
    t.type = type;
    t.shape = {1, 256};
    t.quantization.scale = {s};
    t.quantization.zero_point = {z};
    return t;
  };
  g.tensors = {tensor("x", si, zi), tensor("y", so, zo)};
  container::Operator o;
  o.inputs = {0};
  o.outputs = {1};
  g.operators = {o};
  g.inputs = {0};
  g.outputs = {1};
  m.subgraphs.push_back(std::move(g));
  return m;
}

void expect_relu(container::BuiltinOp op, TensorType type, Rounding rounding) {
  const bool relu6 = op == container::BuiltinOp::kRelu6;
  const int shift = type == TensorType::kInt8 ? -128 : 0;
  // s_in / s_out = 5/3: (x - z_in) 5/3 never lies halfway between integers, so the roundings only
  // differ in how they clamp.
  const float si = 0.05f, so = 0.03f;
  const int zi = 100 + shift, zo = 10 + shift;
  InterpreterOptions options;
  options.rounding = rounding;
  Interpreter interpreter(relu_model(op, type, si, zi, so, zo), options);
  std::vector<uint8_t> x(256);
  for (int v = 0; v < 256; ++v) x[static_cast<size_t>(v)] = static_cast<uint8_t>(v);
  interpreter.set_input(0, x);
  interpreter.invoke();
  const auto y = interpreter.output_bytes(0);
  const int lo = type == TensorType::kInt8 ? -128 : 0, hi = lo + 255;
  const int top = relu6 ? std::min(hi, zo + static_cast<int>(std::lround(6.0 / so))) : hi;
  for (int v = 0; v < 256; ++v) {
    const int q = type == TensorType::kInt8 ? static_cast<int8_t>(v) : v;
    const double real = (q - zi) * 5.0 / 3.0;
    const int want = std::clamp(zo + static_cast<int>(std::lround(real)), std::max(lo, zo), top);
    const int got = type == TensorType::kInt8 ? static_cast<int8_t>(y[static_cast<size_t>(v)])
                                              : y[static_cast<size_t>(v)];
    EXPECT_EQ(got, want) << "input " << q;
  }
}

TEST(QuantizedRelu, BothRoundingsFollowTheDefinition) {
  for (auto op : {container::BuiltinOp::kRelu, container::BuiltinOp::kRelu6})
    for (auto type : {TensorType::kUInt8, TensorType::kInt8})
      for (auto rounding : {Rounding::kTflite, Rounding::kEdgeTpu}) {
        SCOPED_TRACE(std::to_string(static_cast<int>(op)) + " " +
                     std::to_string(static_cast<int>(type)) + " " +
                     std::to_string(static_cast<int>(rounding)));
        expect_relu(op, type, rounding);
      }
}

}  // namespace
}  // namespace tinycoral::host
