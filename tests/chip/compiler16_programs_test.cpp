// Programs that edgetpu_compiler 16.0 wrote (libredgetpu/ of the test data): their scheduling
// (fence regions, sync counters, FIFO feeds) must never deadlock the virtual Edge TPU
// (docs/chip.md "Scheduling"); looming runs to the end and gives the same bytes twice. Where an
// op class or unit form is still missing, the run stops naming it, never as a deadlock.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "container/tflite_reader.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

testing::Buffers random_inputs(const container::Executable& exe) {
  std::mt19937 generator(16);
  testing::Buffers inputs;
  for (const auto& layer : exe.input_layers) {
    auto& bytes = inputs[layer.name];
    bytes.resize(static_cast<size_t>(layer.size_bytes));
    for (auto& b : bytes) b = static_cast<uint8_t>(generator());
  }
  return inputs;
}

TEST(Compiler16ProgramsOnTheChip, NoneDeadlocks) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const char* model : {"bright_16x16", "bright_64x64", "color_red_64x64", "color_green_64x64",
                            "color_blue_64x64", "looming_64x64_3x3"}) {
    SCOPED_TRACE(model);
    const auto compiled = container::read_edgetpu_model_file(
        data / "libredgetpu" / (std::string(model) + "_edgetpu.tflite"));
    const auto exes = testing::executables_of(compiled);
    ASSERT_NE(exes.execution, nullptr);
    VirtualEdgeTpu chip;
    std::string message;
    try {
      if (exes.caching) testing::run_executable(chip, *exes.caching, {});
      testing::run_executable(chip, *exes.execution, random_inputs(*exes.execution));
    } catch (const Error& e) {
      message = e.what();
    }
    EXPECT_EQ(message.find("deadlock"), std::string::npos) << message;
  }
}

TEST(Compiler16ProgramsOnTheChip, LoomingRunsToTheEndTwiceIdentically) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto compiled =
      container::read_edgetpu_model_file(data / "libredgetpu/looming_64x64_3x3_edgetpu.tflite");
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  const auto inputs = random_inputs(*exes.execution);
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  const auto first = testing::run_executable(chip, *exes.execution, inputs);
  const auto second = testing::run_executable(chip, *exes.execution, inputs);
  EXPECT_EQ(chip.fault(), "");
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first, second);
}

}  // namespace
}  // namespace tinycoral::chip
