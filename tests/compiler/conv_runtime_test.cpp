// A compiled CONV_2D model run the way users run it: our *_edgetpu.tflite through the host
// interpreter with the edgetpu-custom-op delegate on the virtual Edge TPU (the runtime's DMA
// hints, output layout and sign flips, not the tests' helpers), equal in every byte to the CPU
// twin in `edgetpu` rounding.
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>

#include "compiler/compile.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

// Fills `log` with the compile's operation log rows, `cpu_ops` with the builtin codes of the
// compiled file's CPU operators and `custom_input` with the shape of the custom op's input.
void expect_model_equals_cpu(const container::Model& twin, int h, int w, int cin,
                             std::mt19937& random, std::vector<LogRow>* log,
                             std::vector<int32_t>* cpu_ops,
                             std::vector<int32_t>* custom_input = nullptr) {
  const CompileResult r = compile_model(container::write_tflite(twin));
  if (log != nullptr) *log = r.rows;
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  if (cpu_ops != nullptr) {
    const container::Model compiled = container::read_tflite(r.tflite);
    cpu_ops->clear();
    for (const auto& op : compiled.subgraphs.at(0).operators) {
      const int32_t code = compiled.operator_codes.at(op.opcode_index).builtin_code;
      cpu_ops->push_back(code);
      if (custom_input != nullptr && code == static_cast<int32_t>(container::BuiltinOp::kCustom))
        *custom_input =
            compiled.subgraphs.at(0).tensors.at(static_cast<size_t>(op.inputs.at(0))).shape;
    }
  }
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  host::Interpreter tpu = testing::virtual_edgetpu_interpreter(container::read_tflite(r.tflite));
  ASSERT_EQ(tpu.num_inputs(), 1u);
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> x(static_cast<size_t>(h) * w * cin);
    for (auto& b : x) b = static_cast<uint8_t>(random());
    cpu.set_input(0, x);
    cpu.invoke();
    tpu.set_input(0, x);
    tpu.invoke();
    EXPECT_TRUE(testing::same_bytes(tpu.output_bytes(0), cpu.output_bytes(0)))
        << "inference " << inference;
  }
}

void expect_runtime_equals_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                               bool int8_io, std::mt19937& random,
                               std::vector<LogRow>* log = nullptr,
                               std::vector<int32_t>* cpu_ops = nullptr,
                               std::vector<int32_t>* custom_input = nullptr) {
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random, int8_io);
  expect_model_equals_cpu(twin, h, w, cin, random, log, cpu_ops, custom_input);
}

TEST(ConvThroughTheRuntime, CompiledModelsEqualTheirTwinsInEveryByte) {
  std::mt19937 random(47);
  ConvSpec fc{10};
  fc.fc = true;
  // 16 tiles, a classifier at the end (a 1x1x10 output).
  expect_runtime_equals_cpu(16, 16, 3, {{16, 3, 2, true}, {16, 3, 1, true}, fc}, false, random);
  // 16 tiles, a map out of row bands; int8 at both ends.
  expect_runtime_equals_cpu(20, 12, 8, {{24, 3, 1, true}, {8, 1, 1, false}}, true, random);
  // one tile (rows of 36 bytes travel two to a packet), 5 output channels stored as 8.
  expect_runtime_equals_cpu(10, 9, 4, {{5, 3, 1, false}}, false, random);
}

