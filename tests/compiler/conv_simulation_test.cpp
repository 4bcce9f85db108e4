// Correct by simulation: CONV_2D layers and chains of them with random shapes (H, W, Cin, Cout, k,
// stride, padding) and quantizations, built as CPU twins (QUANTIZE -> int8 CONV_2D ... ->
// QUANTIZE), compiled by our compiler, run on the virtual Edge TPU and compared with the CPU
// reference in `edgetpu` rounding: every output byte equal, on a first and a second inference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using container::TensorType;

struct ConvSpec {
  int cout = 8, k = 3, stride = 1;
  bool same = true, bias = true, per_channel = true;
  Activation act = Activation::kNone;
  // A FULLY_CONNECTED over the whole map instead (k, stride, same unused); `reshape` puts the
  // converter's flattening RESHAPE before it.
  bool fc = false, reshape = true;
};

container::Tensor tensor(const std::string& name, TensorType type, std::vector<int32_t> shape,
                         std::vector<float> scale, std::vector<int64_t> zp, uint32_t buffer = 0) {
  container::Tensor t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  t.buffer = buffer;
  t.quantization.scale = std::move(scale);
  t.quantization.zero_point = std::move(zp);
  return t;
}

std::vector<uint8_t> le32(const std::vector<int32_t>& v) {
  std::vector<uint8_t> out;
  for (int32_t x : v)
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<uint8_t>(static_cast<uint32_t>(x) >> 8 * i));
  return out;
}

// The CPU twin of a chain of CONV_2D layers on an H x W x Cin uint8 image, as TensorFlow's
// converter writes it (int8 inside, QUANTIZE at both ends).
container::Model conv_twin(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                           std::mt19937& random) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  container::Model m;
  m.description = "conv twin";
  m.operator_codes = {{114, "", 1}, {3, "", 3}, {9, "", 5}, {22, "", 1}};
  m.buffers = {{}};
  container::Subgraph g;
  float sx = 0.004f + 0.01f * unit(random);
  int zx = static_cast<int>(random() % 200) + 28;
  g.tensors.push_back(tensor("x", TensorType::kUInt8, {1, h, w, cin}, {sx}, {zx}));
  g.tensors.push_back(tensor("xq", TensorType::kInt8, {1, h, w, cin}, {sx}, {zx - 128}));
  container::Operator q_in;
  q_in.opcode_index = 0;
  q_in.inputs = {0};
  q_in.outputs = {1};
  g.operators.push_back(q_in);
  int x_tensor = 1;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ConvSpec& s = specs[i];
    const int oh = s.fc     ? 1
                   : s.same ? (h + s.stride - 1) / s.stride
                            : (h - s.k + s.stride) / s.stride;
    const int ow = s.fc     ? 1
                   : s.same ? (w + s.stride - 1) / s.stride
                            : (w - s.k + s.stride) / s.stride;
    std::vector<float> sw(static_cast<size_t>(s.per_channel ? s.cout : 1));
    const float boost = s.act == Activation::kRelu6 ? 20.0f : 1.0f;
    float sw_sum = 0;
    for (float& v : sw) sw_sum += v = boost * (0.0004f + 0.001f * unit(random));
    const int kdim = s.fc ? h * w * cin : s.k * s.k * cin;
    const float sy = 3.0f * std::sqrt(static_cast<float>(kdim)) * 74 * 74 * sx *
                     (sw_sum / static_cast<float>(sw.size())) / 127;
    const int zy = static_cast<int>(random() % 100) + 78;
    container::Buffer weights;
    weights.data.resize(static_cast<size_t>(s.cout) * kdim);
    for (auto& b : weights.data) b = static_cast<uint8_t>(static_cast<int>(random() % 255) - 127);
    std::vector<int32_t> bias(static_cast<size_t>(s.cout));
    for (auto& b : bias) b = static_cast<int32_t>(random() % 40001) - 20000;
    std::vector<float> bias_scale(static_cast<size_t>(s.cout));
    for (int c = 0; c < s.cout; ++c)
      bias_scale[static_cast<size_t>(c)] = sx * sw[s.per_channel ? c : 0];
    const auto wbuf = static_cast<uint32_t>(m.buffers.size());
    m.buffers.push_back(weights);
    container::Buffer bbuf;
    bbuf.data = le32(bias);
    m.buffers.push_back(bbuf);
    const int wt = static_cast<int>(g.tensors.size());
    std::vector<int32_t> wshape = {s.cout, s.k, s.k, cin};
    if (s.fc) wshape = {s.cout, kdim};
    g.tensors.push_back(tensor(cat("w", i), TensorType::kInt8, wshape, sw,
                               std::vector<int64_t>(sw.size(), 0), wbuf));
    g.tensors.push_back(tensor(cat("b", i), TensorType::kInt32, {s.cout}, bias_scale,
                               std::vector<int64_t>(bias_scale.size(), 0), wbuf + 1));
    g.tensors.push_back(
        tensor(cat("y", i), TensorType::kInt8, {1, oh, ow, s.cout}, {sy}, {zy - 128}));
    container::Operator conv;
    conv.opcode_index = 1;
    conv.inputs = {x_tensor, wt, s.bias ? wt + 1 : -1};
    conv.outputs = {wt + 2};
    conv.builtin_options_type = 1;
    container::Conv2DOptions o;
    o.padding = s.same ? container::Padding::kSame : container::Padding::kValid;
    o.stride_h = o.stride_w = s.stride;
    o.activation = s.act;
    conv.options = o;
    if (s.fc) {
      if (s.reshape) {  // the converter's flatten: same bytes, same quantization
        const int flat = static_cast<int>(g.tensors.size());
        g.tensors.push_back(tensor(cat("flat", i), TensorType::kInt8, {1, kdim}, {sx}, {zx - 128}));
        container::Operator reshape;
        reshape.opcode_index = 3;
        reshape.inputs = {x_tensor};
        reshape.outputs = {flat};
        g.operators.push_back(reshape);
        conv.inputs[0] = flat;
      }
      conv.opcode_index = 2;
      conv.builtin_options_type = 8;
      container::FullyConnectedOptions fo;
      fo.activation = s.act;
      conv.options = fo;
    }
    g.operators.push_back(conv);
    x_tensor = wt + 2;
    h = oh;
    w = ow;
    cin = s.cout;
    sx = sy;
    zx = zy;
  }
  const int out = static_cast<int>(g.tensors.size());
  g.tensors.push_back(
      tensor("y", TensorType::kUInt8,
             specs.back().fc ? std::vector<int32_t>{1, cin} : std::vector<int32_t>{1, h, w, cin},
             {sx}, {zx}));
  container::Operator q_out;
  q_out.opcode_index = 0;
  q_out.inputs = {x_tensor};
  q_out.outputs = {out};
  g.operators.push_back(q_out);
  g.inputs = {0};
  g.outputs = {out};
  m.subgraphs.push_back(std::move(g));
  return m;
}

