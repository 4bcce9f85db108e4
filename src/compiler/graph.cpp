// Builds the compiler's graph IR from a parsed TFLite model (graph.h).
#include "compiler/graph.h"

#include "common/error.h"
#include "compiler/graph_check.h"
#include "container/tflite_reader.h"

namespace tinycoral::compiler {

using container::TensorType;

bool GraphTensor::is_quantized_8bit() const {
  return (type == TensorType::kInt8 || type == TensorType::kUInt8) && !quant.empty();
}

int64_t GraphTensor::elements() const {
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  return n;
}

namespace {
constexpr int64_t kMaxElements = int64_t{1} << 32;
}  // namespace

Graph import_graph(const container::Model& model) {
  if (model.subgraphs.empty()) fail("the model has no subgraph");
  const container::Subgraph& sub = model.subgraphs[0];
  Graph graph;
  graph.tensors.reserve(sub.tensors.size());
  for (size_t i = 0; i < sub.tensors.size(); ++i) {
    const container::Tensor& t = sub.tensors[i];
    GraphTensor g;
    g.index = static_cast<int>(i);
    g.name = t.name;
    g.type = t.type;
    g.shape = t.shape;
    g.quant.scale = t.quantization.scale;
    g.quant.zero_point = t.quantization.zero_point;
    g.quant.axis = t.quantization.quantized_dimension;
    if (t.buffer != 0 && t.buffer < model.buffers.size()) g.data = model.buffers[t.buffer].data;
    int64_t elements = 1;  // bounded so that no element count overflows downstream
    for (int32_t d : g.shape) {
      if (d < 0) fail("tensor ", i, " (", t.name, ") has a dynamic dimension");
      elements *= d;
      if (elements > kMaxElements)
        fail("tensor ", i, " (", t.name, ") has more than 2^32 elements");
    }
    if (g.is_constant()) {
      const size_t want = static_cast<size_t>(g.elements()) * container::tensor_type_size(t.type);
      if (want != g.data.size()) {
        fail("tensor ", i, " (", t.name, ") has ", g.data.size(),
             " constant bytes, its shape needs ", want);
      }
    }
    graph.tensors.push_back(std::move(g));
  }
  for (size_t i = 0; i < sub.operators.size(); ++i) {
    const container::Operator& op = sub.operators[i];
    const container::OperatorCode& code = model.code_of(op);
    GraphOp g;
    g.index = static_cast<int>(i);
    g.builtin = code.builtin_code;
    g.custom_code = code.custom_code;
    g.name = code.builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom)
                 ? code.custom_code
                 : container::builtin_op_name(code.builtin_code);
    g.inputs.assign(op.inputs.begin(), op.inputs.end());
    g.outputs.assign(op.outputs.begin(), op.outputs.end());
    g.options = op.options;
    graph.ops.push_back(std::move(g));
  }
  graph.inputs.assign(sub.inputs.begin(), sub.inputs.end());
  graph.outputs.assign(sub.outputs.begin(), sub.outputs.end());
  check_operators(graph);
  return graph;
}

Graph import_graph_bytes(std::span<const uint8_t> bytes) {
  return import_graph(container::read_tflite(bytes));
}

}  // namespace tinycoral::compiler
