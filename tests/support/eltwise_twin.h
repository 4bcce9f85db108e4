// CPU twins of ADD and MUL for the compiler's tests and sweeps: uint8 a, b -> QUANTIZE -> int8 ->
// ADD|MUL -> int8 -> QUANTIZE -> uint8 (the converter's form), or the op alone on int8 tensors,
// with random scales and zero points whose output quantization spans most of the results.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler::testing {

using container::Activation;
using container::TensorType;

struct Case {
  bool mul = false;
  std::vector<int32_t> shape;
  Activation act = Activation::kNone;
  bool int8_io = false;  // no QUANTIZE: the op's int8 tensors are the model's boundary
  bool same = false;     // x op x
  bool relu = false;     // a standalone RELU (act kRelu) or RELU6 (act kRelu6) of a alone
};

// The CPU twin: uint8 a, b -> QUANTIZE -> int8 -> ADD|MUL -> int8 -> QUANTIZE -> uint8 (the
// converter's form for uint8 I/O), or the op alone on int8 tensors.
inline container::Model twin(const Case& c, std::mt19937& random) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const bool relu6 = c.act == Activation::kRelu6;
  const float sa = relu6 ? 0.04f + 0.03f * unit(random) : 0.005f + 0.05f * unit(random);
  const bool same = c.same || c.relu;
  const float sb = same ? sa : sa * ((relu6 ? 1.0f : 0.25f) + 2.0f * unit(random));
  const int za = static_cast<int>(random() % 160) + 48;
  const int zb = same ? za : static_cast<int>(random() % 160) + 48;
  // The output quantization spans most of the real results' range (their sum or product at the
  // corners of the inputs' ranges): few saturate, most distinct bytes occur.
  const float a0 = -za * sa, a1 = (255 - za) * sa, b0 = -zb * sb, b1 = (255 - zb) * sb;
  float lo = a0 + b0, hi = a1 + b1;
  if (c.mul) {
    lo = std::min({a0 * b0, a0 * b1, a1 * b0, a1 * b1});
    hi = std::max({a0 * b0, a0 * b1, a1 * b0, a1 * b1});
  }
  if (c.relu) lo = 0, hi = a1;  // RELU's results: [0, the input's top]
  float sy = (hi - lo) / 255 * (c.relu ? 1.0f + 0.3f * unit(random) : 0.7f + 0.3f * unit(random));
  int zy =
      std::clamp(static_cast<int>(std::lround(-lo / sy)) - 30 + static_cast<int>(random() % 61),
                 c.act == Activation::kNone ? 0 : 20, 235);
  if (relu6) {  // the upper bound 6 inside the range, and reached
    sy = 6.0f / (120 + static_cast<float>(random() % 40));
    zy = 20 + static_cast<int>(random() % 60);
  }
  const TensorType t8 = TensorType::kInt8;
  container::Model m;
  m.description = "eltwise twin";
  const int code = c.relu ? (c.act == Activation::kRelu6 ? 21 : 19) : c.mul ? 18 : 0;
  m.operator_codes = {{114, "", 1}, {code, "", 2}};
  m.buffers = {{}};
  container::Subgraph g;
  g.tensors = {twin_tensor("a", TensorType::kUInt8, c.shape, {sa}, {za}),
               twin_tensor("b", TensorType::kUInt8, c.shape, {sb}, {zb}),
               twin_tensor("aq", t8, c.shape, {sa}, {za - 128}),
               twin_tensor("bq", t8, c.shape, {sb}, {zb - 128}),
               twin_tensor("yq", t8, c.shape, {sy}, {zy - 128}),
               twin_tensor("y", TensorType::kUInt8, c.shape, {sy}, {zy})};
  container::Operator qa, qb, op, qy;
  qa.opcode_index = qb.opcode_index = qy.opcode_index = 0;
  qa.inputs = {0};
  qa.outputs = {2};
  qb.inputs = {1};
  qb.outputs = {3};
  op.opcode_index = 1;
  op.inputs = {2, c.same ? 2 : 3};
  op.outputs = {4};
  op.builtin_options_type = c.mul ? 21 : 11;
  op.options = container::ActivationOptions{c.act};
  if (c.relu) {  // no options
    op.inputs = {2};
    op.builtin_options_type = 0;
    op.options = {};
  }
  qy.inputs = {4};
  qy.outputs = {5};
  g.operators = same ? std::vector{qa, op, qy} : std::vector{qa, qb, op, qy};
  g.inputs = same ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1};
  g.outputs = {5};
  if (c.int8_io) {
    g.tensors[2].name = "a";
    g.tensors[3].name = "b";
    g.tensors[4].name = "y";
    g.operators = {op};
    g.inputs = same ? std::vector<int32_t>{2} : std::vector<int32_t>{2, 3};
    g.outputs = {4};
  }
  m.subgraphs.push_back(std::move(g));
  return m;
}

inline std::string describe(const Case& c) {
  std::string s = c.relu ? "RELU" : c.mul ? "MUL" : "ADD";
  for (int32_t d : c.shape) s += " " + std::to_string(d);
  return s + " act " + std::to_string(static_cast<int>(c.act)) + (c.int8_io ? " int8" : "") +
         (c.same ? " x op x" : "");
}

// A random [1, H, W, C] of 64 to max_elements elements, sides up to max_side, C up to 48.
inline std::vector<int32_t> random_shape(std::mt19937& random, int max_elements,
                                         int max_side = 40) {
  while (true) {
    const std::vector<int32_t> s = {1, 1 + static_cast<int32_t>(random() % max_side),
                                    1 + static_cast<int32_t>(random() % max_side),
                                    1 + static_cast<int32_t>(random() % 48)};
    if (s[1] * s[2] * s[3] <= max_elements && s[1] * s[2] * s[3] >= 64) return s;
  }
}

}  // namespace tinycoral::compiler::testing
