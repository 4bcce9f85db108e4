// Correct by simulation: colour trackers (QUANTIZE -> 1x1 CONV_2D 3 -> 1 with ReLU -> RESHAPE ->
// SOFTMAX -> FULLY_CONNECTED x, y -> CONCATENATION, libredgetpu's color_*_64x64) compiled into one
// program (the conv chain's, its output handed over the ring into the softmax's tiles where that
// fits, else through the host's scratch buffer), run the way users run it (the host interpreter
// with the edgetpu-custom-op delegate on the virtual Edge TPU, which serves the program's scratch
// requests) and compared with the CPU twin in `edgetpu` rounding: both output bytes equal on
// several images, first and second inference.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "support/compiled_twin.h"
#include "support/conv_parameters.h"
#include "support/testdata.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::TensorType;
using testing::twin_tensor;
using twins::le32;

// A colour tracker twin as TensorFlow's converter writes libredgetpu's: a uint8 H x W x 3 image,
// one filter pixel (one positive channel weight, two negative), ReLU, the soft-argmax over the
// H W filter outputs and x, y weights; random scales, zero points and weights. `also_positive`:
// a mask of further channels with positive weights (cyan, magenta, yellow, white trackers).
container::Model colour_twin(int h, int w, std::mt19937& random, int also_positive = 0) {
  const int n = h * w;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float sx = 0.5f + unit(random);
  const int x_zp = static_cast<int>(random() % 64);
  const float sw = 0.004f + 0.01f * unit(random);
  const int chosen = static_cast<int>(random() % 3);
  std::vector<int8_t> filter(3);
  for (int c = 0; c < 3; ++c)
    filter[size_t(c)] = static_cast<int8_t>(
        c == chosen || (also_positive >> c & 1) ? 64 + random() % 64 : -(random() % 64));
  // The filter's output spreads over most of its range for a strong colour.
  const float sc = sx * sw * 127.0f * 255.0f / (120.0f + 135.0f * unit(random));
  const int32_t bias = static_cast<int32_t>(random() % 2001) - 1000;
  const float sfc[2] = {0.02f + 0.1f * unit(random), 0.02f + 0.1f * unit(random)};
  const float sy = std::max(sfc[0], sfc[1]) * 127.0f / 100.0f;
  const int y_zp = static_cast<int>(random() % 61) - 30;

  container::Model m;
  m.description = "colour twin";
  m.operator_codes = {{114, "", 1}, {3, "", 1}, {22, "", 1}, {25, "", 1}, {9, "", 1}, {2, "", 1}};
  container::Buffer shape{le32({1, n})}, weights, bias_buf{le32({bias})}, wx, wy;
  for (int8_t v : filter) weights.data.push_back(static_cast<uint8_t>(v));
  for (container::Buffer* b : {&wx, &wy}) {
    b->data.resize(static_cast<size_t>(n));
    for (auto& v : b->data) v = static_cast<uint8_t>(static_cast<int>(random() % 255) - 127);
  }
  m.buffers = {{}, shape, weights, bias_buf, wx, wy};
  container::Subgraph g;
  g.tensors = {twin_tensor("image", TensorType::kUInt8, {1, h, w, 3}, {sx}, {x_zp}),    // 0
               twin_tensor("shape", TensorType::kInt32, {2}, {}, {}, 1),                // 1
               twin_tensor("filter", TensorType::kInt8, {1, 1, 1, 3}, {sw}, {0}, 2),    // 2
               twin_tensor("bias", TensorType::kInt32, {1}, {sx * sw}, {0}, 3),         // 3
               twin_tensor("wx", TensorType::kInt8, {1, n}, {sfc[0]}, {0}, 4),          // 4
               twin_tensor("wy", TensorType::kInt8, {1, n}, {sfc[1]}, {0}, 5),          // 5
               twin_tensor("q", TensorType::kInt8, {1, h, w, 3}, {sx}, {x_zp - 128}),   // 6
               twin_tensor("filtered", TensorType::kInt8, {1, h, w, 1}, {sc}, {-128}),  // 7
               twin_tensor("flat", TensorType::kInt8, {1, n}, {sc}, {-128}),            // 8
               twin_tensor("p", TensorType::kInt8, {1, n}, {1.0f / 256}, {-128}),       // 9
               twin_tensor("fx", TensorType::kInt8, {1, 1}, {sy}, {y_zp}),              // 10
               twin_tensor("fy", TensorType::kInt8, {1, 1}, {sy}, {y_zp}),              // 11
               twin_tensor("xy", TensorType::kInt8, {1, 2}, {sy}, {y_zp})};             // 12
  auto op = [](uint32_t code, std::vector<int32_t> in, std::vector<int32_t> out,
               container::BuiltinOptions options = {}, uint8_t type = 0) {
    container::Operator o;
    o.opcode_index = code;
    o.inputs = std::move(in);
    o.outputs = std::move(out);
    o.options = std::move(options);
    o.builtin_options_type = type;
    return o;
  };
  container::Conv2DOptions conv;
  conv.padding = container::Padding::kValid;
  conv.activation = container::Activation::kRelu;
  container::ConcatenationOptions concat;
  concat.axis = 1;
  g.operators = {op(0, {0}, {6}),
                 op(1, {6, 2, 3}, {7}, conv, 1),
                 op(2, {7, 1}, {8}, container::ReshapeOptions{{1, n}}, 17),
                 op(3, {8}, {9}, container::SoftmaxOptions{1.0f}, 9),
                 op(4, {9, 4, -1}, {10}, container::FullyConnectedOptions{}, 8),
                 op(4, {9, 5, -1}, {11}, container::FullyConnectedOptions{}, 8),
                 op(5, {10, 11}, {12}, concat, 10)};
  g.inputs = {0};
  g.outputs = {12};
  m.subgraphs.push_back(std::move(g));
  return m;
}

