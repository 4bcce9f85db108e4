// Acceptance: Google's compiled DeepLab v3 run as a user runs it (the reference interpreter with
// the runtime's Edge TPU delegate on the virtual stick, the CPU operators after the Edge TPU part
// in `edgetpu` rounding) gives the CPU twin's label map in every one of its 513 x 513 labels, on
// Google's segmentation test image.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

std::vector<int64_t> labels_of(const std::filesystem::path& file,
                               const host::InterpreterOptions& options,
                               const std::filesystem::path& image) {
  host::Interpreter interpreter(container::read_tflite_file(file), options);
  const auto in = interpreter.input(0);
  const std::vector<int32_t> shape(in.shape().begin(), in.shape().end());
  interpreter.set_input(0, host::image_to_input(host::read_image(image), shape, in.type(),
                                                host::ResizeMode::kNone, {}));
  interpreter.invoke();
  const auto bytes = interpreter.output_bytes(0);
  std::vector<int64_t> labels(bytes.size() / sizeof(int64_t));
  std::memcpy(labels.data(), bytes.data(), labels.size() * sizeof(int64_t));
  return labels;
}

void expect_labels_equal_the_twin(const std::string& model) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto image = data / "images" / "bird_segmentation.bmp";
  host::InterpreterOptions cpu;
  cpu.rounding = host::Rounding::kEdgeTpu;
  const auto want = labels_of(data / (model + ".tflite"), cpu, image);

  host::InterpreterOptions stick = cpu;
  add_edgetpu_delegate(stick.delegates, open_virtual_edgetpu());
  const auto got = labels_of(data / (model + "_edgetpu.tflite"), stick, image);

  ASSERT_EQ(got.size(), size_t{513} * 513);
  ASSERT_EQ(got.size(), want.size());
  size_t equal = 0;
  for (size_t i = 0; i < got.size(); ++i) equal += got[i] == want[i];
  EXPECT_EQ(equal, got.size());
}

TEST(GoogleDeepLabThroughTheVirtualStick, Gen2021LabelsEqualTheTwin) {
  expect_labels_equal_the_twin("gen2021/deeplabv3_mnv2_dm05_pascal_quant");
}

TEST(GoogleDeepLabThroughTheVirtualStick, Gen2020LabelsEqualTheTwin) {
  expect_labels_equal_the_twin("gen2020/deeplabv3_mnv2_dm05_pascal_quant");
}

}  // namespace
}  // namespace tinycoral::runtime
