// Acceptance: Google's gen2021 split_concat program (pure data movement) on the virtual Edge TPU
// gives every output byte of its CPU twin, for random inputs.
#include <gtest/gtest.h>

#include <random>

#include "chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Three inferences on one chip (parameters cached once): state left by one run must not leak into
// the next.
TEST(SplitConcat, EveryOutputByteEqualsTheCpuTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model =
      container::read_edgetpu_model_file(data / "gen2021/split_concat_edgetpu.tflite");
  const auto exes = testing::executables_of(model);
  ASSERT_NE(exes.execution, nullptr);

  host::Interpreter cpu(container::read_tflite_file(data / "gen2021/split_concat.tflite"));
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  std::mt19937 rng(42);
  for (int run = 0; run < 3; ++run) {
    testing::Buffers inputs;
    for (size_t i = 0; i < cpu.num_inputs(); ++i) {
      std::vector<uint8_t> bytes(cpu.input(i).bytes);
      for (auto& b : bytes) b = static_cast<uint8_t>(rng());
      cpu.set_input(i, bytes);
      inputs[cpu.input(i).name()] = bytes;
    }
    cpu.invoke();
    const auto raw = testing::run_executable(chip, *exes.execution, inputs);
    for (size_t j = 0; j < cpu.num_outputs(); ++j) {
      const std::string& name = cpu.output(j).name();
      const container::Layer* layer = nullptr;
      for (const auto& l : exes.execution->output_layers)
        if (l.name == name) layer = &l;
      ASSERT_NE(layer, nullptr) << name;
      const auto got = testing::detile(*layer, raw.at(name));
      const auto want = cpu.output_bytes(j);
      ASSERT_EQ(got.size(), want.size()) << name;
      size_t equal = 0;
      for (size_t k = 0; k < got.size(); ++k) equal += got[k] == want[k];
      EXPECT_EQ(equal, got.size()) << "run " << run << ", " << name << ": " << equal << " of "
                                   << got.size() << " bytes equal";
    }
  }
}

TEST(SplitConcat, RunsToCompletionAndDeliversEveryOutput) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model =
      container::read_edgetpu_model_file(data / "gen2021/split_concat_edgetpu.tflite");
  const auto exes = testing::executables_of(model);
  ASSERT_NE(exes.execution, nullptr);
  testing::Buffers inputs;
  for (const auto& layer : exes.execution->input_layers)
    inputs[layer.name].assign(layer.size_bytes, 0x55);
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  const auto raw = testing::run_executable(chip, *exes.execution, inputs);
  EXPECT_EQ(chip.stats().programs_completed, exes.caching ? 2u : 1u);
  EXPECT_EQ(raw.size(), exes.execution->output_layers.size());
  uint64_t expected_bytes = 0;
  for (const auto& hint : exes.execution->dma_hints.hints)
    if (hint.kind == container::HintKind::kDma && hint.direction == container::Direction::kOutfeed)
      expected_bytes += static_cast<uint64_t>(hint.size_in_bytes);
  EXPECT_EQ(chip.stats().host_out_bytes, expected_bytes);
  EXPECT_EQ(chip.fault(), "");
}

}  // namespace
}  // namespace tinycoral::chip
