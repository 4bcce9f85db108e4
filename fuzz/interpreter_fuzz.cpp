// libFuzzer target: the CPU interpreter on random graphs. The input is read as choices: tensors of
// random types and shapes (constants filled from the input), operators of every builtin kind with
// random options wired to random tensors (or, half of the time, a chain of operators whose tensors
// agree, so that most of them run), then the graph goes through our writer and reader and is
// prepared and run. Every graph must run or be refused with an Error (within the memory limits),
// never crash, overflow or read out of bounds. With the first byte odd, the rest is taken as a
// TFLite file as it is.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "fuzz_input.h"
#include "host/interpreter.h"

namespace {

using namespace tinycoral;
using namespace tinycoral::container;
using tinycoral::fuzz::FuzzInput;

struct OpKind {
  BuiltinOp op;
  uint8_t tag;  // the schema's BuiltinOptions tag
  int inputs;
};

constexpr OpKind kOps[] = {
    {BuiltinOp::kAdd, 11, 2},
    {BuiltinOp::kSub, 28, 2},
    {BuiltinOp::kMul, 21, 2},
    {BuiltinOp::kAveragePool2D, 5, 1},
    {BuiltinOp::kMaxPool2D, 5, 1},
    {BuiltinOp::kConcatenation, 10, 2},
    {BuiltinOp::kConv2D, 1, 3},
    {BuiltinOp::kDepthwiseConv2D, 2, 3},
    {BuiltinOp::kFullyConnected, 8, 3},
    {BuiltinOp::kDequantize, 0, 1},
    {BuiltinOp::kQuantize, 0, 1},
    {BuiltinOp::kL2Normalization, 0, 1},
    {BuiltinOp::kLogistic, 0, 1},
    {BuiltinOp::kRelu, 0, 1},
    {BuiltinOp::kRelu6, 0, 1},
    {BuiltinOp::kTanh, 0, 1},
    {BuiltinOp::kReshape, 17, 1},
    {BuiltinOp::kResizeBilinear, 15, 2},
    {BuiltinOp::kResizeNearestNeighbor, 74, 2},
    {BuiltinOp::kSoftmax, 9, 1},
    {BuiltinOp::kPad, 22, 2},
    {BuiltinOp::kMean, 27, 2},
    {BuiltinOp::kSqueeze, 30, 1},
    {BuiltinOp::kStridedSlice, 32, 4},
    {BuiltinOp::kSplit, 35, 2},
    {BuiltinOp::kArgMax, 40, 2},
    {BuiltinOp::kUnidirectionalSequenceLstm, 71, 5},
};

constexpr TensorType kTypes[] = {TensorType::kUInt8,   TensorType::kInt8,  TensorType::kInt32,
                                 TensorType::kFloat32, TensorType::kInt16, TensorType::kInt64,
                                 TensorType::kBool};

Padding padding(FuzzInput& in) { return in.byte() & 1 ? Padding::kValid : Padding::kSame; }
Activation activation(FuzzInput& in) { return static_cast<Activation>(in.byte() % 5); }

BuiltinOptions options_for(BuiltinOp op, FuzzInput& in) {
  switch (op) {
    case BuiltinOp::kConv2D:
      return Conv2DOptions{padding(in),   in.wild(1, 3), in.wild(1, 3),
                           in.wild(1, 3), in.wild(1, 3), activation(in)};
    case BuiltinOp::kDepthwiseConv2D:
      return DepthwiseConv2DOptions{padding(in),   in.wild(1, 3), in.wild(1, 3), in.wild(1, 3),
                                    in.wild(1, 3), in.wild(1, 3), activation(in)};
    case BuiltinOp::kFullyConnected:
      return FullyConnectedOptions{activation(in), 0, (in.byte() & 1) != 0, false};
    case BuiltinOp::kAveragePool2D:
    case BuiltinOp::kMaxPool2D:
      return Pool2DOptions{padding(in),   in.wild(1, 3), in.wild(1, 3),
                           in.wild(1, 4), in.wild(1, 4), activation(in)};
    case BuiltinOp::kAdd:
    case BuiltinOp::kSub:
    case BuiltinOp::kMul:
      return ActivationOptions{activation(in)};
    case BuiltinOp::kConcatenation:
      return ConcatenationOptions{in.wild(-4, 4), activation(in)};
    case BuiltinOp::kSplit:
      return SplitOptions{in.wild(0, 3)};
    case BuiltinOp::kReshape: {
      std::vector<int32_t> shape(in.byte() % 5);
      for (auto& d : shape) d = in.wild(-1, 8);
      return ReshapeOptions{shape};
    }
    case BuiltinOp::kSoftmax:
      return SoftmaxOptions{static_cast<float>(in.range(0, 40)) / 8.0f};
    case BuiltinOp::kResizeBilinear:
    case BuiltinOp::kResizeNearestNeighbor:
      return ResizeOptions{(in.byte() & 1) != 0, (in.byte() & 1) != 0};
    case BuiltinOp::kArgMax:
      return ArgMaxOptions{in.byte() & 1 ? TensorType::kInt32 : TensorType::kInt64};
    case BuiltinOp::kMean:
      return ReducerOptions{(in.byte() & 1) != 0};
    case BuiltinOp::kSqueeze: {
      std::vector<int32_t> dims(in.byte() % 3);
      for (auto& d : dims) d = in.wild(-4, 4);
      return SqueezeOptions{dims};
    }
    case BuiltinOp::kStridedSlice:
      return StridedSliceOptions{in.range(0, 15), in.range(0, 15), 0, 0, in.range(0, 15)};
    case BuiltinOp::kUnidirectionalSequenceLstm:
      return SequenceLstmOptions{Activation::kTanh, 0.0f, 0.0f, (in.byte() & 1) != 0, false};
    default:
      return std::monostate{};
  }
}

Tensor random_tensor(FuzzInput& in, Model& m, int index) {
  Tensor t;
  t.name = "t" + std::to_string(index);
  t.type = kTypes[in.byte() % std::size(kTypes)];
  const int rank = in.byte() % 5;
  for (int d = 0; d < rank; ++d) t.shape.push_back(in.wild(1, 6));
  if (in.byte() & 1) {
    t.quantization.scale = {static_cast<float>(in.range(1, 64)) / 64.0f};
    t.quantization.zero_point = {in.range(-128, 255)};
  }
  if (in.byte() < 96) {  // a constant, filled from the input when its size is sane
    int64_t bytes = static_cast<int64_t>(tensor_type_size(t.type));
    for (int32_t d : t.shape) bytes = bytes > 4096 || d < 0 || d > 4096 ? -1 : bytes * d;
    if (bytes >= 0 && bytes <= 4096) {
      Buffer b;
      b.data.resize(static_cast<size_t>(bytes));
      for (auto& v : b.data) v = in.byte();
      t.buffer = static_cast<uint32_t>(m.buffers.size());
      m.buffers.push_back(std::move(b));
    }
  }
  return t;
}

// A chain where every operator's output has its input's type, shape and quantization and binary
// operators take the same tensor twice: most elementwise, pooling and shape operators accept it, so
// these graphs get past preparation and run.
Model coherent_model(FuzzInput& in) {
  Model m;
  m.buffers = {Buffer{}};
  Subgraph g;
  Tensor first;
  first.name = "t0";
  first.type = in.byte() & 1 ? TensorType::kInt8 : TensorType::kUInt8;
  first.shape = {1, in.range(1, 6), in.range(1, 6), in.range(1, 4)};
  first.quantization.scale = {static_cast<float>(in.range(1, 64)) / 64.0f};
  first.quantization.zero_point = {first.type == TensorType::kInt8 ? in.range(-128, 127)
                                                                   : in.range(0, 255)};
  g.tensors = {first};
  g.inputs = {0};
  const int num_ops = 1 + in.byte() % 6;
  for (int k = 0; k < num_ops; ++k) {
    const OpKind& kind = kOps[in.byte() % std::size(kOps)];
    Operator op;
    op.opcode_index = static_cast<uint32_t>(m.operator_codes.size());
    m.operator_codes.push_back({static_cast<int32_t>(kind.op), "", 1});
    const int32_t last = static_cast<int32_t>(g.tensors.size()) - 1;
    op.inputs.assign(static_cast<size_t>(kind.inputs), last);
    Tensor out = g.tensors.back();
    out.name = "t" + std::to_string(g.tensors.size());
    if (in.byte() & 1) out.quantization.scale = {static_cast<float>(in.range(1, 64)) / 64.0f};
    g.tensors.push_back(out);
    op.outputs = {last + 1};
    op.builtin_options_type = kind.tag;
    op.options = options_for(kind.op, in);
    g.operators.push_back(std::move(op));
  }
  g.outputs = {static_cast<int32_t>(g.tensors.size()) - 1};
  m.subgraphs = {std::move(g)};
  return m;
}

Model random_model(FuzzInput& in) {
  if (in.byte() & 1) return coherent_model(in);
  Model m;
  m.buffers = {Buffer{}};
  Subgraph g;
  const int num_tensors = 1 + in.byte() % 10;
  for (int i = 0; i < num_tensors; ++i) g.tensors.push_back(random_tensor(in, m, i));
  g.inputs = {0};
  const int num_ops = 1 + in.byte() % 6;
  for (int k = 0; k < num_ops; ++k) {
    const OpKind& kind = kOps[in.byte() % std::size(kOps)];
    Operator op;
    op.opcode_index = static_cast<uint32_t>(m.operator_codes.size());
    m.operator_codes.push_back({static_cast<int32_t>(kind.op), "", 1});
    const int inputs = kind.inputs + (in.byte() % 4 == 0 ? 1 : 0);
    for (int i = 0; i < inputs; ++i)
      op.inputs.push_back(in.byte() % 8 == 0 ? -1 : in.range(0, int32_t(g.tensors.size()) - 1));
    const int outputs = 1 + (in.byte() % 5 == 0 ? 1 : 0);
    for (int o = 0; o < outputs; ++o) {
      const int index = static_cast<int>(g.tensors.size());
      Tensor t = random_tensor(in, m, index);
      t.buffer = 0;
      g.tensors.push_back(t);
      op.outputs.push_back(index);
    }
    op.builtin_options_type = kind.tag;
    op.options = options_for(kind.op, in);
    g.operators.push_back(std::move(op));
  }
  g.outputs = {static_cast<int32_t>(g.tensors.size()) - 1};
  m.subgraphs = {std::move(g)};
  return m;
}

void run(Model model, FuzzInput& in) {
  host::Interpreter interp(std::move(model));
  // Within the limits, a graph may still be big enough to compute for seconds: not this target's
  // subject (the limits are), and a libFuzzer timeout would be reported as a bug.
  if (interp.arena_bytes() > (64u << 20)) return;
  for (size_t i = 0; i < interp.num_inputs(); ++i) {
    std::vector<uint8_t> bytes(interp.input(i).bytes);
    for (auto& b : bytes) b = in.byte();
    interp.set_input(i, bytes);
  }
  interp.invoke();
  for (size_t i = 0; i < interp.num_outputs(); ++i) (void)interp.output_bytes(i);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  FuzzInput in(std::span(data + 1, size - 1));
  try {
    if (data[0] & 1) {
      run(read_tflite(std::span(data + 1, size - 1)), in);
    } else {
      run(read_tflite(write_tflite(random_model(in))), in);
    }
  } catch (const Error&) {
  }
  return 0;
}
