// Acceptance: Google's gen2020 PoseNet program (three output layers, a 353x481 input spread over 16
// tiles in overlapping rows, the 7-dimension reformat, requantized output halves) on the virtual
// Edge TPU against the CPU twin's tensors of the same meaning, in `edgetpu` rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Prepares posenet_test_image.bmp for `cpu`'s input as the gen2020 suite did, runs the CPU
// reference on it and returns the input bytes.
std::vector<uint8_t> run_on_test_image(const std::filesystem::path& data, host::Interpreter& cpu) {
  const auto in = cpu.input(0);
  const std::vector<int32_t> shape(in.shape().begin(), in.shape().end());
  auto bytes = host::image_to_input(host::read_image(data / "images" / "posenet_test_image.bmp"),
                                    shape, in.type(), host::ResizeMode::kBilinearLegacy, {});
  cpu.set_input(0, bytes);
  cpu.invoke();
  return bytes;
}

struct TwinTensor {
  std::vector<uint8_t> bytes;
  float scale = 0;
  int zero_point = 0;
};

TEST(GooglePoseNetOnTheChip, OutputsMatchTheTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const std::string model = "gen2020/posenet_mobilenet_v1_075_353_481_quant_decoder";
  const auto compiled = container::read_edgetpu_model_file(data / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);

  // The twin's conv outputs that the compiled program emits (its PoseNet decoder runs on the CPU).
  const std::vector<std::string> names = {"MobilenetV1/heatmap_2/BiasAdd",
                                          "MobilenetV1/offset_2/BiasAdd", "concat"};
  auto twin_model =
      testing::twin_with_outputs(container::read_tflite_file(data / (model + ".tflite")), names);
  std::vector<TwinTensor> twin(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const auto& sg = twin_model.subgraphs[0];
    const auto& q = sg.tensors.at(static_cast<size_t>(sg.outputs[i])).quantization;
    twin[i].scale = q.scale.at(0);
    twin[i].zero_point = static_cast<int>(q.zero_point.at(0));
  }
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(std::move(twin_model), options);
  const auto bytes = run_on_test_image(data, cpu);
  for (size_t i = 0; i < names.size(); ++i) {
    const auto b = cpu.output_bytes(i);
    twin[i].bytes.assign(b.begin(), b.end());
  }

  const auto second = testing::run_chip_twice(exes, bytes);

  ASSERT_EQ(exes.execution->output_layers.size(), 3u);
  for (const auto& layer : exes.execution->output_layers) {
    const auto got = testing::detile(layer, second.at(layer.name));
    const size_t k = layer.name == "quant_heatmaps"        ? 0
                     : layer.name == "quant_short_offsets" ? 1
                                                           : 2;
    const TwinTensor& want = twin[k];
    ASSERT_EQ(got.size(), want.bytes.size()) << layer.name;
    size_t equal = 0;
    double worst = 0;
    for (size_t e = 0; e < got.size(); ++e) {
      equal += got[e] == want.bytes[e];
      const double chip_value = (got[e] - layer.zero_point) * double{layer.dequantization_factor};
      const double twin_value = (want.bytes[e] - want.zero_point) * double{want.scale};
      worst = std::max(worst, std::abs(chip_value - twin_value));
    }
    if (k < 2) {
      // Same quantization as the twin's tensor: byte for byte.
      EXPECT_EQ(equal, got.size()) << layer.name;
    } else {
      // The compiled model requantizes the two displacement halves through its own intermediate
      // scale into the output's (0.98 vs the twin's concat at 1.39): values within one step of
      // each.
      EXPECT_LE(worst, want.scale + layer.dequantization_factor) << layer.name;
    }
    ::testing::Test::RecordProperty(layer.name + "_equal", static_cast<int>(equal));
  }
}

// gen2021 PoseNet (edgetpu_compiler 16.0, per-channel int8 convolutions, docs/chip_ops.md
// "Per-channel requantization"): its three outputs are the twin's tensors of the same names and
// quantization (the twin requantizes the displacement concat itself), so every byte must match.
TEST(GooglePoseNetOnTheChip, PerChannelGen2021OutputsEqualTheTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const std::string model = "gen2021/posenet_mobilenet_v1_075_353_481_16_quant_decoder";
  const auto compiled = container::read_edgetpu_model_file(data / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_EQ(exes.execution->output_layers.size(), 3u);
  auto twin_model =
      testing::twin_with_outputs(container::read_tflite_file(data / (model + ".tflite")),
                                 testing::output_layer_names(*exes.execution));
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(std::move(twin_model), options);
  const auto bytes = run_on_test_image(data, cpu);

  const auto second = testing::run_chip_twice(exes, bytes);
  for (size_t i = 0; i < exes.execution->output_layers.size(); ++i) {
    const auto& layer = exes.execution->output_layers[i];
    const auto got = testing::detile(layer, second.at(layer.name));
    const auto want = cpu.output_bytes(i);
    ASSERT_EQ(got.size(), want.size()) << layer.name;
    size_t equal = 0;
    for (size_t e = 0; e < got.size(); ++e) equal += got[e] == want[e];
    EXPECT_EQ(equal, got.size()) << layer.name;
  }
}

}  // namespace
}  // namespace tinycoral::chip