// Images of dim colours with a few bright spots of every colour, so that the filter's outputs
// are neither all zero nor one-hot.
std::vector<uint8_t> colour_image(int h, int w, std::mt19937& random) {
  std::vector<uint8_t> x(static_cast<size_t>(h) * w * 3);
  for (auto& b : x) b = static_cast<uint8_t>(random() % 48);
  for (int spot = 0; spot < 6; ++spot) {
    const size_t at = random() % (static_cast<size_t>(h) * w);
    for (size_t c = 0; c < 3; ++c) x[3 * at + c] = static_cast<uint8_t>(random());
  }
  return x;
}

// Compiles `twin` (every operator must map), runs it through the runtime on the virtual Edge TPU
// and demands the CPU twin's bytes on `images` images, two inferences each.
void expect_runtime_equals_cpu(const container::Model& twin, int images, std::mt19937& random) {
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  for (const OpDecision& d : r.partition.decisions) ASSERT_TRUE(d.mapped) << d.reason;
  const auto& image = twin.subgraphs.at(0).tensors.at(0);
  const int h = image.shape.at(1), w = image.shape.at(2);
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  host::Interpreter tpu = testing::virtual_edgetpu_interpreter(container::read_tflite(r.tflite));
  for (int i = 0; i < images; ++i) {
    const std::vector<uint8_t> x = colour_image(h, w, random);
    cpu.set_input(0, x);
    cpu.invoke();
    const auto out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(out.begin(), out.end());
    ASSERT_EQ(want.size(), 2u);
    for (int inference = 0; inference < 2; ++inference) {
      tpu.set_input(0, x);
      tpu.invoke();
      const auto got = tpu.output_bytes(0);
      EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.end()), want)
          << "image " << i << " inference " << inference;
    }
  }
}

TEST(ColourTrackersOnTheVirtualEdgeTpu, LibredgetpuTwinsEqualTheCpuReferenceInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::mt19937 random(11);
  for (const char* colour : {"red", "green", "blue"}) {
    SCOPED_TRACE(colour);
    const container::Model twin = container::read_tflite_file(
        dir / "libredgetpu" / (std::string("color_") + colour + "_64x64.tflite"));
    expect_runtime_equals_cpu(twin, 3, random);
  }
}

