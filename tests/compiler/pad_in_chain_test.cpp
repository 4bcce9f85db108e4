// Correct by simulation: an explicit PAD inside a conv chain (gen2021 PoseNet's pad_input before
// its first VALID convolution) is folded into the next layer's padding - the chip fills padded
// images with the input zero point, TFLite's quantized PAD writes the same - and the program
// equals the CPU reference in every byte on two inferences; a PAD whose output quantization
// differs from its input's is refused with the reason.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "compiler/compile.h"
#include "container/tflite_writer.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using container::TensorType;
using twins::ConvSpec;

ConvSpec conv(int cout, int k, int stride, bool same, bool depthwise = false,
              Activation act = Activation::kRelu6) {
  ConvSpec s;
  s.cout = cout;
  s.k = k;
  s.stride = stride;
  s.same = same;
  s.depthwise = depthwise;
  s.act = act;
  return s;
}

// The last layer: no activation, so that its outputs spread.
ConvSpec last(int cout, int k) { return conv(cout, k, 1, true, false, Activation::kNone); }

// The conv twin of `specs` on an image of (h + top + bottom) x (w + left + right), whose input
// is the h x w image with a PAD (top, bottom, left, right) before layer `at`. `requantize`: the
// PAD's output gets another zero point (not foldable).
container::Model padded_twin(int h, int w, int cin, const std::array<int, 4>& pad,
                             const std::vector<ConvSpec>& specs, size_t at, std::mt19937& random,
                             bool requantize = false) {
  const int ph = h + pad[0] + pad[1], pw = w + pad[2] + pad[3];
  container::Model m = twins::conv_twin(ph, pw, cin, specs, random);
  container::Subgraph& g = m.subgraphs.at(0);
  // Operator 0 is the QUANTIZE; layer k is operator k + 1 (no ADD, pool or FC in `specs`).
  container::Operator& layer = g.operators.at(at + 1);
  const int x = layer.inputs.at(0);
  container::Tensor unpadded = g.tensors.at(static_cast<size_t>(x));
  if (at == 0) {  // the model's input shrinks to the unpadded image
    g.tensors.at(0).shape = {1, h, w, cin};
    g.tensors.at(1).shape = {1, h, w, cin};
  } else {  // the layer before writes the unpadded image (its output shape must shrink)
    ADD_FAILURE() << "padded_twin pads the input only";
  }
  container::Tensor padded = unpadded;
  padded.name = "padded";
  padded.shape = {1, ph, pw, cin};
  if (requantize) padded.quantization.zero_point[0] += 3;
  const auto pbuf = static_cast<uint32_t>(m.buffers.size());
  container::Buffer paddings;
  paddings.data = twins::le32({0, 0, pad[0], pad[1], pad[2], pad[3], 0, 0});
  m.buffers.push_back(paddings);
  const int padded_index = static_cast<int>(g.tensors.size());
  g.tensors.push_back(padded);
  g.tensors.push_back(testing::twin_tensor("paddings", TensorType::kInt32, {4, 2}, {}, {}, pbuf));
  g.operators.at(at + 1).inputs[0] = padded_index;
  m.operator_codes.push_back({34, "", 1});  // PAD
  container::Operator op;
  op.opcode_index = static_cast<uint32_t>(m.operator_codes.size() - 1);
  op.inputs = {x, padded_index + 1};
  op.outputs = {padded_index};
  g.operators.insert(g.operators.begin() + static_cast<std::ptrdiff_t>(at) + 1, op);
  return m;
}

void expect_equal_to_cpu(int h, int w, int cin, const std::array<int, 4>& pad,
                         const std::vector<ConvSpec>& specs, std::mt19937& random) {
  SCOPED_TRACE(twins::describe(h, w, cin, specs) +
               cat(" after PAD ", pad[0], " ", pad[1], " ", pad[2], " ", pad[3]));
  const container::Model twin = padded_twin(h, w, cin, pad, specs, 0, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(h) * w * cin, random);
  const std::vector<uint8_t> want = testing::reference_output(cpu, x);
  EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
            std::min<size_t>(want.size() / 4, 16));
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  for (int inference = 0; inference < 2; ++inference)
    EXPECT_TRUE(testing::same_bytes(compiled.infer(chip, {{"x", x}}), want))
        << "inference " << inference;
  EXPECT_EQ(chip.fault(), "");
}

TEST(PadInAChainOnTheVirtualEdgeTpu, FoldedPaddingEqualsTheCpuReference) {
  std::mt19937 random(5122026);
  // gen2021 PoseNet's form: PAD one row and column at the end, then a VALID 3x3 stride 2 conv.
  expect_equal_to_cpu(16, 16, 8, {0, 1, 0, 1}, {conv(16, 3, 2, false), last(8, 1)}, random);
  // The same on 22 x 3 rows (66 bytes, repacked on the chip into 24 pixels): the PAD's column
  // is the first past the host's row (its first two bytes written by the repack's last op, the
  // third by the first image's fill).
  expect_equal_to_cpu(17, 22, 3, {0, 1, 0, 1}, {conv(16, 3, 2, false), last(8, 1)}, random);
  // Uneven padding on every side before a SAME conv (both paddings add up), and before a
  // depthwise layer; a larger image in row bands.
  expect_equal_to_cpu(12, 20, 4, {2, 1, 0, 3}, {conv(12, 3, 1, true), last(8, 1)}, random);
  expect_equal_to_cpu(10, 10, 8, {1, 1, 1, 1}, {conv(8, 3, 1, false, true), last(8, 1)}, random);
  expect_equal_to_cpu(40, 40, 4, {1, 2, 1, 2}, {conv(16, 5, 2, false), last(16, 3)}, random);
}

TEST(PadInAChainOnTheVirtualEdgeTpu, APadThatRequantizesIsRefused) {
  std::mt19937 random(7);
  const container::Model twin =
      padded_twin(8, 8, 4, {1, 1, 1, 1}, {conv(8, 3, 1, false), last(8, 1)}, 0, random,
                  /*requantize=*/true);
  const CompileResult r = compile_model(container::write_tflite(twin));
  EXPECT_EQ(r.edgetpu_subgraphs, 0);
  ASSERT_FALSE(r.rows.empty());
  bool named = false;
  for (const auto& row : r.rows)
    named =
        named || row.status.find("PAD in a chain whose output quantization") != std::string::npos;
  EXPECT_TRUE(named);
}

}  // namespace
}  // namespace tinycoral::compiler
