// Per-channel programs (edgetpu_compiler 16.0, libredgetpu/ in the test data) on the virtual Edge
// TPU: each output equals its CPU twin's in `edgetpu` rounding in every byte, for a first and a
// second (parameters resident) inference on one chip (docs/chip_ops.md "Per-channel
// requantization"). Inputs are random bytes from a fixed seed.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Runs libredgetpu/`model`_edgetpu.tflite twice on one chip and its twin `model`.tflite once on
// the same random input and demands every output byte equal.
void expect_every_byte_of_the_twin(const std::filesystem::path& data, const std::string& model) {
  const auto dir = data / "libredgetpu";
  const auto compiled = container::read_edgetpu_model_file(dir / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_EQ(exes.execution->input_layers.size(), 1u);
  ASSERT_EQ(exes.execution->output_layers.size(), 1u);
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(container::read_tflite_file(dir / (model + ".tflite")), options);
  std::vector<uint8_t> bytes(cpu.input(0).bytes);
  std::mt19937 random(20261203);
  for (auto& b : bytes) b = static_cast<uint8_t>(random());
  cpu.set_input(0, bytes);
  cpu.invoke();
  const auto want = cpu.output_bytes(0);

  testing::Buffers inputs;
  inputs[exes.execution->input_layers[0].name] = bytes;
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  const auto& layer = exes.execution->output_layers[0];
  for (int inference = 0; inference < 2; ++inference) {
    const auto got = testing::detile(
        layer, testing::run_executable(chip, *exes.execution, inputs).at(layer.name));
    ASSERT_EQ(got.size(), want.size()) << model;
    size_t differ = 0, first = want.size();
    for (size_t k = 0; k < want.size(); ++k)
      if (got[k] != want[k]) {
        ++differ;
        first = std::min(first, k);
      }
    EXPECT_EQ(differ, 0u) << model << " inference " << inference << ": " << differ << " of "
                          << want.size() << " bytes differ, the first at " << first;
  }
  EXPECT_EQ(chip.fault(), "");
}

TEST(PerChannelProgramsOnTheChip, Dense256) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "dense_256");
}

TEST(PerChannelProgramsOnTheChip, Dense512) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "dense_512");
}

TEST(PerChannelProgramsOnTheChip, Gabor7x7Depthwise) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "gabor_64x64_7k_4o_2s");
}

}  // namespace
}  // namespace tinycoral::chip