// At 64 x 64 the conv's two bands go over the ring into the softmax's 16 pieces: no scratch
// buffer, no device-requested DMA (the hints alone run the program to its end), and the stick
// sends back only the output.
TEST(ColourTrackersOnTheVirtualEdgeTpu, SixtyFourSquareKeepsTheConvOutputOnTheChip) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const container::Model twin =
      container::read_tflite_file(dir / "libredgetpu" / "color_red_64x64.tflite");
  const CompileResult r = compile_model(container::write_tflite(twin));
  const container::EdgeTpuModel model = container::read_edgetpu_model(r.tflite);
  const chip::testing::PackageExecutables exes = chip::testing::executables_of(model);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_NE(exes.caching, nullptr);
  EXPECT_EQ(exes.execution->scratch_size_bytes, 0);
  EXPECT_TRUE(exes.execution->dma_hints.fully_deterministic);

  std::mt19937 random(3);
  const std::vector<uint8_t> x = colour_image(64, 64, random);
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  cpu.set_input(0, x);
  cpu.invoke();
  const auto want = cpu.output_bytes(0);
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, *exes.caching, {});
  const uint64_t out_before = chip.stats().host_out_bytes;
  const container::Layer& out = exes.execution->output_layers.at(0);
  const auto raw = chip::testing::run_executable(chip, *exes.execution,
                                                 {{exes.execution->input_layers.at(0).name, x}});
  EXPECT_EQ(chip.fault(), "");
  EXPECT_EQ(chip.stats().programs_completed, 2u);
  EXPECT_EQ(chip.stats().host_out_bytes - out_before, uint64_t(out.size_bytes));
  std::vector<uint8_t> got = chip::testing::detile(out, raw.at(out.name));
  // (A signed output leaves the chip as uint8 with the zero point + 128: the host flips bit 7.)
  if (out.data_type == container::DataType::kSignedFixedPoint8)
    for (uint8_t& b : got) b ^= 0x80u;
  EXPECT_EQ(std::vector<uint8_t>(got.begin(), got.begin() + 2),
            std::vector<uint8_t>(want.begin(), want.end()));
}

TEST(ColourTrackersOnTheVirtualEdgeTpu, RandomTwinsOfOtherSizesEqualTheCpuReference) {
  std::mt19937 random(5);
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{{8, 8},
                                                             {16, 16},
                                                             {16, 32},
                                                             {32, 32},
                                                             {32, 64},
                                                             {64, 64},
                                                             {64, 128},
                                                             {96, 128},
                                                             {128, 64},
                                                             {4, 16},
                                                             {8, 32},
                                                             {16, 64}}) {
    SCOPED_TRACE(std::to_string(h) + " x " + std::to_string(w));
    expect_runtime_equals_cpu(colour_twin(h, w, random), 2, random);
  }
}

// The hold-out's colour trackers are 128 x 128 (N = 16384): both FULLY_CONNECTED's weights no
// longer fit tile 0 above the chain, so each is cached in three pieces on free tiles and streamed
// piece after piece; 128 x 96 and 64 x 256 split in other ways (docs/compiler.md). Filters with
// two or three positive channels (cyan, magenta, yellow, white) at 128 x 128 and 64 x 64.
TEST(ColourTrackersOnTheVirtualEdgeTpu, LargestSizesStreamTheirWeightsAndEqualTheCpuReference) {
  std::mt19937 random(7);
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{{128, 128}, {128, 96}, {64, 256}}) {
    SCOPED_TRACE(std::to_string(h) + " x " + std::to_string(w));
    expect_runtime_equals_cpu(colour_twin(h, w, random), 3, random);
  }
  for (const int positive : {3, 5, 6, 7}) {
    for (const int size : {64, 128}) {
      SCOPED_TRACE(std::to_string(size) + ", positive channels " + std::to_string(positive));
      expect_runtime_equals_cpu(colour_twin(size, size, random, positive), 2, random);
    }
  }
}

}  // namespace
}  // namespace tinycoral::compiler
