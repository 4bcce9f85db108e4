// Programs whose DMA hints are not fully deterministic, through the public runtime path: Google's
// gen2021 Keras LSTM writes each time step's hidden state to the host's scratch buffer and asks
// for the sequence back on descriptors the device reports itself (docs/driver.md "Device-requested
// DMAs"). The runtime serves them over the virtual stick's wire protocol; the outputs must be what
// a bare virtual Edge TPU gives when the test plays that host (tests/chip/lstm_host.h), and the
// LSTM's state outputs must come back into its state inputs as libedgetpu writes them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chip/lstm_host.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

constexpr const char* kModel = "gen2021/keras_lstm_mnist_ptq_edgetpu.tflite";

std::vector<uint8_t> mnist_nine(const std::filesystem::path& data) {
  return host::image_to_input(host::read_image(data / "images" / "mnist_nine.bmp"), {1, 28, 28},
                              container::TensorType::kUInt8, host::ResizeMode::kNone, {});
}

TEST(DeviceRequestedDmas, KerasLstmThroughTheRuntimeEqualsTheChipWithItsOwnHost) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto image = mnist_nine(data);

  // The reference: a bare chip, the test answering the program's scratch requests itself; the
  // second inference starts from the first's final states (20 hidden bytes, the padding zero, as
  // the runtime's padded input buffer holds them; 40 bytes of cell state).
  const auto compiled = container::read_edgetpu_model_file(data / kModel);
  const auto exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  chip::VirtualEdgeTpu bare;
  if (exes.caching) chip::testing::run_executable(bare, *exes.caching, {});
  const auto first = chip::testing::lstm_inference(bare, *exes.execution, image,
                                                   chip::testing::lstm_initial_hidden(),
                                                   chip::testing::lstm_initial_cell());
  ASSERT_EQ(first.size(), size_t{chip::testing::kLstmSteps + 3});
  std::vector<uint8_t> hidden(first[29].begin(), first[29].begin() + 20);
  hidden.resize(24, 0);
  const auto second =
      chip::testing::lstm_inference(bare, *exes.execution, image, hidden, first[30]);
  ASSERT_EQ(second.size(), first.size());

  // The runtime: the interpreter with the Edge TPU delegate on the virtual stick.
  host::InterpreterOptions options;
  add_edgetpu_delegate(options.delegates, open_virtual_edgetpu());
  host::Interpreter interpreter(container::read_tflite_file(data / kModel), options);
  interpreter.set_input(0, image);
  auto scores = [&] {
    interpreter.invoke();
    const auto out = interpreter.output_bytes(0);
    return std::vector<uint8_t>(out.begin(), out.end());
  };
  const std::vector<uint8_t> want_first(first[28].begin(), first[28].begin() + 10);
  const std::vector<uint8_t> want_second(second[28].begin(), second[28].begin() + 10);
  ASSERT_NE(want_first, want_second) << "the states must matter for this check to mean anything";
  EXPECT_EQ(scores(), want_first);
  EXPECT_EQ(scores(), want_second) << "the state outputs did not reach the state inputs";
  interpreter.reset_variables();
  EXPECT_EQ(scores(), want_first);
  // Google's G021: class 9 in the top 3 with at least 0.7 (179.2 / 256).
  EXPECT_EQ(std::max_element(want_first.begin(), want_first.end()) - want_first.begin(), 9);
  EXPECT_GE(want_first[9], 180);
}

TEST(DeviceRequestedDmas, CliRunsTheKerasLstmOnTheVirtualStick) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto r =
      testing::run_cli("run '" + (data / kModel).string() + "' --image '" +
                       (data / "images/mnist_nine.bmp").string() + "' --device sim --top 3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["top"][0]["index"], 9);
  // The score the bare chip gives (GoogleLstmOnTheChip: 194 / 256, docs/chip.md "Status").
  EXPECT_DOUBLE_EQ(j["top"][0]["score"].get<double>(), 194.0 / 256);
  // The scratch round trip crossed the link: 28 hidden states of 24 bytes out and back in.
  EXPECT_GE(j["modeled_stick_ms"]["bytes_device_to_host"].get<uint64_t>(), 28u * 24 + 16);
}

}  // namespace
}  // namespace tinycoral::runtime
