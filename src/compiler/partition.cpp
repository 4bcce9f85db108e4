// edgetpu_compiler's mapping rules (partition.h). Facts: Coral's "TensorFlow models on the Edge
// TPU" page (supported operations, the quantization and rank requirements) and the operation logs
// edgetpu_compiler 16.0 writes.
#include "compiler/partition.h"

#include <algorithm>
#include <set>

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

namespace {

// Builtin operator codes the Edge TPU supports (edgetpu_compiler 16.0).
bool supported_type(int32_t code) {
  static const std::set<int32_t> kSupported = {
      0,    // ADD
      1,    // AVERAGE_POOL_2D
      2,    // CONCATENATION
      3,    // CONV_2D
      4,    // DEPTHWISE_CONV_2D
      9,    // FULLY_CONNECTED
      11,   // L2_NORMALIZATION
      14,   // LOGISTIC
      16,   // LSTM
      17,   // MAX_POOL_2D
      18,   // MUL
      19,   // RELU
      20,   // RELU_N1_TO_1
      21,   // RELU6
      22,   // RESHAPE
      23,   // RESIZE_BILINEAR
      25,   // SOFTMAX
      26,   // SPACE_TO_DEPTH
      28,   // TANH
      34,   // PAD
      39,   // TRANSPOSE
      40,   // MEAN
      41,   // SUB
      43,   // SQUEEZE
      44,   // UNIDIRECTIONAL_SEQUENCE_LSTM
      45,   // STRIDED_SLICE
      47,   // EXP
      49,   // SPLIT
      54,   // PRELU
      55,   // MAXIMUM
      57,   // MINIMUM
      65,   // SLICE
      67,   // TRANSPOSE_CONV
      74,   // SUM
      76,   // RSQRT
      82,   // REDUCE_MAX
      83,   // PACK
      97,   // RESIZE_NEAREST_NEIGHBOR
      99,   // SQUARED_DIFFERENCE
      114,  // QUANTIZE
      117,  // HARD_SWISH
  };
  return kSupported.contains(code);
}

bool is_8bit(TensorType t) { return t == TensorType::kInt8 || t == TensorType::kUInt8; }

// At most 3 dimensions larger than 1, all of them among the 3 innermost.
bool rank_ok(const std::vector<int32_t>& shape) {
  const size_t n = shape.size();
  for (size_t i = 0; i + 3 < n; ++i) {
    if (shape[i] > 1) return false;
  }
  return true;
}

void set_boundary(const Graph& graph, Partition& p) {
  // Boundary tensors: read by the mapped part but not written by it (constants aside), and
  // written by it but read by the CPU part or a graph output.
  std::set<int> written, read_outside;
  for (int i : p.mapped_ops) {
    for (int t : graph.ops[static_cast<size_t>(i)].outputs) written.insert(t);
  }
  for (const OpDecision& d : p.decisions) {
    if (d.mapped) continue;
    for (int t : graph.ops[static_cast<size_t>(d.op)].inputs) read_outside.insert(t);
  }
  for (int t : graph.outputs) read_outside.insert(t);
  for (int i : p.mapped_ops) {
    for (int t : graph.ops[static_cast<size_t>(i)].inputs) {
      if (t < 0 || graph.tensor(t).is_constant() || written.contains(t)) continue;
      if (std::find(p.inputs.begin(), p.inputs.end(), t) == p.inputs.end()) p.inputs.push_back(t);
    }
    for (int t : graph.ops[static_cast<size_t>(i)].outputs) {
      if (read_outside.contains(t)) p.outputs.push_back(t);
    }
  }
}

}  // namespace

