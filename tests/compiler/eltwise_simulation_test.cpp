// Correct by simulation: ADD and MUL of two tensors (random shapes, scales, zero points, fused
// RELU/RELU6, uint8 or int8 boundaries, x op x), built as CPU twins, compiled by our compiler, run
// on the virtual Edge TPU and compared with the CPU reference in `edgetpu` rounding: every output
// byte equal, on a first and a second inference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "host/rounding.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using container::TensorType;
using testing::twin_tensor;

struct Case {
  bool mul = false;
  std::vector<int32_t> shape;
  Activation act = Activation::kNone;
  bool int8_io = false;  // no QUANTIZE: the op's int8 tensors are the model's boundary
  bool same = false;     // x op x
};

// The CPU twin: uint8 a, b -> QUANTIZE -> int8 -> ADD|MUL -> int8 -> QUANTIZE -> uint8 (the
// converter's form for uint8 I/O), or the op alone on int8 tensors.
container::Model twin(const Case& c, std::mt19937& random) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const bool relu6 = c.act == Activation::kRelu6;
  const float sa = relu6 ? 0.04f + 0.03f * unit(random) : 0.005f + 0.05f * unit(random);
  const float sb = c.same ? sa : sa * ((relu6 ? 1.0f : 0.25f) + 2.0f * unit(random));
  const int za = static_cast<int>(random() % 160) + 48;
  const int zb = c.same ? za : static_cast<int>(random() % 160) + 48;
  // The output quantization spans most of the real results' range (their sum or product at the
  // corners of the inputs' ranges): few saturate, most distinct bytes occur.
  const float a0 = -za * sa, a1 = (255 - za) * sa, b0 = -zb * sb, b1 = (255 - zb) * sb;
  float lo = a0 + b0, hi = a1 + b1;
  if (c.mul) {
    lo = std::min({a0 * b0, a0 * b1, a1 * b0, a1 * b1});
    hi = std::max({a0 * b0, a0 * b1, a1 * b0, a1 * b1});
  }
  float sy = (hi - lo) / 255 * (0.7f + 0.3f * unit(random));
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
  m.operator_codes = {{114, "", 1}, {c.mul ? 18 : 0, "", 2}};
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
  qy.inputs = {4};
  qy.outputs = {5};
  g.operators = c.same ? std::vector{qa, op, qy} : std::vector{qa, qb, op, qy};
  g.inputs = c.same ? std::vector<int32_t>{0} : std::vector<int32_t>{0, 1};
  g.outputs = {5};
  if (c.int8_io) {
    g.tensors[2].name = "a";
    g.tensors[3].name = "b";
    g.tensors[4].name = "y";
    g.operators = {op};
    g.inputs = c.same ? std::vector<int32_t>{2} : std::vector<int32_t>{2, 3};
    g.outputs = {4};
  }
  m.subgraphs.push_back(std::move(g));
  return m;
}

std::string describe(const Case& c) {
  std::string s = c.mul ? "MUL" : "ADD";
  for (int32_t d : c.shape) s += " " + std::to_string(d);
  return s + " act " + std::to_string(static_cast<int>(c.act)) + (c.int8_io ? " int8" : "") +
         (c.same ? " x op x" : "");
}

void expect_equal_to_cpu(const Case& c, std::mt19937& random) {
  SCOPED_TRACE(describe(c));
  const container::Model model = twin(c, random);
  const CompileResult r = compile_model(container::write_tflite(model));
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.back().status);
  const auto compiled = container::read_edgetpu_model(r.tflite);
  const auto exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);

  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(model, options);
  int64_t elements = 1;
  for (int32_t d : c.shape) elements *= d;
  const size_t inputs = c.same ? 1 : 2;
  std::vector<std::vector<uint8_t>> x(inputs, std::vector<uint8_t>(static_cast<size_t>(elements)));
  for (size_t i = 0; i < inputs; ++i) {
    for (auto& v : x[i]) v = static_cast<uint8_t>(random());
    cpu.set_input(i, x[i]);
  }
  cpu.invoke();
  const auto want_span = cpu.output_bytes(0);
  const std::vector<uint8_t> want(want_span.begin(), want_span.end());
  // Equality must not be cheap: the outputs spread, and a fused activation clips some of them.
  size_t saturated = 0;
  for (uint8_t v : want) saturated += v == 0 || v == 255;
  ASSERT_LT(saturated * 3, want.size()) << "the test's output quantization saturates";
  ASSERT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
            std::min<size_t>(want.size() / 4, 24));
  const uint8_t flip = c.int8_io ? 0x80 : 0;
  if (c.act != Activation::kNone) {
    const auto& y = model.subgraphs[0].tensors[c.int8_io ? 4 : 5].quantization;
    const int zp = static_cast<int>(y.zero_point[0]) + (c.int8_io ? 128 : 0);
    const int top = std::min(255, zp + static_cast<int>(std::nearbyint(6.0f / y.scale[0])));
    const int bound = (c.act == Activation::kRelu ? zp : top) ^ flip;
    ASSERT_GT(std::count(want.begin(), want.end(), static_cast<uint8_t>(bound)), 0);
  }

  chip::VirtualEdgeTpu chip;
  if (exes.caching) chip::testing::run_executable(chip, *exes.caching, {});
  chip::testing::Buffers device;
  const char* names[2] = {"a", "b"};
  for (size_t i = 0; i < inputs; ++i) {
    auto& bytes = device[names[i]] = x[i];
    for (auto& v : bytes) v ^= flip;
  }
  const auto& layer = exes.execution->output_layers.at(0);
  for (int inference = 0; inference < 2; ++inference) {
    auto got = chip::testing::detile(
        layer, chip::testing::run_executable(chip, *exes.execution, device).at(layer.name));
    for (auto& v : got) v ^= flip;
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "inference " << inference << ": " << differ << " of " << want.size()
                          << " bytes differ";
  }
  EXPECT_EQ(chip.fault(), "");
}