// A RESHAPE that flattens the last map ([1, H, W, C] -> [1, H W C], looming's pooled 3 x 3 map):
// the same bytes in the same order, so the chain's output is the reshaped tensor.
TEST(ConvThroughTheRuntime, AFlattenedLastMapEqualsTheTwin) {
  std::mt19937 random(53);
  for (const auto& [h, w, cin, specs] :
       std::vector<std::tuple<int, int, int, std::vector<ConvSpec>>>{
           {6, 6, 4, {{8, 3, 2, false}}}, {16, 12, 8, {{12, 3, 1, true}, {5, 3, 2, false}}}}) {
    SCOPED_TRACE(twins::describe(h, w, cin, specs) + " + RESHAPE");
    container::Model twin = twins::conv_twin(h, w, cin, specs, random, /*int8_io=*/true);
    container::Subgraph& g = twin.subgraphs.at(0);
    const container::Tensor map = g.tensors.at(static_cast<size_t>(g.outputs.at(0)));
    const int n = map.shape.at(1) * map.shape.at(2) * map.shape.at(3);
    ASSERT_GT(map.shape.at(1) * map.shape.at(2), 1);
    container::Tensor flat = map;
    flat.name += "_flat";
    flat.shape = {1, n};
    g.tensors.push_back(flat);
    twin.operator_codes.push_back({22, "", 1});  // RESHAPE
    container::Operator reshape;
    reshape.opcode_index = static_cast<uint32_t>(twin.operator_codes.size() - 1);
    reshape.inputs = {g.outputs.at(0)};
    reshape.outputs = {static_cast<int>(g.tensors.size()) - 1};
    reshape.builtin_options_type = 17;
    reshape.options = container::ReshapeOptions{{1, n}};
    g.operators.push_back(reshape);
    g.outputs = reshape.outputs;
    expect_model_equals_cpu(twin, h, w, cin, random, nullptr, nullptr);
  }
}

// Images whose rows are not whole 8-byte units with 1-3 channels (PoseNet's 481 x 3): the host
// sends them as they are and the chip repacks their rows into the first layer's image of rows
// that stream (no operator on the CPU; the custom op's input is the model's). Only a first layer
// the generator cannot take on the image's own channels is still padded on the host (a PAD on
// the CPU before the custom op, to 4-byte pixels). The whole file equals the twin in every byte.
TEST(ConvThroughTheRuntime, InputsNotStreamableEqualTheirTwins) {
  std::mt19937 random(1205);
  const int32_t pad = static_cast<int32_t>(container::BuiltinOp::kPad);
  const int32_t custom = static_cast<int32_t>(container::BuiltinOp::kCustom);
  std::vector<int32_t> ops, shape;
  struct Case {
    int h, w, cin;
    std::vector<ConvSpec> specs;
    bool int8_io;
    std::vector<int32_t> padded;  // the custom op's input when padded on the host, else {}
  };
  const std::vector<Case> cases = {
      // 45-byte rows, a SAME stride-2 layer whose 8 outputs a row are whole blocks.
      {15, 15, 3, {{16, 3, 2, true}, {8, 3, 1, true}}, false, {}},
      // Outputs a row that are not whole blocks (PoseNet's 241 of 2-pixel blocks): 9 of 4-pixel
      // blocks on 9-byte rows; 21 of 4 with a 5x5 SAME layer on 63-byte rows; 7 of 2 (VALID
      // stride 2) on 39-byte rows.
      {9, 9, 1, {{8, 3, 1, true}, {8, 3, 1, true}}, false, {}},
      {17, 21, 3, {{12, 5, 1, true}, {8, 1, 1, true}}, false, {}},
      {13, 13, 3, {{8, 3, 2, true}, {8, 3, 1, true}}, true, {}},
      // Odd heights and widths: 12-byte rows of an odd count; 20-byte rows of 2 channels; 75-byte
      // rows of a VALID stride-2 layer.
      {13, 12, 1, {{8, 3, 1, true}, {8, 3, 1, true}}, false, {}},
      {11, 10, 2, {{8, 3, 1, true}, {8, 1, 1, true}}, true, {}},
      {9, 25, 3, {{16, 3, 2, false}, {8, 3, 1, true}}, false, {}},
      // One layer: 3-channel rows of 33 pixels; 7 x 7 x 1; 9 x 9 x 3.
      {13, 33, 3, {{8, 3, 1, true}}, false, {}},
      {7, 7, 1, {{8, 3, 2, true}}, true, {}},
      {9, 9, 3, {{8, 3, 1, true}}, false, {}},
      // A first layer the generator cannot take on 3 channels (4-pixel blocks of 32 channels,
      // more than 64 columns): the compile falls back to 4-byte pixels padded on the host.
      {16, 16, 3, {{32, 3, 1, true}, {8, 1, 1, true}}, false, {1, 16, 16, 4}},
      // Rows that stream: as they are, whole blocks or not (7 outputs a row of 2-pixel blocks).
      {16, 16, 3, {{16, 3, 2, true}, {8, 1, 1, true}}, false, {}},
      {16, 16, 3, {{16, 3, 2, false}, {8, 1, 1, true}}, true, {}},
  };
  for (const Case& c : cases) {
    shape.clear();
    expect_runtime_equals_cpu(c.h, c.w, c.cin, c.specs, c.int8_io, random, nullptr, &ops, &shape);
    SCOPED_TRACE(twins::describe(c.h, c.w, c.cin, c.specs));
    if (c.padded.empty()) {
      EXPECT_EQ(ops, (std::vector<int32_t>{custom}));
      EXPECT_EQ(shape, (std::vector<int32_t>{1, c.h, c.w, c.cin}));
    } else {
      EXPECT_EQ(ops, (std::vector<int32_t>{pad, custom}));
      EXPECT_EQ(shape, c.padded);
    }
  }
}

