// Malformed models are refused when the graph is imported (issue 11: "a malformed model is an
// error (exit 2)"): a small valid model with every operator class the compiler maps compiles, and
// each single contradiction written into it (an output shape, a bias, a filter's scales, a
// stride, an axis, a zero point) is an Error naming the operator and the contradiction. What
// TFLite runs stays accepted. The robustness sweep's MobileNet whose DEPTHWISE_CONV_2D output
// shape was corrupted exits 2 through the CLI with one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>

#include "common/error.h"
#include "common/file.h"
#include "compiler/compile.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "support/error_of.h"
#include "support/testdata.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::TensorType;
using testing::twin_tensor;

container::Buffer bytes(size_t n, uint8_t v) {
  return container::Buffer{std::vector<uint8_t>(n, v)};
}

container::Operator make_op(uint32_t code, std::vector<int32_t> in, std::vector<int32_t> out,
                            container::BuiltinOptions options = {}, uint8_t options_type = 0) {
  container::Operator o;
  o.builtin_options_type = options_type;  // the schema's union tag
  o.opcode_index = code;
  o.inputs = std::move(in);
  o.outputs = std::move(out);
  o.options = std::move(options);
  return o;
}

// u8 [1,8,8,4] -QUANTIZE-> i8 -CONV_2D 3x3 (8 ch, per channel)-> [1,8,8,8] -DEPTHWISE 3x3->
// [1,8,8,8] -AVERAGE_POOL 2x2/2-> [1,4,4,8] -ADD(x, x)-> -RESHAPE-> [1,128] -FC 10-> [1,10]
// -SOFTMAX-> -CONCATENATION(p, p) axis 1-> [1,20]
container::Model small_model() {
  container::Model m;
  m.operator_codes = {{114, "", 1}, {3, "", 1}, {4, "", 1},  {1, "", 1}, {0, "", 1},
                      {22, "", 1},  {9, "", 1}, {25, "", 1}, {2, "", 1}};
  m.buffers = {{},
               bytes(8 * 3 * 3 * 4, 3),
               bytes(8 * 4, 0),
               bytes(3 * 3 * 8, 5),
               bytes(8 * 4, 0),
               bytes(10 * 128, 7),
               bytes(10 * 4, 0)};
  const std::vector<float> ch8(8, 0.01f);
  const std::vector<int64_t> zp8(8, 0);
  container::Subgraph g;
  g.tensors = {twin_tensor("image", TensorType::kUInt8, {1, 8, 8, 4}, {0.5f}, {128}),  // 0
               twin_tensor("q", TensorType::kInt8, {1, 8, 8, 4}, {0.5f}, {0}),         // 1
               twin_tensor("conv_w", TensorType::kInt8, {8, 3, 3, 4}, ch8, zp8, 1),    // 2
               twin_tensor("conv_b", TensorType::kInt32, {8}, ch8, zp8, 2),            // 3
               twin_tensor("conv", TensorType::kInt8, {1, 8, 8, 8}, {0.25f}, {-128}),  // 4
               twin_tensor("dw_w", TensorType::kInt8, {1, 3, 3, 8}, ch8, zp8, 3),      // 5
               twin_tensor("dw_b", TensorType::kInt32, {8}, ch8, zp8, 4),              // 6
               twin_tensor("dw", TensorType::kInt8, {1, 8, 8, 8}, {0.25f}, {-128}),    // 7
               twin_tensor("pool", TensorType::kInt8, {1, 4, 4, 8}, {0.25f}, {-128}),  // 8
               twin_tensor("sum", TensorType::kInt8, {1, 4, 4, 8}, {0.5f}, {-128}),    // 9
               twin_tensor("flat", TensorType::kInt8, {1, 128}, {0.5f}, {-128}),       // 10
               twin_tensor("fc_w", TensorType::kInt8, {10, 128}, {0.01f}, {0}, 5),     // 11
               twin_tensor("fc_b", TensorType::kInt32, {10}, {0.005f}, {0}, 6),        // 12
               twin_tensor("logits", TensorType::kInt8, {1, 10}, {0.1f}, {0}),         // 13
               twin_tensor("p", TensorType::kInt8, {1, 10}, {1.0f / 256}, {-128}),     // 14
               twin_tensor("pp", TensorType::kInt8, {1, 20}, {1.0f / 256}, {-128})};   // 15
  g.tensors[2].quantization.quantized_dimension = 0;
  g.tensors[5].quantization.quantized_dimension = 3;
  container::Conv2DOptions conv;
  conv.activation = container::Activation::kRelu;
  container::DepthwiseConv2DOptions dw;
  container::Pool2DOptions pool;
  pool.padding = container::Padding::kValid;
  pool.stride_h = pool.stride_w = pool.filter_h = pool.filter_w = 2;
  container::ConcatenationOptions concat;
  concat.axis = 1;
  g.operators = {make_op(0, {0}, {1}),
                 make_op(1, {1, 2, 3}, {4}, conv, 1),
                 make_op(2, {4, 5, 6}, {7}, dw, 2),
                 make_op(3, {7}, {8}, pool, 5),
                 make_op(4, {8, 8}, {9}, container::ActivationOptions{}, 11),
                 make_op(5, {9}, {10}, container::ReshapeOptions{{1, 128}}, 17),
                 make_op(6, {10, 11, 12}, {13}, container::FullyConnectedOptions{}, 8),
                 make_op(7, {13}, {14}, container::SoftmaxOptions{}, 9),
                 make_op(8, {14, 14}, {15}, concat, 10)};
  g.inputs = {0};
  g.outputs = {15};
  m.subgraphs.push_back(std::move(g));
  return m;
}

