// Programs that edgetpu_compiler 16.0 wrote (libredgetpu/ of the test data): their scheduling
// (fence regions, sync counters, FIFO feeds) must never deadlock the virtual Edge TPU
// (docs/chip.md "Scheduling"); looming equals its CPU twin in every byte. Where an op class or unit
// form is still missing, the run stops naming it, never as a deadlock.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>
#include <string>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Runs libredgetpu/`model`_edgetpu.tflite (its caching program, then one inference on random
// bytes) and returns the error that stopped it, or "" when it ran to the end.
std::string stop_message(const std::filesystem::path& data, const std::string& model) {
  const auto compiled =
      container::read_edgetpu_model_file(data / "libredgetpu" / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  if (exes.execution == nullptr) return "no execution program";
  VirtualEdgeTpu chip;
  try {
    if (exes.caching) testing::run_executable(chip, *exes.caching, {});
    testing::run_executable(chip, *exes.execution, testing::random_inputs(*exes.execution, 16));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Compiler16ProgramsOnTheChip, NoneDeadlocks) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const char* model : {"bright_16x16", "bright_64x64", "color_red_64x64", "color_green_64x64",
                            "color_blue_64x64", "looming_64x64_3x3"}) {
    SCOPED_TRACE(model);
    const std::string message = stop_message(data, model);
    EXPECT_NE(message, "no execution program");
    EXPECT_EQ(message.find("deadlock"), std::string::npos) << message;
  }
}

// The on-tile softmax's maximum (a one-word-per-step transposing narrowToWide, then opcode 2 dp 1
// cfg0 0x60; docs/chip_ops.md 6.1) runs in every softmax program: where a run still stops, it is
// at a later op class, never at the gather or the maximum.
TEST(Compiler16ProgramsOnTheChip, SoftmaxMaximumRuns) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const char* model : {"bright_16x16", "bright_64x64", "color_red_64x64", "color_green_64x64",
                            "color_blue_64x64"}) {
    SCOPED_TRACE(model);
    const std::string message = stop_message(data, model);
    EXPECT_NE(message, "no execution program");
    EXPECT_EQ(message.find("n2w"), std::string::npos) << message;
    EXPECT_EQ(message.find("opcode 0x2 dp_mode 1"), std::string::npos) << message;
    EXPECT_EQ(message.find("pool at word"), std::string::npos) << message;
  }
}

// Every output byte equals the CPU twin's in `edgetpu` rounding, on random images (fixed seeds),
// and the second inference on the same chip equals the first.
TEST(Compiler16ProgramsOnTheChip, LoomingEqualsItsTwinInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto compiled =
      container::read_edgetpu_model_file(data / "libredgetpu/looming_64x64_3x3_edgetpu.tflite");
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_EQ(exes.execution->input_layers.size(), 1u);
  ASSERT_EQ(exes.execution->output_layers.size(), 1u);
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(container::read_tflite_file(data / "libredgetpu/looming_64x64_3x3.tflite"),
                        options);
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  const auto& in_layer = exes.execution->input_layers[0];
  const auto& out_layer = exes.execution->output_layers[0];
  std::mt19937 generator(3);
  for (int image = 0; image < 3; ++image) {
    SCOPED_TRACE(image);
    std::vector<uint8_t> bytes(64 * 64);
    for (auto& b : bytes) b = static_cast<uint8_t>(generator());
    cpu.set_input(0, bytes);
    cpu.invoke();
    const auto out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(out.begin(), out.end());
    testing::Buffers inputs;
    inputs[in_layer.name] = bytes;
    const auto first = testing::detile(
        out_layer, testing::run_executable(chip, *exes.execution, inputs).at(out_layer.name));
    const auto second = testing::detile(
        out_layer, testing::run_executable(chip, *exes.execution, inputs).at(out_layer.name));
    EXPECT_EQ(chip.fault(), "");
    EXPECT_EQ(first, want);
    EXPECT_EQ(second, want);
  }
}

}  // namespace
}  // namespace tinycoral::chip
