// Correct by simulation: fan-out heads (several CONV_2D layers reading the same image, each
// written to its own graph output, or joined by a CONCATENATION along channels: PoseNet's
// heatmaps, offsets and displacements) after a conv chain, compiled as one program with several
// outputs, run on the virtual Edge TPU and compared with the CPU reference in `edgetpu` rounding:
// every byte of every output equal, on two inferences.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <variant>

#include "chip/program.h"
#include "chip/sim_runner.h"
#include "common/file.h"
#include "compiler/compile.h"
#include "compiler/conv_layer.h"
#include "compiler/partition.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/compiled_twin.h"
#include "support/conv_parameters.h"
#include "support/conv_twin.h"
#include "support/heads_twin.h"
#include "support/same_bytes.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using container::TensorType;
using testing::CompiledTwin;
using testing::edgetpu_reference;
using testing::same_bytes;
using twins::add_head_conv;
using twins::conv_twin;
using twins::ConvSpec;
using twins::heads_twin;
using twins::HeadSpec;

ConvSpec conv(int cout, int k, int stride = 1) {
  ConvSpec s;
  s.cout = cout;
  s.k = k;
  s.stride = stride;
  s.act = Activation::kRelu6;
  return s;
}

// Compiles the twin, runs it on the virtual Edge TPU twice and compares every output with the
// CPU reference's; returns the number of outputs compared and sets `tiles` to the number of tiles
// the first output comes from.
size_t expect_heads_equal(size_t& tiles, int h, int w, int cin, const std::vector<ConvSpec>& trunk,
                          const std::vector<HeadSpec>& heads, std::mt19937& random) {
  SCOPED_TRACE(twins::describe(h, w, cin, trunk) + cat(" + ", heads.size(), " heads"));
  const container::Model twin = heads_twin(h, w, cin, trunk, heads, random);
  const CompiledTwin compiled(twin);
  EXPECT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  if (compiled.result.edgetpu_subgraphs != 1) return 0;
  const chip::testing::PackageExecutables& exes = compiled.exes;
  host::Interpreter cpu = edgetpu_reference(twin);
  const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(h) * w * cin, random);
  cpu.set_input(0, x);
  cpu.invoke();
  const size_t outputs = twin.subgraphs.at(0).outputs.size();
  EXPECT_EQ(exes.execution->output_layers.size(), outputs);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  std::vector<uint8_t> chip_x;  // (the int8 input in the chip's uint8 domain)
  for (const uint8_t v : x) chip_x.push_back(v ^ 0x80);
  for (int inference = 0; inference < 2; ++inference) {
    const auto got_all = chip::testing::run_executable(chip, *exes.execution, {{"x", chip_x}});
    for (size_t o = 0; o < outputs; ++o) {
      const container::Tensor& tensor =
          twin.subgraphs[0].tensors.at(static_cast<size_t>(twin.subgraphs[0].outputs[o]));
      const std::string& name = tensor.name;
      // (int8 outputs: the chip's bytes are the uint8 domain's, the host flips their sign bit.)
      const uint8_t flip = tensor.type == TensorType::kInt8 ? 0x80 : 0;
      std::vector<uint8_t> want;
      for (const uint8_t v : cpu.output_bytes(o)) want.push_back(v ^ flip);
      const container::Layer* layer = nullptr;
      for (const auto& l : exes.execution->output_layers)
        if (l.name == name) layer = &l;
      EXPECT_NE(layer, nullptr) << name;
      if (layer == nullptr) continue;
      if (inference == 0) {
        size_t saturated = 0;
        for (uint8_t v : want) saturated += v == 0 || v == 255;
        EXPECT_LT(saturated * 4, want.size()) << name << ": the test's quantization saturates";
        EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
                  std::min<size_t>(want.size() / 4, 16))
            << name;
      }
      EXPECT_TRUE(same_bytes(chip::testing::detile(*layer, got_all.at(name)), want))
          << "inference " << inference << ", " << name;
    }
  }
  EXPECT_EQ(chip.fault(), "");
  const auto& ymap =
      exes.execution->output_layers.front().output_layout->y_coordinate_to_linear_tile_id_map;
  tiles = std::set<int>(ymap.begin(), ymap.end()).size();
  return outputs;
}

