// Acceptance: Google's DeepLab v3 (MobileNet v2 depth 0.5, 513x513, Pascal VOC) programs on the
// virtual Edge TPU, on bird_segmentation.bmp (Google's segmentation test image, fed unchanged),
// against the CPU twin's tensors of the same names in `edgetpu` rounding. The compiled model's
// Edge TPU part ends with the ASPP branch (aspp0, 33x33x256) and the image-pooling branch (average
// pool over 33x33, then a 1x1 conv: 1x1x256); the CPU does the rest (resize, concat, two convs,
// arg max), so these two tensors decide the label map.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Under the sanitizers EveryCompiledModel runs both programs on the virtual stick and checks
// their outputs against the twin the same way (and the Google rows G014 and G023 run them again):
// these tests, about 30 s there, run in the normal build only.
#ifndef TINYCORAL_ASAN
// Runs the program twice on bird_segmentation.bmp (the runs must agree) and checks every output
// layer against the twin's tensor of the same name, byte for byte.
void expect_outputs_equal_the_twin(const std::string& model) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto compiled = container::read_edgetpu_model_file(data / (model + "_edgetpu.tflite"));
  const auto exes = testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_EQ(exes.execution->output_layers.size(), 2u);

  auto twin_model =
      testing::twin_with_outputs(container::read_tflite_file(data / (model + ".tflite")),
                                 testing::output_layer_names(*exes.execution));
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(std::move(twin_model), options);
  const auto in = cpu.input(0);
  const std::vector<int32_t> shape(in.shape().begin(), in.shape().end());
  const auto bytes =
      host::image_to_input(host::read_image(data / "images" / "bird_segmentation.bmp"), shape,
                           in.type(), host::ResizeMode::kNone, {});
  cpu.set_input(0, bytes);
  cpu.invoke();

  const testing::Buffers second = testing::run_chip_twice(exes, bytes);

  for (size_t i = 0; i < exes.execution->output_layers.size(); ++i) {
    const auto& layer = exes.execution->output_layers[i];
    const auto got = testing::detile(layer, second.at(layer.name));
    const auto want = cpu.output_bytes(i);
    ASSERT_EQ(got.size(), want.size()) << layer.name;
    size_t equal = 0;
    for (size_t e = 0; e < got.size(); ++e) equal += got[e] == want[e];
    EXPECT_EQ(equal, got.size()) << layer.name;
    ::testing::Test::RecordProperty(layer.name.substr(0, layer.name.find('/')) + "_equal",
                                    static_cast<int>(equal));
  }
}

// Its image-pooling gather (a wideToNarrow taking 48 of each fill's 64 words, docs/chip.md
// "wideToNarrow") decides the 256 pooled-branch bytes.
TEST(GoogleDeepLabOnTheChip, Gen2021OutputsEqualTheTwin) {
  expect_outputs_equal_the_twin("gen2021/deeplabv3_mnv2_dm05_pascal_quant");
}

// Its image pooling sums rows into signed 16-bit partial sums, moves them north to tile 0 and sums
// those (docs/chip_ops.md "Average pooling in two 16-bit stages").
TEST(GoogleDeepLabOnTheChip, Gen2020OutputsEqualTheTwin) {
  expect_outputs_equal_the_twin("gen2020/deeplabv3_mnv2_dm05_pascal_quant");
}
#endif

}  // namespace
}  // namespace tinycoral::chip
