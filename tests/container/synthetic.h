// Hand-made models, packages and executables that set every field the container code keeps, for
// tests that must not depend on Google's files (and as the source of our own fuzz seeds).
#pragma once

#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/executable.h"
#include "container/tflite_model.h"

namespace tinycoral::testing {

inline container::Executable synthetic_executable(container::ExecutableType type) {
  using namespace container;
  Executable e;
  e.version = 1;
  e.name = type == ExecutableType::kParameterCaching ? "Unknown" : "model";
  e.batch_size = 1;
  e.scratch_size_bytes = 672;
  Bitstream s;
  s.data.assign(64, 0);
  s.data[0] = 0x40;  // arbitrary bytes: the container does not interpret them
  s.data[63] = 0x7f;
  s.field_offsets = {{Meta{BufferKind::kParameter, 0, "", Half::kLower32}, 70},
                     {Meta{BufferKind::kParameter, 0, "", Half::kUpper32}, 198},
                     {Meta{BufferKind::kInput, 0, "in", Half::kLower32}, 326},
                     {Meta{BufferKind::kOutput, 0, "out", Half::kUpper32}, 454}};
  e.bitstreams = {s, Bitstream{std::vector<uint8_t>(16, 0x11), {}}};
  e.parameters = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  e.dma_hints.fully_deterministic = true;
  DmaHint instr{HintKind::kInstruction};
  instr.chunk_index = 1;
  DmaHint in{HintKind::kDma, Direction::kInfeed, Meta{BufferKind::kInput, 0, "in", Half::kLower32},
             0, 48};
  DmaHint out{HintKind::kDma, Direction::kOutfeed,
              Meta{BufferKind::kOutput, 0, "out", Half::kLower32}, 16, 32};
  DmaHint fence{HintKind::kFence};
  DmaHint irq{HintKind::kInterrupt, Direction::kOutfeed};
  irq.interrupt_type = 2;
  e.dma_hints.hints = {instr, in, fence, out, irq};
  Layer input;
  input.name = "in";
  input.size_bytes = 48;
  input.y_dim = 4;
  input.x_dim = 4;
  input.z_dim = 3;
  input.zero_point = 128;
  input.dequantization_factor = 0.0078125f;
  input.data_type = DataType::kSignedFixedPoint8;
  input.shape = {{0, 0}, {0, 3}, {0, 3}, {0, 2}};
  Layer output;
  output.name = "out";
  output.size_bytes = 64;
  output.y_dim = 2;
  output.x_dim = 2;
  output.z_dim = 10;
  output.zero_point = -3;
  output.dequantization_factor = 0.25f;
  output.data_type = DataType::kFixedPoint16;
  output.is_output = true;
  output.execution_count_per_inference = 2;
  output.cache_on_dram = true;
  output.output_layout =
      OutputLayout{{0, 4}, {0, 1}, {0, 16, 32, 48, 64, 80}, {0, 0}, {0, 1}, {16, 16}};
  e.input_layers = {input};
  e.output_layers = {output};
  e.chip = "beagle";
  e.estimated_cycles = (int64_t{1} << 40) + 5;
  e.used_narrow_memory_bytes_per_tile = 8996;
  e.type = type;
  e.parameter_caching_token = 0xfedcba9876543210ull;
  e.use_tpu_dram_for_parameters = false;
  return e;
}

inline container::Package synthetic_package() {
  container::Package p;
  p.min_runtime_version = 13;
  p.signature = {};
  p.keypair_version = 0;
  p.compiler_version = "tinycoral-test";
  p.virtual_chip_id = 0;
  p.model_identifier = "synthetic";
  p.executables = {synthetic_executable(container::ExecutableType::kExecutionOnly),
                   synthetic_executable(container::ExecutableType::kParameterCaching)};
  return p;
}

// A model with one operator per modelled options struct, per-tensor and per-channel quantization,
// constant buffers and an edgetpu-custom-op placeholder (operator 0, empty options).
inline container::Model synthetic_model() {
  using namespace container;
  Model m;
  m.description = "tinycoral synthetic test model";
  m.buffers = {Buffer{}, Buffer{{1, 2, 3, 4, 5, 6, 7, 8}}, Buffer{std::vector<uint8_t>(40, 9)}};
  m.operator_codes = {{32, "edgetpu-custom-op", 1},
                      {3, "", 2},
                      {4, "", 1},
                      {9, "", 5},
                      {1, "", 1},
                      {0, "", 2},
                      {41, "", 1},
                      {18, "", 1},
                      {2, "", 1},
                      {49, "", 1},
                      {22, "", 1},
                      {25, "", 1},
                      {23, "", 3},
                      {97, "", 1},
                      {56, "", 1},
                      {40, "", 1},
                      {43, "", 1},
                      {45, "", 1},
                      {44, "", 1},
                      {34, "", 1},
                      {150, "", 1}};
  Subgraph g;
  g.name = "main";
  Tensor in{"input",
            {1, 4, 4, 3},
            {-1, 4, 4, 3},
            TensorType::kUInt8,
            0,
            Quantization{{0.0078125f}, {128}, {-1.0f}, {1.0f}, 0}};
  Tensor weights{"weights", {2, 1, 1, 4},
                 {},        TensorType::kInt8,
                 1,         Quantization{{0.5f, 0.25f}, {0, 0}, {}, {}, 0}};
  Tensor bias{"bias", {10}, {}, TensorType::kInt32, 2, Quantization{}};
  Tensor out{"output", {1, 10}, {}, TensorType::kFloat32, 0, Quantization{}, true};
  g.tensors = {in, weights, bias, out};
  g.inputs = {0};
  g.outputs = {3};
  auto op = [&](uint32_t code, uint8_t tag, BuiltinOptions options) {
    Operator o;
    o.opcode_index = code;
    o.inputs = {0, 1, -1};
    o.outputs = {3};
    o.builtin_options_type = tag;
    o.options = std::move(options);
    g.operators.push_back(std::move(o));
  };
  op(0, 0, std::monostate{});
  g.operators.back().custom_options = {0};  // replaced by the writer of an EdgeTpuModel
  op(1, 1, Conv2DOptions{Padding::kValid, 2, 3, 1, 2, Activation::kRelu6});
  op(2, 2, DepthwiseConv2DOptions{Padding::kSame, 1, 2, 3, 4, 5, Activation::kRelu});
  op(3, 8, FullyConnectedOptions{Activation::kReluN1To1, 1, true, true});
  op(4, 5, Pool2DOptions{Padding::kValid, 2, 2, 3, 3, Activation::kNone});
  op(5, 11, ActivationOptions{Activation::kRelu});
  op(6, 28, ActivationOptions{Activation::kRelu6});
  op(7, 21, ActivationOptions{Activation::kTanh});
  op(8, 10, ConcatenationOptions{-1, Activation::kNone});
  op(9, 35, SplitOptions{3});
  op(10, 17, ReshapeOptions{{1, -1}});
  op(11, 9, SoftmaxOptions{0.5f});
  op(12, 15, ResizeOptions{true, false});
  op(13, 74, ResizeOptions{false, true});
  op(14, 40, ArgMaxOptions{TensorType::kInt32});
  op(15, 27, ReducerOptions{true});
  op(16, 30, SqueezeOptions{{1, 2}});
  op(17, 32, StridedSliceOptions{1, 2, 0, 0, 4});
  op(18, 71, SequenceLstmOptions{Activation::kTanh, 10.0f, 0.0f, true, false});
  op(19, 22, std::monostate{});  // PadOptions: an empty options table
  op(20, 0, std::monostate{});   // a builtin code above 127 (only in the int32 field)
  g.operators.back().intermediates = {1};
  m.subgraphs = {g};
  return m;
}

inline container::EdgeTpuModel synthetic_edgetpu_model() {
  container::EdgeTpuModel m;
  m.model = synthetic_model();
  container::EdgeTpuCustomOp options;
  options.version = 0;
  options.execution_preference = -1;
  options.chip_ids = {18, 18};
  options.packages = {synthetic_package(), synthetic_package()};
  options.packages[1].model_identifier = "second";
  m.edgetpu_ops = {{0, 0, options}};
  return m;
}

}  // namespace tinycoral::testing