TEST(FanOutHeadsOnTheVirtualEdgeTpu, HeadsEqualTheCpuReference) {
  std::mt19937 random(20261205);
  // PoseNet's shape in small: three heads of 17, 34 and 2 x 32 channels (a CONCATENATION of the
  // last two) on a trunk's map, on one tile and in row bands over several.
  const std::vector<HeadSpec> posenet = {{17}, {34}, {32, 1, true}, {32}};
  size_t tiles = 0;
  EXPECT_EQ(expect_heads_equal(tiles, 8, 8, 4, {conv(16, 3), conv(32, 1)}, posenet, random), 3u);
  EXPECT_EQ(expect_heads_equal(tiles, 32, 24, 8, {conv(16, 3, 2), conv(24, 3)}, posenet, random),
            3u);
  EXPECT_GT(tiles, 1u);
  // Two heads, one over a whole group and one past it (72 channels: two groups), 3x3 kernels,
  // a RELU6 on one, after a one-layer trunk.
  HeadSpec wide{72, 3};
  HeadSpec clipped{12, 3};
  clipped.act = Activation::kRelu6;
  EXPECT_EQ(expect_heads_equal(tiles, 12, 12, 8, {conv(16, 3)}, {wide, clipped}, random), 2u);
  // gen2021 PoseNet's form: each head (the CONCATENATION's output too) then a QUANTIZE to uint8.
  std::vector<HeadSpec> quantized = posenet;
  for (HeadSpec& h : quantized) h.quantize = true;
  EXPECT_EQ(expect_heads_equal(tiles, 8, 8, 4, {conv(16, 3), conv(32, 1)}, quantized, random), 3u);
}

// PoseNet's heads of one partial group (heatmaps 17, offsets 34) compute only their columns, as
// Google's heads do (out_ch 19 and 35: the clock charges an op the columns it uses), and each
// sends its pixels in whole words (20 and 36 bytes, not 24 and 40) with a tile's share rounded to
// 8-byte units (docs/compiler.md "PoseNet's heads: their own columns, their own words"). A
// 15 x 13 map: bands of odd pixel counts, whose last half unit the outfeed takes past their bytes.
TEST(FanOutHeadsOnTheVirtualEdgeTpu, PartialHeadsComputeAndSendOnlyTheirWords) {
  const std::vector<HeadSpec> posenet = {{17}, {34}, {32, 1, true}, {32}};
  const std::vector<ConvSpec> trunk = {conv(16, 3, 2), conv(24, 3)};
  std::mt19937 random(51205);
  const container::Model twin = heads_twin(30, 26, 8, trunk, posenet, random);
  const CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  std::set<int> columns;
  for (const chip::OpInstr& op : compiled.execution_ops()) columns.insert(op.out_ch + 1);
  // (The offsets share the heatmaps' group: their op computes columns 0-55, heatmaps' included.)
  EXPECT_TRUE(columns.contains(20) && columns.contains(56)) << "heads padded to 64 columns";
  // Bytes per output: the tiles' pixels at 20, 36 and 64 bytes, each tile's share in 8-byte units.
  const auto& layers = compiled.exes.execution->output_layers;
  ASSERT_EQ(layers.size(), 3u);
  const int pixels = 15 * 13;
  const std::vector<int> pixel_bytes = {20, 36, 64};
  size_t tiles = 0;
  for (size_t o = 0; o < layers.size(); ++o) {
    const auto& ymap = layers[o].output_layout->y_coordinate_to_linear_tile_id_map;
    tiles = std::set<int>(ymap.begin(), ymap.end()).size();
    EXPECT_GE(layers[o].size_bytes, pixels * pixel_bytes[o]) << layers[o].name;
    EXPECT_LE(layers[o].size_bytes, pixels * pixel_bytes[o] + 4 * static_cast<int>(tiles))
        << layers[o].name;
  }
  EXPECT_GT(tiles, 1u);
  // Every byte of every output equal to the CPU reference (the same twin from the same seed).
  std::mt19937 again(51205);
  EXPECT_EQ(expect_heads_equal(tiles, 30, 26, 8, trunk, posenet, again), 3u);
}

