// Small models built with the project's writers, for the hostile-input probes (hostile_input_test)
// and as the starting points of the fuzzers: a CPU model of one operator, and an Edge TPU model
// whose one package runs a given bitstream on the virtual Edge TPU.
#pragma once

#include <cstdint>
#include <vector>

#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/package.h"
#include "container/tflite_model.h"
#include "container/tflite_writer.h"

namespace tinycoral::testing {

inline container::Tensor u8_tensor(std::string name, std::vector<int32_t> shape,
                                   uint32_t buffer = 0) {
  container::Tensor t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.type = container::TensorType::kUInt8;
  t.buffer = buffer;
  t.quantization.scale = {0.5f};
  t.quantization.zero_point = {0};
  return t;
}

// A graph of one builtin operator: `tensors` (graph inputs first), inputs/outputs by index.
inline container::Model one_op_model(container::BuiltinOp op, uint8_t options_tag,
                                     container::BuiltinOptions options,
                                     std::vector<container::Tensor> tensors,
                                     std::vector<int32_t> op_inputs,
                                     std::vector<int32_t> op_outputs,
                                     std::vector<int32_t> graph_inputs,
                                     std::vector<container::Buffer> buffers = {}) {
  container::Model m;
  m.description = "tinycoral hostile-input probe";
  m.buffers = {container::Buffer{}};
  for (auto& b : buffers) m.buffers.push_back(std::move(b));
  m.operator_codes = {{static_cast<int32_t>(op), "", 1}};
  container::Subgraph g;
  g.name = "main";
  g.tensors = std::move(tensors);
  g.inputs = std::move(graph_inputs);
  g.outputs = op_outputs;
  container::Operator o;
  o.inputs = std::move(op_inputs);
  o.outputs = std::move(op_outputs);
  o.builtin_options_type = options_tag;
  o.options = std::move(options);
  g.operators = {std::move(o)};
  m.subgraphs = {std::move(g)};
  return m;
}

// RESHAPE of a uint8 [1, h, w, c] input to [1, h*w*c]: the output is the input's bytes (an image
// fed through it comes back as decoded and resized).
inline std::vector<uint8_t> reshape_model(int h, int w, int c) {
  using namespace container;
  return write_tflite(one_op_model(
      BuiltinOp::kReshape, 17, ReshapeOptions{{1, h * w * c}},
      {u8_tensor("in", {1, h, w, c}), u8_tensor("out", {1, h * w * c})}, {0}, {1}, {0}));
}

// An executable that sends its bitstream, `in_bytes` of input, and waits for interrupt 0; an
// output layer of `out_bytes` is read back when `out_bytes` > 0 (the program must send them).
inline container::Executable sim_executable(std::vector<uint8_t> bitstream, int32_t in_bytes,
                                            int32_t out_bytes) {
  using namespace container;
  Executable e;
  e.version = 1;
  e.name = "probe";
  e.batch_size = 1;
  e.type = ExecutableType::kStandAlone;
  e.chip = "beagle";
  e.bitstreams = {Bitstream{std::move(bitstream), {}}};
  e.dma_hints.fully_deterministic = true;
  DmaHint instr{HintKind::kInstruction};
  instr.chunk_index = 0;
  DmaHint in{HintKind::kDma, Direction::kInfeed, Meta{BufferKind::kInput, 0, "in", Half::kLower32},
             0, in_bytes};
  DmaHint out{HintKind::kDma, Direction::kOutfeed,
              Meta{BufferKind::kOutput, 0, "out", Half::kLower32}, 0, out_bytes};
  DmaHint irq{HintKind::kInterrupt, Direction::kOutfeed};
  irq.interrupt_type = 0;
  e.dma_hints.hints = {instr, in};
  if (out_bytes > 0) e.dma_hints.hints.push_back(out);
  e.dma_hints.hints.push_back(irq);
  Layer input;
  input.name = "in";
  input.size_bytes = in_bytes;
  input.y_dim = 1;
  input.x_dim = 1;
  input.z_dim = in_bytes;
  input.data_type = DataType::kFixedPoint8;
  Layer output = input;
  output.name = "out";
  output.size_bytes = std::max(out_bytes, 1);
  output.z_dim = std::max(out_bytes, 1);
  output.is_output = true;
  e.input_layers = {input};
  e.output_layers = {output};
  return e;
}

// A TFLite model of one edgetpu-custom-op running `exe`, with uint8 tensors of the layers' sizes
// (or `input_tensor` in place of the input, to probe the delegate's matching).
inline std::vector<uint8_t> edgetpu_model(const container::Executable& exe,
                                          const container::Tensor* input_tensor = nullptr) {
  using namespace container;
  EdgeTpuModel m;
  Model& model = m.model;
  model.description = "tinycoral hostile-input probe";
  model.buffers = {Buffer{}};
  model.operator_codes = {{static_cast<int32_t>(BuiltinOp::kCustom), "edgetpu-custom-op", 1}};
  Subgraph g;
  g.name = "main";
  const int32_t in_dim = std::max(1, exe.input_layers[0].z_dim);
  const int32_t out_dim = std::max(1, exe.output_layers[0].z_dim);
  g.tensors = {input_tensor ? *input_tensor : u8_tensor("in", {1, in_dim}),
               u8_tensor("out", {1, out_dim})};
  g.inputs = {0};
  g.outputs = {1};
  Operator op;
  op.inputs = {0};
  op.outputs = {1};
  op.custom_options = {0};
  g.operators = {op};
  model.subgraphs = {g};
  EdgeTpuCustomOp options;
  options.version = 0;
  Package p;
  p.min_runtime_version = 13;
  p.compiler_version = "tinycoral-probe";
  p.model_identifier = "probe";
  p.executables = {exe};
  options.packages = {p};
  m.edgetpu_ops = {{0, 0, options}};
  return write_edgetpu_model(m);
}

}  // namespace tinycoral::testing