std::string describe(int h, int w, int cin, const std::vector<ConvSpec>& specs) {
  std::string s = cat(h, "x", w, "x", cin);
  for (const ConvSpec& c : specs)
    s += c.fc ? cat(" -> fc ", c.cout, c.reshape ? " after reshape" : "")
              : cat(" -> conv ", c.k, "x", c.k, " s", c.stride, c.same ? " SAME" : " VALID",
                    " cout ", c.cout, c.bias ? " bias" : "", c.per_channel ? "" : " per-tensor",
                    " act ", static_cast<int>(c.act));
  return s;
}

void expect_equal_to_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                         std::mt19937& random) {
  SCOPED_TRACE(describe(h, w, cin, specs));
  const container::Model twin = conv_twin(h, w, cin, specs, random);
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.back().status);
  const auto compiled = container::read_edgetpu_model(r.tflite);
  const auto exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_NE(exes.caching, nullptr);

  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(twin, options);
  std::vector<uint8_t> x(static_cast<size_t>(h) * w * cin);
  for (auto& b : x) b = static_cast<uint8_t>(random());
  cpu.set_input(0, x);
  cpu.invoke();
  const auto want = cpu.output_bytes(0);
  if (specs.back().act != Activation::kNone) {
    // The activation must clip: some outputs sit at the bound it sets.
    const auto& y = twin.subgraphs[0].tensors.back().quantization;
    const int zp = static_cast<int>(y.zero_point[0]);
    const int top = std::min(255, zp + static_cast<int>(std::nearbyint(6.0f / y.scale[0])));
    const int bound = specs.back().act == Activation::kRelu ? zp : top;
    ASSERT_GT(std::count(want.begin(), want.end(), static_cast<uint8_t>(bound)), 0)
        << "the activation never clips";
  } else {
    size_t saturated = 0;
    for (uint8_t v : want) saturated += v == 0 || v == 255;
    ASSERT_LT(saturated * 4, want.size()) << "the test's output quantization saturates";
    ASSERT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
              std::min<size_t>(want.size() / 4, 32));
  }

  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, *exes.caching, {});
  const auto& layer = exes.execution->output_layers.at(0);
  for (int inference = 0; inference < 2; ++inference) {
    const auto got = chip::testing::detile(
        layer, chip::testing::run_executable(chip, *exes.execution, {{"x", x}}).at(layer.name));
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "inference " << inference << ": " << differ << " of " << want.size()
                          << " bytes differ";
  }
  EXPECT_EQ(chip.fault(), "");
}

TEST(ConvOnTheVirtualEdgeTpu, OneByOneAndThreeByThreeEqualTheCpuReference) {
  std::mt19937 random(1);
  expect_equal_to_cpu(8, 8, 4, {{8, 1, 1, false}}, random);
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 1, false}}, random);
  expect_equal_to_cpu(8, 8, 8, {{16, 3, 1, true}}, random);
  expect_equal_to_cpu(9, 10, 4, {{16, 3, 2, true}}, random);
}