std::vector<int32_t> random_shape(std::mt19937& random, int max_elements) {
  while (true) {
    const std::vector<int32_t> s = {1, 1 + static_cast<int32_t>(random() % 40),
                                    1 + static_cast<int32_t>(random() % 40),
                                    1 + static_cast<int32_t>(random() % 48)};
    if (s[1] * s[2] * s[3] <= max_elements && s[1] * s[2] * s[3] >= 64) return s;
  }
}

TEST(EltwiseOnTheVirtualEdgeTpu, AddEqualsTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261204);
  expect_equal_to_cpu({false, {1, 8, 8, 16}}, random);
  expect_equal_to_cpu({false, {1, 56, 56, 24}}, random);  // MobileNet v2's first residual ADD
  expect_equal_to_cpu({false, {1, 3, 5, 7}}, random);     // 105 bytes: a short last unit
  for (int i = 0; i < 12; ++i) expect_equal_to_cpu({false, random_shape(random, 40000)}, random);
}

TEST(EltwiseOnTheVirtualEdgeTpu, MulEqualsTheCpuReferenceInEveryByte) {
  std::mt19937 random(5);
  expect_equal_to_cpu({true, {1, 8, 8, 16}}, random);
  expect_equal_to_cpu({true, {1, 64, 64, 1}}, random);  // looming's squares
  expect_equal_to_cpu({true, {1, 3, 5, 7}}, random);
  for (int i = 0; i < 12; ++i) expect_equal_to_cpu({true, random_shape(random, 40000)}, random);
}

TEST(EltwiseOnTheVirtualEdgeTpu, FusedReluInt8AndSameOperandEqualTheCpuReference) {
  std::mt19937 random(9);
  for (bool mul : {false, true}) {
    for (Activation act : {Activation::kRelu, Activation::kRelu6})
      expect_equal_to_cpu({mul, random_shape(random, 20000), act}, random);
    expect_equal_to_cpu({mul, random_shape(random, 20000), Activation::kNone, true}, random);
    expect_equal_to_cpu({mul, random_shape(random, 20000), Activation::kNone, false, true}, random);
  }
}

// The compiled models run the way users run them: our *_edgetpu.tflite through the host
// interpreter with the edgetpu-custom-op delegate on the virtual Edge TPU (two input layers, the
// runtime's DMA hints and padded 8-byte units, int8 sign flips).
TEST(EltwiseThroughTheRuntime, CompiledModelsEqualTheirTwinsInEveryByte) {
  std::mt19937 random(31);
  for (const Case& c : {Case{false, {1, 7, 9, 5}}, Case{true, {1, 12, 12, 20}},
                        Case{false, {1, 10, 10, 8}, Activation::kRelu6, true},
                        Case{true, {1, 5, 5, 12}, Activation::kNone, false, true}}) {
    SCOPED_TRACE(describe(c));
    const container::Model model = twin(c, random);
    const CompileResult r = compile_model(container::write_tflite(model));
    ASSERT_EQ(r.edgetpu_subgraphs, 1);
    host::InterpreterOptions cpu_options;
    cpu_options.rounding = host::Rounding::kEdgeTpu;
    host::Interpreter cpu(model, cpu_options);
    host::InterpreterOptions tpu_options;
    runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
    host::Interpreter tpu(container::read_tflite(r.tflite), tpu_options);
    ASSERT_EQ(tpu.num_inputs(), c.same ? 1u : 2u);
    int64_t elements = 1;
    for (int32_t d : c.shape) elements *= d;
    for (int inference = 0; inference < 2; ++inference) {
      for (size_t i = 0; i < tpu.num_inputs(); ++i) {
        std::vector<uint8_t> x(static_cast<size_t>(elements));
        for (auto& v : x) v = static_cast<uint8_t>(random());
        cpu.set_input(i, x);
        tpu.set_input(i, x);
      }
      cpu.invoke();
      tpu.invoke();
      const auto want = cpu.output_bytes(0);
      const auto got = tpu.output_bytes(0);
      ASSERT_EQ(got.size(), want.size());
      size_t differ = 0;
      for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
      EXPECT_EQ(differ, 0u) << "inference " << inference << ": " << differ << " of " << want.size()
                            << " bytes differ";
    }
  }
}

}  // namespace
}  // namespace tinycoral::compiler
