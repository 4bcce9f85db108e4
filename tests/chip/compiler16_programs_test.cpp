// Programs that edgetpu_compiler 16.0 wrote (libredgetpu/ of the test data): their scheduling
// (fence regions, sync counters, FIFO feeds) must never deadlock the virtual Edge TPU
// (docs/chip.md "Scheduling"); every program equals its CPU twin in every byte: the per-channel
// dense and gabor layers (docs/chip_ops.md "Per-channel requantization"), looming and the on-tile
// softmax programs (bright_*, color_*). Where an op class or unit form is missing, a run stops
// naming it, never as a deadlock.
#include <gtest/gtest.h>

#include <filesystem>
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

// Runs libredgetpu/`model`_edgetpu.tflite on `images` random inputs (fixed seed), two inferences
// each on one chip, and demands every output byte equal to the CPU twin's in `edgetpu` rounding.
// Signed outputs leave the chip with the most significant bit flipped, as the host's runtime
// undoes (driver.md 5.4).
void expect_every_byte_of_the_twin(const std::filesystem::path& data, const std::string& model,
                                   int images) {
  const auto dir = data / "libredgetpu";
  const auto compiled = container::read_edgetpu_model_file(dir / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_EQ(exes.execution->input_layers.size(), 1u);
  ASSERT_EQ(exes.execution->output_layers.size(), 1u);
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(container::read_tflite_file(dir / (model + ".tflite")), options);
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  const auto& out_layer = exes.execution->output_layers[0];
  const uint8_t flip = container::data_type_is_signed_fixed(out_layer.data_type) ? 0x80 : 0;
  for (int image = 0; image < images; ++image) {
    SCOPED_TRACE(image);
    const auto inputs = testing::random_inputs(*exes.execution, 100 + static_cast<uint32_t>(image));
    cpu.set_input(0, inputs.begin()->second);
    cpu.invoke();
    const auto out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(out.begin(), out.end());
    for (int inference = 0; inference < 2; ++inference) {
      auto got = testing::detile(
          out_layer, testing::run_executable(chip, *exes.execution, inputs).at(out_layer.name));
      for (auto& b : got) b ^= flip;
      EXPECT_EQ(got, want) << model << " inference " << inference;
    }
  }
  EXPECT_EQ(chip.fault(), "");
}

// The on-tile softmax (docs/chip_ops.md 6.1, 6.2: maximum, shift, subtraction, exponentials, sum
// and reciprocal square root, square, pack, probabilities) and the two FULLY_CONNECTED behind it:
// every output byte of bright_16x16 is the twin's.
TEST(Compiler16ProgramsOnTheChip, Bright16x16EqualsItsTwinInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "bright_16x16", 8);
}

// The 64x64 softmax programs: the same classes over 4096 positions on 16 tiles, then the
// 4096-input FULLY_CONNECTED (dp 2 cfg0 0x65, two reduced loops). bright over the image itself,
// the colour filters over a 1x1 conv's scores.
TEST(Compiler16ProgramsOnTheChip, Bright64x64EqualsItsTwinInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "bright_64x64", 4);
}

TEST(Compiler16ProgramsOnTheChip, ColorFiltersEqualTheirTwinsInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (const char* model : {"color_red_64x64", "color_green_64x64", "color_blue_64x64"})
    expect_every_byte_of_the_twin(data, model, 4);
}

// Every output byte equals the CPU twin's in `edgetpu` rounding, on random images (fixed seeds),
// and the second inference on the same chip equals the first.
TEST(Compiler16ProgramsOnTheChip, LoomingEqualsItsTwinInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "looming_64x64_3x3", 3);
}

TEST(PerChannelProgramsOnTheChip, Dense256) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "dense_256", 2);
}

TEST(PerChannelProgramsOnTheChip, Dense512) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "dense_512", 2);
}

TEST(PerChannelProgramsOnTheChip, Gabor7x7Depthwise) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "gabor_64x64_7k_4o_2s", 2);
}

// The same depthwise, then a 4x4 AVERAGE_POOL_2D whose relay writes 32-byte rows (tile_units.cpp).
TEST(PerChannelProgramsOnTheChip, Gabor7x7DepthwiseThenAveragePool) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_every_byte_of_the_twin(data, "gabor_64x64_p4", 2);
}

}  // namespace
}  // namespace tinycoral::chip
