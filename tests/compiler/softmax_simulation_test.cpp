// Correct by simulation: soft-argmax layers (QUANTIZE -> RESHAPE -> SOFTMAX -> two FULLY_CONNECTED
// with one output each -> CONCATENATION, libredgetpu's bright spot trackers) of every size the
// softmax generator covers, with random quantizations and weights, compiled by our compiler, run
// on the virtual Edge TPU and compared with the CPU reference in `edgetpu` rounding: every output
// byte equal on random images, first and second inference (parameters resident).
#include <gtest/gtest.h>

#include <random>
#include <tuple>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "host/rounding.h"
#include "support/compiled_twin.h"
#include "support/conv_parameters.h"
#include "support/sanitizers.h"
#include "support/testdata.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::TensorType;
using testing::twin_tensor;

// The CPU twin as TensorFlow's converter writes libredgetpu's bright_HxW: a uint8 H x W image,
// flattened, SOFTMAX (output 1/256, -128), x and y weights, int8 [1, 2] out.
container::Model softmax_twin(int h, int w, std::mt19937& random) {
  const int n = h * w;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float sx = 0.02f + 0.2f * unit(random);
  const int x_zp = static_cast<int>(random() % 128);
  const float sw[2] = {0.02f + 0.1f * unit(random), 0.02f + 0.1f * unit(random)};
  // The weighted sums lie within 127 s_w: spread them over most of the int8 range.
  const float sy = std::max(sw[0], sw[1]) * 127.0f / 100.0f;
  const int y_zp = static_cast<int>(random() % 61) - 30;
  container::Buffer shape{twins::le32({1, n})}, wx, wy;
  for (container::Buffer* b : {&wx, &wy}) {
    b->data.resize(static_cast<size_t>(n));
    for (auto& v : b->data) v = static_cast<uint8_t>(static_cast<int>(random() % 255) - 127);
  }
  container::Model m;
  m.description = "softmax twin";
  m.operator_codes = {{114, "", 1}, {22, "", 1}, {25, "", 1}, {9, "", 1}, {2, "", 1}};
  m.buffers = {{}, shape, wx, wy};
  container::Subgraph g;
  g.tensors = {twin_tensor("image", TensorType::kUInt8, {1, h, w, 1}, {sx}, {x_zp}),
               twin_tensor("shape", TensorType::kInt32, {2}, {}, {}, 1),
               twin_tensor("wx", TensorType::kInt8, {1, n}, {sw[0]}, {0}, 2),
               twin_tensor("wy", TensorType::kInt8, {1, n}, {sw[1]}, {0}, 3),
               twin_tensor("q", TensorType::kInt8, {1, h, w, 1}, {sx}, {x_zp - 128}),
               twin_tensor("flat", TensorType::kInt8, {1, n}, {sx}, {x_zp - 128}),
               twin_tensor("p", TensorType::kInt8, {1, n}, {1.0f / 256}, {-128}),
               twin_tensor("fx", TensorType::kInt8, {1, 1}, {sy}, {y_zp}),
               twin_tensor("fy", TensorType::kInt8, {1, 1}, {sy}, {y_zp}),
               twin_tensor("xy", TensorType::kInt8, {1, 2}, {sy}, {y_zp})};
  container::Operator q, reshape, softmax, fx, fy, concat;
  q.opcode_index = 0;
  q.inputs = {0};
  q.outputs = {4};
  reshape.opcode_index = 1;
  reshape.inputs = {4, 1};
  reshape.outputs = {5};
  reshape.builtin_options_type = 17;
  reshape.options = container::ReshapeOptions{{1, n}};
  softmax.opcode_index = 2;
  softmax.inputs = {5};
  softmax.outputs = {6};
  softmax.builtin_options_type = 9;
  softmax.options = container::SoftmaxOptions{1.0f};
  for (container::Operator* fc : {&fx, &fy}) {
    fc->opcode_index = 3;
    fc->builtin_options_type = 8;
    fc->options = container::FullyConnectedOptions{};
  }
  fx.inputs = {6, 2, -1};
  fx.outputs = {7};
  fy.inputs = {6, 3, -1};
  fy.outputs = {8};
  concat.opcode_index = 4;
  concat.inputs = {7, 8};
  concat.outputs = {9};
  concat.builtin_options_type = 10;
  container::ConcatenationOptions co;
  co.axis = 1;
  concat.options = co;
  g.operators = {q, reshape, softmax, fx, fy, concat};
  g.inputs = {0};
  g.outputs = {9};
  m.subgraphs.push_back(std::move(g));
  return m;
}

// Under the sanitizers (ten times slower) each bright-spot image after the first runs once: every
// inference reads every weight whichever spot is bright, so their second inferences take the
// first image's path again (140 inferences were 23 s there); the normal build runs each twice.
#ifdef TINYCORAL_ASAN
constexpr bool kLaterSpotsOnce = true;
#else
constexpr bool kLaterSpotsOnce = false;
#endif