// Heads of one group at most that fit a group side by side share its weight rows (docs/compiler.md
// "PoseNet's heads share a group"): PoseNet's heatmaps (17) and offsets (34) one group, the
// displacements (64) another - two groups of parameters where each head had its own - and three
// small heads (12, 16, 20 channels) one group whose ops compute 12, 28 and 48 columns, each with
// its own output stage, the highest first. Every byte of every output equal to the CPU reference.
TEST(FanOutHeadsOnTheVirtualEdgeTpu, HeadsThatFitOneGroupShareItsRows) {
  const std::vector<ConvSpec> trunk = {conv(16, 3, 2), conv(24, 3)};
  struct Case {
    std::vector<HeadSpec> heads;
    std::vector<int> g0, c0;
    int groups = 0;
    std::set<int> columns;
  };
  const std::vector<Case> cases = {
      {{{17}, {34}, {32, 1, true}, {32}}, {0, 0, 1}, {0, 20, 0}, 2, {20, 56, 64}},
      {{{12}, {16}, {20}}, {0, 0, 0}, {0, 12, 28}, 1, {12, 28, 48}},
  };
  for (const Case& c : cases) {
    std::mt19937 random(70405);
    const container::Model twin = heads_twin(30, 26, 8, trunk, c.heads, random);
    const Graph graph = import_graph(twin);
    ConvChain chain;
    ASSERT_EQ(match_conv_chain(graph, partition(graph).mapped_ops, chain), "");
    const ConvLayer& heads = chain.layers.back();
    ASSERT_EQ(heads.heads.size(), c.g0.size());
    for (size_t h = 0; h < c.g0.size(); ++h) {
      EXPECT_EQ(heads.heads[h].g0, c.g0[h]) << h;
      EXPECT_EQ(heads.heads[h].c0, c.c0[h]) << h;
    }
    EXPECT_EQ(heads.cout, 64 * c.groups);
    const CompiledTwin compiled(twin);
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    std::set<int> columns;
    for (const chip::OpInstr& op : compiled.execution_ops()) columns.insert(op.out_ch + 1);
    for (int n : c.columns) EXPECT_TRUE(columns.contains(n)) << n << " columns";
    size_t tiles = 0;
    std::mt19937 again(70405);
    EXPECT_EQ(expect_heads_equal(tiles, 30, 26, 8, trunk, c.heads, again), c.g0.size());
    EXPECT_GT(tiles, 1u);
  }
}

// The program writes only the heads' outputs: a concatenated convolution's own output that is
// also a graph output keeps the heads on the CPU with the reason (the custom op could not write
// it); the trunk before them maps (the branches after a fan-out, compile.cpp's branch_tail).
TEST(FanOutHeadsOnTheVirtualEdgeTpu, AHeadsInnerTensorReadOutsideIsRefused) {
  std::mt19937 random(11);
  container::Model twin = heads_twin(8, 8, 4, {conv(16, 3)}, {{17}, {32, 1, true}, {32}}, random);
  container::Subgraph& g = twin.subgraphs.at(0);
  const container::Operator& concat = g.operators.back();
  ASSERT_EQ(concat.inputs.size(), 2u);
  g.outputs.push_back(concat.inputs[0]);
  const CompileResult r = compile_model(container::write_tflite(twin));
  EXPECT_EQ(r.edgetpu_subgraphs, 1);
  std::map<std::string, int> mapped, refused;
  for (const auto& row : r.rows) {
    if (row.mapped) mapped[row.op] += row.count;
    if (row.status ==
        "tinycoral runs this branch on the CPU: a tensor inside fan-out heads that "
        "the CPU part reads")
      refused[row.op] += row.count;
  }
  EXPECT_EQ(mapped, (std::map<std::string, int>{{"CONV_2D", 1}}));
  EXPECT_EQ(refused, (std::map<std::string, int>{{"CONCATENATION", 1}, {"CONV_2D", 3}}));
}

