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
#include "support/compiled_twin.h"
#include "support/eltwise_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using testing::Case;
using testing::CompiledTwin;
using testing::describe;
using testing::edgetpu_reference;
using testing::random_shape;
using testing::same_bytes;
using testing::twin;
using testing::virtual_edgetpu_interpreter;

void expect_equal_to_cpu(const Case& c, std::mt19937& random) {
  SCOPED_TRACE(describe(c));
  const container::Model model = twin(c, random);
  const CompiledTwin compiled(model);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);

  host::Interpreter cpu = edgetpu_reference(model);
  int64_t elements = 1;
  for (int32_t d : c.shape) elements *= d;
  const size_t inputs = c.same || c.relu ? 1 : 2;
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
  // (Tensors of a few bytes are there for their short 8-byte unit; too few to judge the spread.)
  if (want.size() >= 64) {
    ASSERT_LT(saturated * 3, want.size()) << "the test's output quantization saturates";
  }
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
  compiled.cache_parameters(chip);
  chip::testing::Buffers device;
  const char* names[2] = {"a", "b"};
  for (size_t i = 0; i < inputs; ++i) {
    auto& bytes = device[names[i]] = x[i];
    for (auto& v : bytes) v ^= flip;
  }
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> got = compiled.infer(chip, device);
    for (auto& v : got) v ^= flip;
    EXPECT_TRUE(same_bytes(got, want)) << "inference " << inference;
  }
  EXPECT_EQ(chip.fault(), "");
}

TEST(EltwiseOnTheVirtualEdgeTpu, AddEqualsTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261204);
  expect_equal_to_cpu({false, {1, 8, 8, 16}}, random);
  expect_equal_to_cpu({false, {1, 56, 56, 24}}, random);  // MobileNet v2's first residual ADD
  expect_equal_to_cpu({false, {1, 96, 96, 24}}, random);  // 216 KB: two pop passes
  expect_equal_to_cpu({false, {1, 3, 5, 7}}, random);     // 105 bytes: a short last unit
  expect_equal_to_cpu({false, {1, 1, 1, 5}}, random);     // 5 bytes: one short unit
  for (int i = 0; i < 12; ++i) expect_equal_to_cpu({false, random_shape(random, 40000)}, random);
}

TEST(EltwiseOnTheVirtualEdgeTpu, MulEqualsTheCpuReferenceInEveryByte) {
  std::mt19937 random(5);
  expect_equal_to_cpu({true, {1, 8, 8, 16}}, random);
  expect_equal_to_cpu({true, {1, 64, 64, 1}}, random);     // looming's squares
  expect_equal_to_cpu({true, {1, 112, 112, 16}}, random);  // 200 KB: two pop passes
  expect_equal_to_cpu({true, {1, 3, 5, 7}}, random);
  expect_equal_to_cpu({true, {1, 1, 1, 5}}, random);
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

// RELU and RELU6 on their own (goal of issue 11: where the chip does them): the requantize op.
TEST(EltwiseOnTheVirtualEdgeTpu, ReluAndRelu6EqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(41);
  for (int i = 0; i < 6; ++i) {
    Case c;
    c.relu = true;
    c.act = i % 2 == 0 ? Activation::kRelu : Activation::kRelu6;
    c.shape = random_shape(random, 30000);
    c.int8_io = i >= 4;
    expect_equal_to_cpu(c, random);
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
    host::Interpreter cpu = edgetpu_reference(model);
    host::Interpreter tpu = virtual_edgetpu_interpreter(container::read_tflite(r.tflite));
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
      EXPECT_TRUE(same_bytes(tpu.output_bytes(0), cpu.output_bytes(0)))
          << "inference " << inference;
    }
  }
}

}  // namespace
}  // namespace tinycoral::compiler