std::string unsupported_reason(const Graph& graph, const GraphOp& op) {
  if (op.builtin == static_cast<int32_t>(BuiltinOp::kCustom) || !supported_type(op.builtin)) {
    return kNotSupported;
  }
  // LSTMs keep their cell state in int16 and gate sums in int32 (keras_lstm maps whole).
  const bool lstm = op.builtin == 16 || op.builtin == 44;
  for (int t : op.inputs) {
    if (t < 0) continue;
    const GraphTensor& tensor = graph.tensor(t);
    const bool bias = tensor.is_constant() && tensor.type == TensorType::kInt32;
    const bool wide =
        lstm && (tensor.type == TensorType::kInt16 || tensor.type == TensorType::kInt32);
    if (!bias && !wide && !(is_8bit(tensor.type) && !tensor.quant.empty())) return kBadType;
    // The rank limit is on activations; constant weights (a conv's [Cout, kh, kw, Cin]) are
    // parameters laid out by the compiler.
    if (!tensor.is_constant() && !rank_ok(tensor.shape)) return kBadRank;
  }
  for (int t : op.outputs) {
    const GraphTensor& tensor = graph.tensor(t);
    if (!is_8bit(tensor.type) || tensor.quant.empty()) return kBadType;
    if (!rank_ok(tensor.shape)) return kBadRank;
  }
  if (op.builtin == static_cast<int32_t>(BuiltinOp::kResizeBilinear)) {
    // Google's page: "depending on input/output size, this operation may not be mapped to avoid
    // loss in precision". Fitted on DeepLab's image-pooling branch (1x1 -> 33x33 stays on the
    // CPU in both compilers' outputs): a 1x1 source is not mapped.
    const GraphTensor& in = graph.tensor(op.inputs.at(0));
    if (in.shape.size() == 4 && in.shape[1] == 1 && in.shape[2] == 1) return kUnspecified;
  }
  if (op.builtin == static_cast<int32_t>(BuiltinOp::kFullyConnected)) {
    // The weights are the parameters cached on chip: they must be constants.
    if (op.inputs.size() < 2 || op.inputs[1] < 0 || !graph.tensor(op.inputs[1]).is_constant()) {
      return kUnspecified;
    }
  }
  return "";
}

Partition partition(const Graph& graph) {
  Partition p;
  // An operator maps when it is supported and none of its activations comes from a CPU operator:
  // everything downstream of the first unsupported operator stays on the CPU (one Edge TPU
  // subgraph), while independent branches after it in execution order still map.
  std::set<int> cpu_written;
  for (size_t i = 0; i < graph.ops.size(); ++i) {
    const GraphOp& op = graph.ops[i];
    OpDecision d;
    d.op = static_cast<int>(i);
    const std::string why = unsupported_reason(graph, op);
    bool downstream = false;
    for (int t : op.inputs) downstream = downstream || (t >= 0 && cpu_written.contains(t));
    if (!why.empty()) {
      d.reason = why;
    } else if (downstream) {
      d.reason = kLaterSubgraph;
    } else {
      d.mapped = true;
      d.reason = kMapped;
      p.mapped_ops.push_back(d.op);
    }
    if (!d.mapped) cpu_written.insert(op.outputs.begin(), op.outputs.end());
    p.decisions.push_back(d);
  }
  set_boundary(graph, p);
  return p;
}

void unmap_tail(const Graph& graph, Partition& partition, size_t first, const std::string& reason) {
  for (size_t i = first; i < partition.mapped_ops.size(); ++i) {
    OpDecision& d = partition.decisions.at(static_cast<size_t>(partition.mapped_ops[i]));
    d.mapped = false;
    d.reason = reason;
  }
  partition.mapped_ops.resize(std::min(first, partition.mapped_ops.size()));
  partition.inputs.clear();
  partition.outputs.clear();
  set_boundary(graph, partition);
}

void unmap_all(Partition& partition, const std::string& reason) {
  for (OpDecision& d : partition.decisions) {
    if (d.mapped) {
      d.mapped = false;
      d.reason = reason;
    }
  }
  partition.mapped_ops.clear();
  partition.inputs.clear();
  partition.outputs.clear();
}

}  // namespace tinycoral::compiler