// DeepLab's ASPP form: an AVERAGE_POOL_2D over the trunk's whole map, then a CONV_2D, beside a
// CONV_2D on the same map (not heads of one geometry): those branches run on the CPU with the
// reason, the trunk before them maps, and every output equals the CPU reference's in every byte.
TEST(FanOutHeadsOnTheVirtualEdgeTpu, BranchesNotGeneratedRunOnTheCpuAfterTheTrunk) {
  std::mt19937 random(13);
  container::Model twin = heads_twin(16, 16, 4, {conv(16, 3), conv(32, 3, 2)}, {{24}}, random);
  container::Subgraph& g = twin.subgraphs.at(0);
  const container::Operator head = g.operators.back();  // the 1x1 branch
  g.operators.pop_back();
  const int x = head.inputs.at(0);
  const container::Tensor source = g.tensors.at(static_cast<size_t>(x));
  g.tensors.push_back(testing::twin_tensor("pooled", TensorType::kInt8, {1, 1, 1, 32},
                                           source.quantization.scale,
                                           {source.quantization.zero_point.at(0)}));
  container::Operator pool;
  pool.opcode_index = 5;  // AVERAGE_POOL_2D
  pool.inputs = {x};
  pool.outputs = {static_cast<int>(g.tensors.size()) - 1};
  pool.builtin_options_type = 5;
  container::Pool2DOptions po;
  po.padding = container::Padding::kValid;
  po.filter_h = po.filter_w = 8;
  pool.options = po;
  g.operators.push_back(pool);
  const float sx = source.quantization.scale.at(0);
  g.outputs.insert(g.outputs.begin(),
                   add_head_conv(twin, pool.outputs[0], 32, sx, {16}, 0.1f * sx, 128, random));
  g.operators.push_back(head);
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  std::map<std::string, int> mapped, branches;
  for (const auto& row : r.rows) {
    if (row.mapped) mapped[row.op] += row.count;
    if (row.status.starts_with("tinycoral runs this branch on the CPU: a CONV_2D reading an image "
                               "that an earlier layer reads too"))
      branches[row.op] += row.count;
  }
  EXPECT_EQ(mapped, (std::map<std::string, int>{{"CONV_2D", 2}}));
  EXPECT_EQ(branches, (std::map<std::string, int>{{"AVERAGE_POOL_2D", 1}, {"CONV_2D", 2}}));
  host::Interpreter cpu = edgetpu_reference(twin);
  host::InterpreterOptions options;  // (the CPU part in `edgetpu` rounding, as the reference)
  options.rounding = host::Rounding::kEdgeTpu;
  runtime::add_edgetpu_delegate(options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(container::read_tflite(r.tflite), options);
  const std::vector<uint8_t> in = testing::random_bytes(16 * 16 * 4, random);
  cpu.set_input(0, in);
  cpu.invoke();
  tpu.set_input(0, in);
  tpu.invoke();
  ASSERT_EQ(tpu.num_outputs(), 2u);
  for (size_t o = 0; o < 2; ++o) {
    const auto want = cpu.output_bytes(o);
    EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), 8u) << o;
    EXPECT_TRUE(same_bytes(tpu.output_bytes(o), want)) << "output " << o;
  }
}

// Both PoseNets' mapped parts are recognised whole: the 27 layers of the trunk (gen2021's PAD
// folded into its first convolution) and one layer of heads whose outputs are the decoder's
// three inputs, in the custom op's order, and the 481 x 3 image is padded on the host (the
// whole programs: posenet_whole_test.cpp).
TEST(FanOutHeadsOnTheVirtualEdgeTpu, PoseNetsTrunkAndHeadsAreRecognised) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  struct Case {
    std::string model;
    std::vector<std::pair<std::string, int>> heads;  // output and channels, in output order
  };
  const std::vector<Case> cases = {
      {"gen2020/posenet_mobilenet_v1_075_353_481_quant_decoder",
       {{"MobilenetV1/heatmap_2/BiasAdd", 17},
        {"MobilenetV1/offset_2/BiasAdd", 34},
        {"concat", 64}}},
      {"gen2021/posenet_mobilenet_v1_075_353_481_16_quant_decoder",
       {{"float_mid_offsets", 64}, {"float_heatmaps", 17}, {"float_short_offsets", 34}}}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model);
    const Graph graph = import_graph_bytes(read_file(data / (c.model + ".tflite")));
    const Partition p = partition(graph);
    ConvChain chain;
    ASSERT_EQ(match_conv_chain(graph, p.mapped_ops, chain), "");
    ASSERT_EQ(chain.layers.size(), 28u);
    const ConvLayer& heads = chain.layers.back();
    ASSERT_EQ(heads.heads.size(), c.heads.size());
    ASSERT_EQ(p.outputs.size(), c.heads.size());
    for (size_t h = 0; h < c.heads.size(); ++h) {
      EXPECT_EQ(heads.heads[h].output_name, c.heads[h].first);
      EXPECT_EQ(heads.heads[h].cout, c.heads[h].second);
      EXPECT_EQ(graph.tensor(p.outputs[h]).name, c.heads[h].first);  // the custom op's order
    }
    const ConvLayer& first = chain.layers.front();
    EXPECT_EQ(first.oh, 177);
    EXPECT_EQ(first.ow, 241);
    // Repacked on the chip into rows of 488 pixels (1464 bytes of whole units) from the host's
    // 481; when padded on the host, columns only to the same rows, or 4-byte pixels when asked.
    ConvChain pixels = chain, repacked = chain;
    EXPECT_TRUE(repack_input_on_chip(repacked));
    EXPECT_EQ(repacked.repack_w, 481);
    EXPECT_EQ(repacked.layers.front().w, 488);
    EXPECT_EQ(repacked.layers.front().cin, 3);
    EXPECT_EQ(repacked.host_w, 0);
    EXPECT_TRUE(pad_input_on_host(chain));
    EXPECT_EQ(chain.host_w, 488);
    EXPECT_EQ(chain.host_cin, 3);
    EXPECT_TRUE(pad_input_on_host(pixels, true));
    EXPECT_EQ(pixels.host_w, 482);
    EXPECT_EQ(pixels.host_cin, 4);
  }
}