// The message of the Error compiling `m` throws, or "" when it compiles.
std::string compile_error(const container::Model& m) {
  return tinycoral::testing::error_of([&] { (void)compile_model(container::write_tflite(m)); });
}

TEST(GraphCheck, TheValidModelCompiles) { EXPECT_EQ(compile_error(small_model()), ""); }

TEST(GraphCheck, EachContradictionIsAnErrorNamingItsOperator) {
  struct Case {
    const char* name;
    std::function<void(container::Subgraph&)> corrupt;
    const char* want;  // in the message after "operator N (NAME): "
  };
  const std::vector<Case> cases = {
      {"conv output",
       [](auto& g) {
         g.tensors[4].shape = {1, 8, 9, 8};
       },
       "operator 1 (CONV_2D): output shape [1,8,9,8] contradicts [1,8,8,8]"},
      {"conv stride",
       [](auto& g) { std::get<container::Conv2DOptions>(g.operators[1].options).stride_h = 0; },
       "operator 1 (CONV_2D): has stride 0x1"},
      {"conv filter channels",
       [](auto& g) {
         g.tensors[2].shape = {8, 3, 1, 12};
       },
       "operator 1 (CONV_2D): its filter [8,3,1,12] does not divide its input's 4 channels"},
      {"conv scales",
       [](auto& g) {
         g.tensors[2].quantization.scale.resize(4, 0.01f);
         g.tensors[2].quantization.zero_point.resize(4);
         g.tensors[2].quantization.quantized_dimension = 3;
       },
       "operator 1 (CONV_2D): its filter has 4 scales along dimension 3, its 8 output channels"},
      {"conv bias",
       [](auto& g) {
         g.tensors[3].shape = {4};
         g.tensors[3].quantization.scale = {0.01f};
         g.tensors[3].quantization.zero_point = {0};
       },
       "operator 1 (CONV_2D): its bias [4] does not have one value for each of its 8"},
      {"depthwise output",
       [](auto& g) {
         g.tensors[7].shape = {1, 8, 15112, 8};
       },
       "operator 2 (DEPTHWISE_CONV_2D): output shape [1,8,15112,8] contradicts [1,8,8,8]"},
      {"depthwise filter",
       [](auto& g) {
         g.tensors[5].shape = {1, 3, 8, 3};
         g.tensors[5].quantization.scale = {0.01f};
         g.tensors[5].quantization.zero_point = {0};
       },
       "operator 2 (DEPTHWISE_CONV_2D): its filter [1,3,8,3] is not [1, kh, kw, a multiple"},
      {"depthwise dilation",
       [](auto& g) {
         std::get<container::DepthwiseConv2DOptions>(g.operators[2].options).dilation_w = -3;
       },
       "operator 2 (DEPTHWISE_CONV_2D): has stride 1x1 and dilation 1x-3"},
      {"pool output",
       [](auto& g) {
         g.tensors[8].shape = {1, 4, 4, 7};
       },
       "operator 3 (AVERAGE_POOL_2D): output shape [1,4,4,7] contradicts [1,4,4,8]"},
      {"pool window",
       [](auto& g) { std::get<container::Pool2DOptions>(g.operators[3].options).filter_h = 9; },
       "operator 3 (AVERAGE_POOL_2D): its 9x2 window leaves no output"},
      {"add broadcast",
       [](auto& g) {
         g.operators[4].inputs = {8, 4};
       },
       "operator 4 (ADD): its inputs [1,4,4,8] and [1,8,8,8] do not broadcast"},
      {"reshape elements",
       [](auto& g) {
         g.tensors[10].shape = {1, 127};
       },
       "operator 5 (RESHAPE): output shape [1,127] does not hold the 128 elements"},
      {"fc depth",
       [](auto& g) {
         g.tensors[10].shape = {1, 128};
         g.tensors[11].shape = {5, 256};
       },
       "operator 6 (FULLY_CONNECTED): its input [1,128] is not a whole number of rows of depth "
       "256"},
      {"fc output",
       [](auto& g) {
         g.tensors[13].shape = {1, 11};
       },
       "operator 6 (FULLY_CONNECTED): output shape [1,11] contradicts the 1 rows of 10 units"},
      {"fc zero point", [](auto& g) { g.tensors[13].quantization.zero_point = {300}; },
       "operator 6 (FULLY_CONNECTED): tensor 13 (logits) has zero point 300 outside its type"},
      {"fc zero points missing", [](auto& g) { g.tensors[13].quantization.zero_point.clear(); },
       "operator 6 (FULLY_CONNECTED): tensor 13 (logits) has 1 quantization scales and 0 zero "
       "points"},
      {"softmax scale", [](auto& g) { g.tensors[14].quantization.scale = {0.0f}; },
       "operator 7 (SOFTMAX): tensor 14 (p) has quantization scale 0"},
      {"concat output",
       [](auto& g) {
         g.tensors[15].shape = {1, 21};
       },
       "operator 8 (CONCATENATION): output shape [1,21] contradicts [1,20]"},
      {"concat axis",
       [](auto& g) { std::get<container::ConcatenationOptions>(g.operators[8].options).axis = 2; },
       "operator 8 (CONCATENATION): axis 2 is outside its inputs' 2 dimensions"},
      {"quantize shape",
       [](auto& g) {
         g.tensors[1].shape = {1, 8, 4, 9};
       },
       "operator 0 (QUANTIZE): output shape [1,8,4,9] does not hold the 256 elements"},
  };
  for (const Case& c : cases) {
    container::Model m = small_model();
    c.corrupt(m.subgraphs[0]);
    // Constant tensors whose shape a case changes keep as many bytes as the new shape needs, so
    // that the import's byte count check is not what refuses them.
    for (container::Tensor& t : m.subgraphs[0].tensors) {
      if (t.buffer == 0) continue;
      size_t n = t.type == TensorType::kInt32 ? 4 : 1;
      for (int32_t d : t.shape) n *= static_cast<size_t>(d);
      m.buffers[t.buffer].data.resize(n, 1);
    }
    const std::string err = compile_error(m);
    EXPECT_NE(err.find(c.want), std::string::npos) << c.name << ": " << err;
  }
}

