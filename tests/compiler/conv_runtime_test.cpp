// A compiled CONV_2D model run the way users run it: our *_edgetpu.tflite through the host
// interpreter with the edgetpu-custom-op delegate on the virtual Edge TPU (the runtime's DMA
// hints, output layout and sign flips, not the tests' helpers), equal in every byte to the CPU
// twin in `edgetpu` rounding.
#include <gtest/gtest.h>

#include <random>

#include "compiler/compile.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/conv_twin.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

void expect_runtime_equals_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                               bool int8_io, std::mt19937& random) {
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random, int8_io);
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  host::InterpreterOptions cpu_options;
  cpu_options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(twin, cpu_options);
  host::InterpreterOptions tpu_options;
  runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(container::read_tflite(r.tflite), tpu_options);
  ASSERT_EQ(tpu.num_inputs(), 1u);
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> x(static_cast<size_t>(h) * w * cin);
    for (auto& b : x) b = static_cast<uint8_t>(random());
    cpu.set_input(0, x);
    cpu.invoke();
    tpu.set_input(0, x);
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

}  // namespace
}  // namespace tinycoral::compiler