// The tail of each PoseNet twin from the 23 x 31 maps on (its last 8 depthwise/pointwise pairs and
// its heads, the decoder's three inputs as the outputs): compiled whole, it equals the CPU
// reference in every byte of every output on two random inputs (the whole models see one image) -
// gen2020's uint8 heads with weight zero points 129 and 128 in one layer, gen2021's per-channel
// int8 heads each followed by its QUANTIZE to uint8.
TEST(FanOutHeadsOnTheVirtualEdgeTpu, PoseNetsTailEqualsTheTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  struct Case {
    std::string model;
    size_t from;  // the first operator kept: the depthwise layer that reads the first 23 x 31 map
  };
  for (const Case& c : {Case{"gen2020/posenet_mobilenet_v1_075_353_481_quant_decoder", 13},
                        Case{"gen2021/posenet_mobilenet_v1_075_353_481_16_quant_decoder", 21}}) {
    SCOPED_TRACE(c.model);
    container::Model twin = container::read_tflite_file(data / (c.model + ".tflite"));
    container::Subgraph& g = twin.subgraphs.at(0);
    ASSERT_GT(g.operators.size(), c.from);
    const container::Operator decoder = g.operators.back();
    ASSERT_EQ(twin.operator_codes.at(decoder.opcode_index).builtin_code,
              static_cast<int32_t>(container::BuiltinOp::kCustom));
    std::vector<container::Operator> kept(g.operators.begin() + static_cast<std::ptrdiff_t>(c.from),
                                          g.operators.end() - 1);
    g.inputs = {kept.front().inputs.at(0)};
    g.outputs = decoder.inputs;
    g.operators = std::move(kept);
    const std::vector<int32_t> shape = g.tensors.at(static_cast<size_t>(g.inputs[0])).shape;
    ASSERT_EQ(shape, (std::vector<int32_t>{1, 23, 31, 384}));
    const bool signed_input =
        g.tensors.at(static_cast<size_t>(g.inputs[0])).type == TensorType::kInt8;

    const CompiledTwin compiled(twin);
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    const chip::testing::PackageExecutables& exes = compiled.exes;
    ASSERT_EQ(exes.execution->output_layers.size(), 3u);
    host::Interpreter cpu = edgetpu_reference(twin);
    chip::VirtualEdgeTpu chip;
    compiled.cache_parameters(chip);
    std::mt19937 random(353481);
    for (int inference = 0; inference < 2; ++inference) {
      std::vector<uint8_t> x(23 * 31 * 384);
      for (auto& b : x) b = static_cast<uint8_t>(random() % 100);  // (RELU6 outputs: 0..255)
      cpu.set_input(0, x);
      cpu.invoke();
      std::vector<uint8_t> chip_x = x;
      if (signed_input)
        for (auto& b : chip_x) b ^= 0x80;
      const auto got_all = chip::testing::run_executable(
          chip, *exes.execution, {{exes.execution->input_layers.at(0).name, chip_x}});
      for (size_t o = 0; o < 3; ++o) {
        const std::string& name = g.tensors.at(static_cast<size_t>(g.outputs[o])).name;
        const container::Layer* layer = nullptr;
        for (const auto& l : exes.execution->output_layers)
          if (l.name == name) layer = &l;
        ASSERT_NE(layer, nullptr) << name;
        // (int8 outputs: the chip's bytes are the uint8 domain's.)
        const uint8_t flip =
            g.tensors.at(static_cast<size_t>(g.outputs[o])).type == TensorType::kInt8 ? 0x80 : 0;
        std::vector<uint8_t> want;
        for (const uint8_t v : cpu.output_bytes(o)) want.push_back(v ^ flip);
        EXPECT_TRUE(same_bytes(chip::testing::detile(*layer, got_all.at(name)), want))
            << "inference " << inference << ", " << name;
        EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), 16u) << name;
      }
    }
    EXPECT_EQ(chip.fault(), "");
  }
}

}  // namespace
}  // namespace tinycoral::compiler
