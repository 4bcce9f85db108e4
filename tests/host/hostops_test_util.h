// Builds one-operator TFLite models in memory for the host operator tests, so each operator runs
// through the registry and the interpreter exactly as in a real model.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "host/interpreter.h"

namespace tinycoral::host::testing {

class OneOpModel {
 public:
  explicit OneOpModel(container::BuiltinOp op) {
    model_.operator_codes.push_back({static_cast<int32_t>(op), "", 1});
    init();
  }
  explicit OneOpModel(const std::string& custom) {
    model_.operator_codes.push_back(
        {static_cast<int32_t>(container::BuiltinOp::kCustom), custom, 1});
    init();
  }

  // Adds a tensor; `data` non-empty makes it a constant.
  int tensor(container::TensorType type, std::vector<int32_t> shape, float scale = 0.0f,
             int64_t zero_point = 0, std::vector<uint8_t> data = {}) {
    container::Tensor t;
    t.name = "t" + std::to_string(graph().tensors.size());
    t.type = type;
    t.shape = std::move(shape);
    if (scale != 0.0f) {
      t.quantization.scale = {scale};
      t.quantization.zero_point = {zero_point};
    }
    if (!data.empty()) {
      t.buffer = static_cast<uint32_t>(model_.buffers.size());
      model_.buffers.push_back({std::move(data)});
    }
    graph().tensors.push_back(std::move(t));
    return static_cast<int>(graph().tensors.size() - 1);
  }
  template <typename T>
  static std::vector<uint8_t> bytes(const std::vector<T>& values) {
    std::vector<uint8_t> out(values.size() * sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
  }

  // Op inputs (-1 = absent optional input) and outputs; graph inputs are the non-constant inputs.
  void wire(std::vector<int32_t> inputs, std::vector<int32_t> outputs) {
    op().inputs = inputs;
    op().outputs = outputs;
    for (int32_t i : inputs)
      if (i >= 0 && graph().tensors[static_cast<size_t>(i)].buffer == 0 &&
          !graph().tensors[static_cast<size_t>(i)].is_variable)
        graph().inputs.push_back(i);
    graph().outputs = outputs;
  }
  void options(container::BuiltinOptions o) { op().options = std::move(o); }
  void custom_options(std::vector<uint8_t> o) { op().custom_options = std::move(o); }
  container::Model& model() { return model_; }

  Interpreter build(Rounding rounding = Rounding::kTflite) const {
    InterpreterOptions o;
    o.rounding = rounding;
    return Interpreter(model_, o);
  }

 private:
  void init() {
    model_.buffers.push_back({});  // buffer 0: the empty sentinel
    model_.subgraphs.emplace_back();
    graph().operators.emplace_back();
  }
  container::Subgraph& graph() { return model_.subgraphs[0]; }
  container::Operator& op() { return graph().operators[0]; }
  container::Model model_;
};

template <typename T>
std::vector<T> output_as(const Interpreter& it, size_t i) {
  const auto b = it.output_bytes(i);
  std::vector<T> out(b.size() / sizeof(T));
  if (!out.empty())
    std::memcpy(out.data(), b.data(), out.size() * sizeof(T));  // empty: data() may be null
  return out;
}

template <typename T>
void set_input(Interpreter& it, size_t i, const std::vector<T>& values) {
  it.set_input(i, OneOpModel::bytes(values));
}

}  // namespace tinycoral::host::testing