// A random layer on a random image that the generator covers: rows of whole 8-byte units, the
// kernel inside the image for VALID, up to 64 output channels or whole groups of 64.
struct RandomCase {
  int h, w, cin;
  ConvSpec spec;
};
RandomCase random_case(std::mt19937& random) {
  static const int kCin[] = {4, 8, 12, 16, 24, 32, 64};
  static const int kK[] = {1, 1, 2, 3, 3, 5};
  RandomCase c{};
  c.cin = kCin[random() % 7];
  c.spec.k = kK[random() % 6];
  c.spec.stride = 1 + static_cast<int>(random() % 2);
  c.spec.same = random() % 2 == 0;
  c.spec.bias = random() % 4 != 0;
  c.spec.per_channel = random() % 4 != 0;
  c.spec.cout = random() % 5 == 0 ? 64 * (2 + static_cast<int>(random() % 2))
                                  : 1 + static_cast<int>(random() % 64);
  const int lo = c.spec.same ? 1 : c.spec.k;
  c.h = lo + static_cast<int>(random() % 14);
  c.w = lo + static_cast<int>(random() % 14);
  if (c.w * c.cin % 8 != 0 && (c.h % 2 != 0 || c.w * c.cin > 128)) ++c.w;
  return c;
}

TEST(ConvOnTheVirtualEdgeTpu, RandomShapesEqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261204);
  for (int i = 0; i < 24; ++i) {
    const RandomCase c = random_case(random);
    expect_equal_to_cpu(c.h, c.w, c.cin, {c.spec}, random);
  }
}

TEST(ConvOnTheVirtualEdgeTpu, OutputGroupsOfSixtyFourEqualTheCpuReference) {
  std::mt19937 random(3);
  expect_equal_to_cpu(6, 6, 16, {{128, 3, 1, true}}, random);
  expect_equal_to_cpu(5, 4, 8, {{192, 1, 1, false, false}}, random);
}

TEST(ConvOnTheVirtualEdgeTpu, FusedReluAndRelu6EqualTheCpuReference) {
  std::mt19937 random(5);
  expect_equal_to_cpu(8, 8, 8, {{16, 3, 1, true, true, true, Activation::kRelu}}, random);
  expect_equal_to_cpu(8, 6, 4, {{8, 3, 2, true, true, true, Activation::kRelu6}}, random);
  expect_equal_to_cpu(7, 8, 8, {{64, 1, 1, false, false, false, Activation::kRelu}}, random);
}

// Long images: more input pieces than the program's input rows (a fence every 32 pieces).
TEST(ConvOnTheVirtualEdgeTpu, ImagesOfManyRowPiecesEqualTheCpuReference) {
  std::mt19937 random(9);
  expect_equal_to_cpu(40, 40, 8, {{8, 3, 2, true}}, random);
}

// Chains: one program, the activations stay in the tile's narrow memory between the layers.
TEST(ConvChainOnTheVirtualEdgeTpu, ChainsOfConvolutionsEqualTheCpuReference) {
  std::mt19937 random(11);
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 1, true}, {16, 1, 1, false}}, random);
  expect_equal_to_cpu(12, 12, 8, {{16, 3, 2, true}, {16, 3, 1, true}, {8, 1, 1, false}}, random);
  expect_equal_to_cpu(10, 9, 4, {{12, 3, 1, false}, {128, 3, 2, true}, {24, 3, 1, true}}, random);
  expect_equal_to_cpu(10, 8, 8,
                      {{16, 3, 1, true, true, true, Activation::kRelu6},
                       {8, 5, 1, true, true, true, Activation::kRelu}},
                      random);
}

TEST(ConvChainOnTheVirtualEdgeTpu, RandomChainsEqualTheCpuReference) {
  std::mt19937 random(13);
  for (int i = 0; i < 8; ++i) {
    const RandomCase c = random_case(random);
    std::vector<ConvSpec> specs{c.spec};
    specs[0].cout = specs[0].cout <= 64 ? (specs[0].cout + 3) / 4 * 4 : specs[0].cout;
    const int layers = 2 + static_cast<int>(random() % 2);
    for (int j = 1; j < layers; ++j) {
      ConvSpec s = random_case(random).spec;
      s.same = true;  // the maps shrink quickly otherwise
      if (j + 1 < layers) s.cout = s.cout <= 64 ? (s.cout + 3) / 4 * 4 : s.cout;
      specs.push_back(s);
    }
    expect_equal_to_cpu(c.h, c.w, c.cin, specs, random);
  }
}

// A classifier after the convolutions: FULLY_CONNECTED over the whole map, in the same program.
TEST(ConvChainOnTheVirtualEdgeTpu, ConvolutionsThenFullyConnectedEqualTheCpuReference) {
  std::mt19937 random(17);
  ConvSpec fc10{10};
  fc10.fc = true;
  ConvSpec fc64{64};
  fc64.fc = true;
  fc64.reshape = false;
  ConvSpec fc128{128};
  fc128.fc = true;
  fc128.act = Activation::kRelu;
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 2, true}, fc10}, random);
  expect_equal_to_cpu(6, 6, 8, {{16, 3, 1, false}, fc64}, random);
  expect_equal_to_cpu(8, 8, 4, {{16, 3, 2, true}, {16, 3, 2, true}, fc128}, random);
}

}  // namespace
}  // namespace tinycoral::compiler