// Random chains on 1-3 channel images whose rows are not whole words (odd widths; PoseNet's and
// DeepLab's 3x3 SAME first layers at stride 1 and 2; images of up to 48 rows in bands over
// several tiles, whose rows start anywhere in an 8-byte unit): each compiles without a CPU
// operator, the custom op reads the model's image, and every output byte equals the twin's.
TEST(ConvThroughTheRuntime, ImagesRepackedOnTheChipEqualTheirTwins) {
  std::mt19937 random(1206);
  const int32_t custom = static_cast<int32_t>(container::BuiltinOp::kCustom);
  std::vector<int32_t> ops, shape;
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(random); };
  for (int n = 0; n < 12; ++n) {
    const int cin = pick(1, 3), h = pick(5, 48), w = 2 * pick(3, 24) + 1;
    std::vector<ConvSpec> specs = {{8 * pick(1, 2), 3, pick(1, 2), pick(0, 3) > 0}};
    if (pick(0, 3) > 0) specs.push_back({8 * pick(1, 2), pick(0, 1) ? 3 : 1, 1, true});
    shape.clear();
    expect_runtime_equals_cpu(h, w, cin, specs, pick(0, 1) == 1, random, nullptr, &ops, &shape);
    SCOPED_TRACE(twins::describe(h, w, cin, specs));
    EXPECT_EQ(ops, (std::vector<int32_t>{custom}));
    EXPECT_EQ(shape, (std::vector<int32_t>{1, h, w, cin}));
  }
}

// A miniature MobileNet v1 whole: conv 3x3 s2, depthwise/pointwise blocks, the global average
// pool, the 1x1 classifier of 1001 classes, RESHAPE on the chip and its SOFTMAX on the CPU.
TEST(ConvThroughTheRuntime, MiniatureMobileNetEqualsItsTwinInEveryByte) {
  std::mt19937 random(67);
  const auto r6 = container::Activation::kRelu6;
  auto dw = [&](int stride) {
    ConvSpec s{0, 3, stride, true, true, true, r6};
    s.depthwise = true;
    return s;
  };
  ConvSpec pool{0, 4, 4};
  pool.pool = true;
  ConvSpec classes{1001, 1, 1, true};
  classes.softmax = true;
  std::vector<LogRow> log;
  expect_runtime_equals_cpu(32, 32, 3,
                            {{8, 3, 2, true, true, true, r6},
                             dw(1),
                             {16, 1, 1, true, true, true, r6},
                             dw(2),
                             {32, 1, 1, true, true, true, r6},
                             dw(2),
                             {64, 1, 1, true, true, true, r6},
                             pool,
                             classes},
                            false, random, &log);
  // The layers map; the SOFTMAX (and the QUANTIZE after it) runs on the CPU.
  std::map<std::string, int> mapped, cpu;
  for (const LogRow& row : log) (row.mapped ? mapped : cpu)[row.op] += row.count;
  EXPECT_EQ(mapped, (std::map<std::string, int>{{"AVERAGE_POOL_2D", 1},
                                                {"CONV_2D", 5},
                                                {"DEPTHWISE_CONV_2D", 3},
                                                {"QUANTIZE", 1},
                                                {"RESHAPE", 1}}));
  EXPECT_EQ(cpu, (std::map<std::string, int>{{"QUANTIZE", 1}, {"SOFTMAX", 1}}));
}

}  // namespace
}  // namespace tinycoral::compiler