TEST(GraphCheck, WhatTfliteRunsIsAccepted) {
  {  // DEPTHWISE_CONV_2D: TFLite takes the depth multiplier from the filter, not the options
    container::Model m = small_model();
    std::get<container::DepthwiseConv2DOptions>(m.subgraphs[0].operators[2].options)
        .depth_multiplier = 4;
    EXPECT_EQ(compile_error(m), "");
  }
  {  // ADD broadcasting a [1,1,1,8] operand over [1,4,4,8]
    container::Model m = small_model();
    m.subgraphs[0].tensors.push_back(
        twin_tensor("bias8", TensorType::kInt8, {1, 1, 1, 8}, {0.25f}, {0}, 7));
    m.buffers.push_back(bytes(8, 1));
    m.subgraphs[0].operators[4].inputs = {8, 16};
    EXPECT_EQ(compile_error(m), "");
  }
  {  // a grouped CONV_2D (two groups of 2 input channels)
    container::Model m = small_model();
    m.subgraphs[0].tensors[2].shape = {8, 3, 3, 2};
    m.buffers[1].data.resize(8 * 3 * 3 * 2);
    EXPECT_EQ(compile_error(m), "");
  }
}

// The robustness sweep's find: mobilenet_v1_0.25_128 with 20 bytes flipped (Python's
// random.Random(24)) left operator 13 (DEPTHWISE_CONV_2D) with output [1,8,15112,128]; it compiled
// with exit 0. The same contradiction written with our writer is exit 2 and one line.
TEST(GraphCheck, CorruptedMobileNetIsExitCodeTwoWithOneLine) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  container::Model m =
      container::read_tflite_file(dir / "gen2020" / "mobilenet_v1_0.25_128_quant.tflite");
  container::Subgraph& g = m.subgraphs.at(0);
  const int out = g.operators.at(13).outputs.at(0);
  g.tensors.at(static_cast<size_t>(out)).shape = {1, 8, 15112, 128};
  const std::filesystem::path scratch =
      std::filesystem::temp_directory_path() / "tinycoral_graph_check";
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  write_file(scratch / "bad.tflite", container::write_tflite(m));
  const auto r = tinycoral::testing::run_cli("compile " + (scratch / "bad.tflite").string() +
                                             " -o " + scratch.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("operator 13 (DEPTHWISE_CONV_2D): output shape [1,8,15112,128] "
                       "contradicts [1,8,8,128]"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(std::filesystem::exists(scratch / "bad_edgetpu.tflite"));
}

}  // namespace
}  // namespace tinycoral::compiler
