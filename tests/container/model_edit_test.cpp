// Model editing on hand-made models: the classifier head's tensors, operators and quantization
// (Google's learn-utils rules, worked out by hand below) and the recurrent-link surgery, each
// surviving a write and read back; and the errors for models or arguments they cannot take.
#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "container/classifier_head.h"
#include "container/recurrent_links.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"

namespace tinycoral::container {
namespace {

Tensor u8(const std::string& name, std::vector<int32_t> shape, float scale = 0.25f) {
  Tensor t;
  t.name = name;
  t.shape = std::move(shape);
  t.type = TensorType::kUInt8;
  t.quantization.scale = {scale};
  t.quantization.zero_point = {0};
  return t;
}

// A graph whose output is its input (as Google's own test graphs start): 4 features.
Model features_model(std::vector<int32_t> shape) {
  Model m;
  m.buffers.resize(1);
  Subgraph g;
  g.tensors = {u8("features", std::move(shape))};
  g.inputs = {0};
  g.outputs = {0};
  m.subgraphs = {g};
  return m;
}

// Logits 1/3, 2/3, 1 for features summing to 4: weights (c + 1) / 12, as Google's G010 check.
ClassifierHead thirds_head() {
  ClassifierHead h;
  for (int c = 0; c < 3; ++c) h.weights.insert(h.weights.end(), 4, (c + 1) / 12.0f);
  h.biases = {0, 0, 0};
  h.logits_min = 1.0f / 3;
  h.logits_max = 1;
  return h;
}

TEST(Uint8ParamsForRange, NudgesTheZeroPoint) {
  const auto a = uint8_params_for_range(0, 1);
  EXPECT_FLOAT_EQ(a.scale, 1.0f / 255);
  EXPECT_EQ(a.zero_point, 0);
  // 1 / (2/255) is 127.5 exactly but 127.49999 in float, as Google computes it: 127.
  const auto b = uint8_params_for_range(-1, 1);
  EXPECT_FLOAT_EQ(b.scale, 2.0f / 255);
  EXPECT_EQ(b.zero_point, 127);
  const auto c = uint8_params_for_range(-3, 0);
  EXPECT_EQ(c.zero_point, 255);
  EXPECT_THROW(uint8_params_for_range(0, 0), Error);
  EXPECT_THROW(uint8_params_for_range(0.5f, 1), Error);
}

TEST(ClassifierHead, AppendsFullyConnectedReshapeSoftmaxQuantizedAsGoogle) {
  const Model m = append_classifier_head(features_model({1, 1, 1, 4}), thirds_head());
  const Subgraph& g = m.subgraphs[0];
  ASSERT_EQ(g.operators.size(), 3u);
  EXPECT_EQ(m.code_of(g.operators[0]).builtin_code,
            static_cast<int32_t>(BuiltinOp::kFullyConnected));
  EXPECT_EQ(m.code_of(g.operators[1]).builtin_code, static_cast<int32_t>(BuiltinOp::kReshape));
  EXPECT_EQ(m.code_of(g.operators[2]).builtin_code, static_cast<int32_t>(BuiltinOp::kSoftmax));
  EXPECT_EQ(g.operators[0].inputs[0], 0);  // the FC reads the old output
  // Weights over [0, 1/4]: scale 1/1020, zero point 0, values 85, 170, 255.
  const Tensor& w = g.tensors[static_cast<size_t>(g.operators[0].inputs[1])];
  EXPECT_EQ(w.shape, (std::vector<int32_t>{3, 4}));
  EXPECT_FLOAT_EQ(w.quantization.scale[0], 0.25f / 255);
  EXPECT_EQ(w.quantization.zero_point[0], 0);
  std::vector<uint8_t> want_w;
  for (uint8_t q : {85, 170, 255}) want_w.insert(want_w.end(), 4, q);
  EXPECT_EQ(m.buffers[w.buffer].data, want_w);
  // Bias: int32, scale input x weights, zero point 0, values 0.
  const Tensor& b = g.tensors[static_cast<size_t>(g.operators[0].inputs[2])];
  EXPECT_EQ(b.type, TensorType::kInt32);
  EXPECT_FLOAT_EQ(b.quantization.scale[0], 0.25f * (0.25f / 255));
  EXPECT_EQ(m.buffers[b.buffer].data, std::vector<uint8_t>(12, 0));
  // Logits [1, 1, 1, 3] over [0, 1]; reshaped to [1, 3]; softmax 1/256, zero point 0.
  const Tensor& logits = g.tensors[static_cast<size_t>(g.operators[0].outputs[0])];
  EXPECT_EQ(logits.shape, (std::vector<int32_t>{1, 1, 1, 3}));
  EXPECT_FLOAT_EQ(logits.quantization.scale[0], 1.0f / 255);
  const Tensor& out = g.tensors[static_cast<size_t>(g.outputs[0])];
  EXPECT_EQ(g.outputs[0], g.operators[2].outputs[0]);
  EXPECT_EQ(out.shape, (std::vector<int32_t>{1, 3}));
  EXPECT_FLOAT_EQ(out.quantization.scale[0], 1.0f / 256);
  EXPECT_EQ(out.quantization.zero_point[0], 0);
  EXPECT_TRUE(read_tflite(write_tflite(m)) == m);
}

TEST(ClassifierHead, TwoDimensionalFeaturesNeedNoReshape) {
  const Model m = append_classifier_head(features_model({1, 4}), thirds_head());
  ASSERT_EQ(m.subgraphs[0].operators.size(), 2u);
  EXPECT_EQ(m.code_of(m.subgraphs[0].operators[1]).builtin_code,
            static_cast<int32_t>(BuiltinOp::kSoftmax));
}

TEST(ClassifierHead, RefusesWhatItCannotAppendTo) {
  ClassifierHead wrong = thirds_head();
  wrong.weights.pop_back();
  EXPECT_THROW(append_classifier_head(features_model({1, 4}), wrong), Error);
  ClassifierHead zero = thirds_head();
  std::fill(zero.weights.begin(), zero.weights.end(), 0.0f);
  EXPECT_THROW(append_classifier_head(features_model({1, 4}), zero), Error);
  ClassifierHead nan = thirds_head();
  nan.biases[1] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(append_classifier_head(features_model({1, 4}), nan), Error);
  ClassifierHead inf = thirds_head();
  inf.logits_max = std::numeric_limits<float>::infinity();
  EXPECT_THROW(append_classifier_head(features_model({1, 4}), inf), Error);
  Model two = features_model({1, 4});
  two.subgraphs[0].outputs.push_back(0);
  EXPECT_THROW(append_classifier_head(two, thirds_head()), Error);
  Model f32 = features_model({1, 4});
  f32.subgraphs[0].tensors[0].type = TensorType::kFloat32;
  EXPECT_THROW(append_classifier_head(f32, thirds_head()), Error);
}

// x, state_in -> op 0 -> state_out -> op 1 (with x) -> y; inputs x, state_in; outputs y, state_out.
Model cell_model() {
  Model m;
  m.buffers.resize(1);
  m.operator_codes = {OperatorCode{static_cast<int32_t>(BuiltinOp::kAdd), "", 1}};
  Subgraph g;
  g.tensors = {u8("x", {1, 4}), u8("state_in", {1, 4}), u8("y", {1, 4}), u8("state_out", {1, 4})};
  Operator cell, head;
  cell.inputs = {0, 1};
  cell.outputs = {3};
  head.inputs = {3, 0};
  head.outputs = {2};
  g.operators = {cell, head};
  g.inputs = {0, 1};
  g.outputs = {2, 3};
  m.subgraphs = {g};
  return m;
}

TEST(RecurrentLinks, TheStateInputBecomesAVariableWrittenByTheCell) {
  const Model m = append_recurrent_links(cell_model(), {{"state_in", "state_out"}});
  const Subgraph& g = m.subgraphs[0];
  EXPECT_EQ(g.inputs, (std::vector<int32_t>{0}));
  EXPECT_EQ(g.outputs, (std::vector<int32_t>{2}));
  EXPECT_EQ(g.operators[0].outputs, (std::vector<int32_t>{1}));
  EXPECT_EQ(g.operators[1].inputs, (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(g.tensors[1].is_variable);
  EXPECT_FALSE(g.tensors[0].is_variable);
  EXPECT_TRUE(read_tflite(write_tflite(m)) == m);
  // No links: the model as it was.
  EXPECT_TRUE(append_recurrent_links(cell_model(), {}) == cell_model());
}

TEST(RecurrentLinks, RefusesLinksThatDoNotFit) {
  EXPECT_THROW(append_recurrent_links(cell_model(), {{"nope", "state_out"}}), Error);
  EXPECT_THROW(append_recurrent_links(cell_model(), {{"state_in", "nope"}}), Error);
  EXPECT_THROW(append_recurrent_links(cell_model(), {{"state_in", "state_out"}, {"state_in", "y"}}),
               Error);
  Model shape = cell_model();
  shape.subgraphs[0].tensors[3].shape = {1, 2};
  EXPECT_THROW(append_recurrent_links(shape, {{"state_in", "state_out"}}), Error);
  Model type = cell_model();
  type.subgraphs[0].tensors[3].type = TensorType::kInt8;
  EXPECT_THROW(append_recurrent_links(type, {{"state_in", "state_out"}}), Error);
  Model unwritten = cell_model();
  unwritten.subgraphs[0].outputs = {2, 0};  // an output no operator writes (the input x)
  unwritten.subgraphs[0].tensors[0].name = "x";
  EXPECT_THROW(append_recurrent_links(unwritten, {{"state_in", "x"}}), Error);
}

}  // namespace
}  // namespace tinycoral::container