// Compiles `twin`, runs it on the virtual Edge TPU (caching, then 3 images x 2 inferences) and
// demands both output bytes equal to the CPU reference's. `spread`: the test chose the output
// quantization, so the outputs must not saturate (equality would be cheap); libredgetpu's own
// twins saturate when the brightest spot is near the border.
// `spots`: when not empty, image i is dark with one bright position spots[i] (so the softmax
// is almost one-hot there and the output reads that position's x and y weights).
void expect_program_equals_twin(const container::Model& twin, std::mt19937& random, bool spread,
                                const std::vector<size_t>& spots = {}) {
  const auto& image_tensor = twin.subgraphs.at(0).tensors.at(0);
  const size_t n = static_cast<size_t>(image_tensor.shape.at(1) * image_tensor.shape.at(2));
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1);
  for (const OpDecision& d : compiled.result.partition.decisions) ASSERT_TRUE(d.mapped) << d.reason;
  ASSERT_NE(compiled.exes.execution, nullptr);
  ASSERT_NE(compiled.exes.caching, nullptr);
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  const int images = spots.empty() ? 3 : static_cast<int>(spots.size());
  for (int image = 0; image < images; ++image) {
    // Images with a few bright spots, so that the softmax is neither flat nor one-hot.
    std::vector<uint8_t> x(n);
    for (auto& b : x) b = static_cast<uint8_t>(random() % 64);
    for (int spot = 0; spot < 3; ++spot) x[random() % x.size()] = static_cast<uint8_t>(random());
    if (!spots.empty()) {
      std::fill(x.begin(), x.end(), uint8_t{0});
      x.at(spots[size_t(image)]) = 255;
    }
    cpu.set_input(0, x);
    cpu.invoke();
    const auto out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(out.begin(), out.end());
    ASSERT_EQ(want.size(), 2u);
    for (uint8_t v : want)
      EXPECT_TRUE(!spread || (v != 0x80 && v != 0x7f)) << "the test's quantization saturates";
    const int inferences = kLaterSpotsOnce && !spots.empty() && image > 0 ? 1 : 2;
    for (int inference = 0; inference < inferences; ++inference) {
      std::vector<uint8_t> got = compiled.infer(chip, {{image_tensor.name, x}});
      for (auto& b : got)
        b ^= 0x80;  // int8 (SIGNED_FIXED_POINT8) outputs leave with the MSB flipped
      EXPECT_EQ(got, want) << "image " << image << " inference " << inference;
    }
  }
  EXPECT_EQ(chip.fault(), "");
}

void expect_equal_to_cpu(int h, int w, std::mt19937& random) {
  SCOPED_TRACE(std::to_string(h) + " x " + std::to_string(w));
  expect_program_equals_twin(softmax_twin(h, w, random), random, true);
}

// Our compile of libredgetpu's own twins (byte-identical to Google's, google_identity_test).
TEST(SoftmaxOnTheVirtualEdgeTpu, BrightTwinsEqualTheCpuReferenceInEveryByte) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::mt19937 random(4);
  for (const char* name : {"bright_16x16", "bright_64x64"}) {
    SCOPED_TRACE(name);
    expect_program_equals_twin(
        container::read_tflite_file(dir / "libredgetpu" / (std::string(name) + ".tflite")), random,
        false);
  }
}

TEST(SoftmaxOnTheVirtualEdgeTpu, EverySizeEqualsTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261204);
  for (const auto& [h, w] : std::vector<std::pair<int, int>>{{16, 16},
                                                             {8, 8},
                                                             {8, 16},
                                                             {12, 16},
                                                             {64, 64},
                                                             {32, 128},
                                                             {32, 32},
                                                             {16, 32},
                                                             {24, 32},
                                                             {32, 64},
                                                             {64, 128},
                                                             {128, 128}})
    expect_equal_to_cpu(h, w, random);
}

// From N = 8192 the weights are streamed from other tiles in even pieces of at most 8160 weights
// (N = 8192: two per FULLY_CONNECTED, 16384: three): a bright spot on the first two positions and
// on one position of each of the last 12 rows (4 weights a row) of every piece, so that a weight
// lost, misplaced or overwritten (as tile 0's FIFO rows once did at 8192, and the gather rows at
// 0x1fe8 the rows of 2048-row pieces) changes the output.
TEST(SoftmaxOnTheVirtualEdgeTpu, EveryPieceOfStreamedWeightsIsRead) {
  std::mt19937 random(8);
  for (const auto& [h, w, pieces] :
       std::vector<std::tuple<int, int, size_t>>{{64, 128, 2}, {128, 128, 3}}) {
    SCOPED_TRACE(std::to_string(h) + " x " + std::to_string(w));
    const size_t n = size_t(h) * w, rows = n / 4;
    std::vector<size_t> spots;
    for (size_t k = 0, first = 0; k < pieces; ++k) {
      const size_t end = first + rows / pieces + (k < rows % pieces ? 1 : 0);  // rows [first, end)
      spots.push_back(4 * first);
      spots.push_back(4 * first + 1);
      for (size_t r = end - 12; r < end; ++r) spots.push_back(4 * r + r % 4);
      first = end;
    }
    expect_program_equals_twin(softmax_twin(h, w, random), random, false, spots);
  }
}

}  // namespace
}  // namespace tinycoral::compiler
