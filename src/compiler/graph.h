// The compiler's graph IR: the main subgraph of a TFLite model reduced to what code generation
// needs. Tensors carry their element type, shape, quantization (per tensor or per channel along one
// dimension) and, for constants, their data; operators carry their builtin code and options. The
// IR is built from src/container's TFLite reader and keeps the indices of the file, so a
// partition can be written back into the same TFLite graph.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::compiler {

struct QuantParams {
  std::vector<float> scale;  // 1 entry (per tensor) or one per channel
  std::vector<int64_t> zero_point;
  int32_t axis = 0;  // the channel dimension when per_channel()
  bool empty() const { return scale.empty(); }
  bool per_channel() const { return scale.size() > 1; }
};

struct GraphTensor {
  int index = 0;  // tensor index in the TFLite subgraph
  std::string name;
  container::TensorType type = container::TensorType::kFloat32;
  std::vector<int32_t> shape;
  QuantParams quant;
  std::vector<uint8_t> data;  // constant bytes (weights, bias); empty for activations
  bool is_constant() const { return !data.empty(); }
  bool is_quantized_8bit() const;  // int8/uint8 with quantization
  int64_t elements() const;
};

struct GraphOp {
  int index = 0;            // operator index in the TFLite subgraph
  int32_t builtin = 0;      // container::BuiltinOp value (kCustom for custom ops)
  std::string custom_code;  // for custom ops
  std::string name;         // "FULLY_CONNECTED", or the custom code
  std::vector<int> inputs;  // tensor indices, -1 = absent optional input
  std::vector<int> outputs;
  container::BuiltinOptions options;
};

inline bool is_builtin(const GraphOp& op, container::BuiltinOp code) {
  return op.builtin == static_cast<int32_t>(code);
}

// uint8 zero point of a tensor: int8 tensors cross the boundary shifted by 128.
inline int32_t uint8_zero_point(const GraphTensor& t) {
  const int32_t zp = static_cast<int32_t>(t.quant.zero_point.at(0));
  return t.type == container::TensorType::kInt8 ? zp + 128 : zp;
}

struct Graph {
  std::vector<GraphTensor> tensors;  // indexed by TFLite tensor index
  std::vector<GraphOp> ops;          // in execution order
  std::vector<int> inputs, outputs;  // graph input/output tensors

  const GraphTensor& tensor(int index) const { return tensors.at(static_cast<size_t>(index)); }
};

// Builds the IR of subgraph 0. Throws Error if the model has no subgraph, a tensor's constant
// data disagrees with its shape and type, or an operator contradicts itself (graph_check.h).
Graph import_graph(const container::Model& model);

// Reads a TFLite file (a CPU model) and imports it; errors name the file.
Graph import_graph_bytes(std::span<const uint8_t> bytes);

}  // namespace tinycoral::compiler
