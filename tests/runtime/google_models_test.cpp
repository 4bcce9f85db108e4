// Acceptance: Google's compiled programs give identical outputs through the runtime and the virtual
// stick's wire protocol as when their hints are replayed straight into the virtual Edge TPU, and
// the runtime never breaks a protocol rule (the stick reports any violation).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "chip/sim_runner.h"
#include "container/edgetpu_model.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

// Runs the comparison; returns "" when identical, else what differs. Throws SkipReason when the
// virtual Edge TPU cannot run the program on its own.
struct SkipReason {
  std::string why;
};

std::string compare_through_the_stick(const std::filesystem::path& file) {
  const auto model = container::read_edgetpu_model_file(file);
  if (model.edgetpu_ops.empty()) return "no edgetpu-custom-op";
  const PackagePrograms programs = prepare_package(model.edgetpu_ops[0].options.packages.at(0));
  Program& inference = *programs.inference;
  std::mt19937 rng(7);
  for (size_t i = 0; i < inference.num_inputs(); ++i) {
    std::vector<uint8_t> bytes(inference.input_bytes(i));
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    inference.set_input(i, bytes);
  }
  // The reference: the hints replayed directly on a virtual Edge TPU.
  chip::testing::Buffers inputs;
  for (size_t i = 0; i < inference.num_inputs(); ++i)
    inputs[inference.executable().input_layers[i].name] = inference.input_buffers()[i];
  chip::VirtualEdgeTpu direct_chip;
  chip::testing::Buffers want, want_again;
  try {
    if (programs.caching)
      chip::testing::run_executable(direct_chip, programs.caching->executable(), {});
    want = chip::testing::run_executable(direct_chip, inference.executable(), inputs);
    // The parameters stay resident: the second inference runs without the caching program.
    want_again = chip::testing::run_executable(direct_chip, inference.executable(), inputs);
  } catch (const Error& e) {
    throw SkipReason{e.what()};
  }
  // The same through the runtime, the wire protocol and the virtual stick.
  auto chip = std::make_shared<chip::VirtualEdgeTpu>();
  auto tpu = open_virtual_edgetpu({}, chip);
  for (const chip::testing::Buffers* expected_run : {&want, &want_again}) {
    tpu->run(programs.caching, programs.inference);
    for (size_t o = 0; o < inference.num_outputs(); ++o) {
      const auto& layer = inference.executable().output_layers[o];
      const auto& got = inference.output_buffers()[o];
      const auto& expected = expected_run->at(layer.name);
      if (got.size() < expected.size() ||
          !std::equal(expected.begin(), expected.end(), got.begin()))
        return std::string(expected_run == &want ? "first" : "second") + " inference: output " +
               layer.name + " differs";
    }
  }
  return "";
}

// Run the comparison in a child process so that a crash of the virtual chip shows up as this
// test's failure with its signal, not as a dead test binary. The virtual chip runs both programs
// below (tests/chip/google_models_test.cpp), so neither a crash nor "cannot run" is a skip.
void expect_identical_through_the_stick(const std::filesystem::path& file) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    std::string message;
    int code = 0;
    try {
      message = compare_through_the_stick(file);
      code = message.empty() ? 0 : 1;
    } catch (const SkipReason& s) {
      message = s.why;
      code = 2;
    } catch (const std::exception& e) {
      message = e.what();
      code = 1;
    }
    if (::write(fds[1], message.data(), message.size()) < 0) code = 3;
    ::_exit(code);
  }
  ::close(fds[1]);
  std::string message;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;)
    message.append(buffer, size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_FALSE(WIFSIGNALED(status))
      << file.filename() << ": the virtual Edge TPU crashed (signal " << WTERMSIG(status) << ")";
  const int code = WEXITSTATUS(status);
  ASSERT_NE(code, 2) << file.filename() << " does not run on the virtual Edge TPU: " << message;
  EXPECT_EQ(code, 0) << file.filename() << ": " << message;
}

TEST(GoogleModelsThroughTheVirtualStick, SplitConcat) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(data / "gen2021/split_concat_edgetpu.tflite");
}

TEST(GoogleModelsThroughTheVirtualStick, MobileNetV1_025) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(data / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite");
}

TEST(GoogleModelsThroughTheVirtualStick, MobileNetV1_05) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(data / "gen2020/mobilenet_v1_0.5_160_quant_edgetpu.tflite");
}

TEST(GoogleModelsThroughTheVirtualStick, MobileNetV1_10_EmbeddingExtractor) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(
      data / "gen2020/mobilenet_v1_1.0_224_quant_embedding_extractor_edgetpu.tflite");
}

TEST(GoogleModelsThroughTheVirtualStick, MobileNetV2) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(data / "gen2020/mobilenet_v2_1.0_224_quant_edgetpu.tflite");
}

TEST(GoogleModelsThroughTheVirtualStick, SsdSegment0) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_identical_through_the_stick(
      data /
      "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_0_of_4_edgetpu.tflite");
}

}  // namespace
}  // namespace tinycoral::runtime
