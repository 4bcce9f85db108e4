// Correct by simulation: FULLY_CONNECTED layers of random shapes and quantizations, built as CPU
// twins (QUANTIZE -> per-channel int8 FC -> QUANTIZE), compiled by our compiler, run on the virtual
// Edge TPU, and compared with the CPU reference in `edgetpu` rounding: every output byte equal, on
// a first and a second inference (parameters resident).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <tuple>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "compiler/fc_codegen.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "host/rounding.h"
#include "support/compiled_twin.h"
#include "support/conv_parameters.h"
#include "support/same_bytes.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::TensorType;
using testing::twin_tensor;

// The CPU twin of an N x K dense layer, as TensorFlow's converter writes it for uint8 I/O (or,
// with int8_io, for int8 I/O: the FC alone).
container::Model dense_twin(int n, int k, bool bias, container::Activation act, bool int8_io,
                            std::mt19937& random) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float sx = 0.004f + 0.01f * unit(random);
  const int x_zp = static_cast<int>(random() % 200) + 28;
  // RELU6 layers get outputs well past 6 so that its upper bound clips.
  std::vector<float> sw = twins::random_weight_scales(
      static_cast<size_t>(n), random, act == container::Activation::kRelu6 ? 20.0f : 1.0f);
  const float sw_sum = std::accumulate(sw.begin(), sw.end(), 0.0f);
  // Outputs spread over the uint8 range: ~3 standard deviations of the sum map to 127.
  const float sy = 3.0f * std::sqrt(static_cast<float>(k)) * 74 * 74 * sx * (sw_sum / n) / 127;
  const int y_zp = static_cast<int>(random() % 100) + 78;
  const twins::ConvParameters p = twins::random_conv_parameters(
      std::move(sw), static_cast<size_t>(n) * static_cast<size_t>(k), n, 20000, random);

  container::Model m;
  m.description = "dense twin";
  m.operator_codes = {{114, "", 1}, {9, "", 5}};
  m.buffers = {{}};
  container::Subgraph g;
  g.tensors = {twin_tensor("x", TensorType::kUInt8, {1, k}, {sx}, {x_zp}),
               twin_tensor("xq", TensorType::kInt8, {1, k}, {sx}, {x_zp - 128}),
               twin_tensor("yq", TensorType::kInt8, {1, n}, {sy}, {y_zp - 128}),
               twin_tensor("y", TensorType::kUInt8, {1, n}, {sy}, {y_zp})};
  const int wt = twins::add_conv_parameters(m, g, p, "", {n, k}, sx);
  container::Operator q_in, fc, q_out;
  q_in.opcode_index = 0;
  q_in.inputs = {0};
  q_in.outputs = {1};
  fc.opcode_index = 1;
  fc.inputs = {1, wt, bias ? wt + 1 : -1};
  fc.outputs = {2};
  fc.builtin_options_type = 8;
  container::FullyConnectedOptions options;
  options.activation = act;
  fc.options = options;
  q_out.opcode_index = 0;
  q_out.inputs = {2};
  q_out.outputs = {3};
  g.operators = {q_in, fc, q_out};
  if (int8_io) {  // no QUANTIZE: the layer's int8 tensors are the model's input and output
    g.tensors[0] = twin_tensor("x", TensorType::kInt8, {1, k}, {sx}, {x_zp - 128});
    g.tensors[3] = twin_tensor("y", TensorType::kInt8, {1, n}, {sy}, {y_zp - 128});
    fc.inputs[0] = 0;
    fc.outputs = {3};
    g.operators = {fc};
  }
  g.inputs = {0};
  g.outputs = {3};
  m.subgraphs.push_back(std::move(g));
  return m;
}

void expect_equal_to_cpu(int n, int k, bool bias, std::mt19937& random,
                         container::Activation act = container::Activation::kNone,
                         bool int8_io = false) {
  SCOPED_TRACE(std::to_string(n) + " x " + std::to_string(k) + (bias ? " with bias" : "") +
               " activation " + std::to_string(static_cast<int>(act)));
  const container::Model twin = dense_twin(n, k, bias, act, int8_io, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1);
  ASSERT_NE(compiled.exes.execution, nullptr);
  ASSERT_NE(compiled.exes.caching, nullptr);

  host::Interpreter cpu = testing::edgetpu_reference(twin);
  const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(k), random);
  const std::vector<uint8_t> want = testing::reference_output(cpu, x);
  // The quantization spreads the outputs: an all-saturated result would make equality cheap.
  size_t saturated = 0;
  for (uint8_t v : want) saturated += v == 0 || v == 255;
  if (act == container::Activation::kNone) {
    ASSERT_LT(saturated * 4, want.size()) << "the test's output quantization saturates";
    ASSERT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
              std::min<size_t>(want.size() / 4, 32));
  } else {
    // The activation must clip: some outputs sit at the bound it sets.
    const auto& y = twin.subgraphs[0].tensors[3].quantization;
    const int zp = static_cast<int>(y.zero_point[0]) + (int8_io ? 128 : 0);
    const int top = std::min(255, zp + static_cast<int>(std::nearbyint(6.0f / y.scale[0])));
    const int bound = act == container::Activation::kRelu ? zp : top;
    ASSERT_GT(std::count(want.begin(), want.end(), static_cast<uint8_t>(bound)), 0)
        << "bound " << bound << " zp " << zp << " max "
        << static_cast<int>(*std::max_element(want.begin(), want.end()));
  }

  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  // The host flips the most significant bit of int8 (SIGNED_FIXED_POINT8) inputs and outputs.
  const uint8_t flip = int8_io ? 0x80 : 0;
  ASSERT_EQ(compiled.exes.execution->output_layers.at(0).data_type,
            int8_io ? container::DataType::kSignedFixedPoint8 : container::DataType::kFixedPoint8);
  std::vector<uint8_t> device_x(x);
  for (auto& b : device_x) b ^= flip;
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> got = compiled.infer(chip, {{"x", device_x}});
    for (auto& b : got) b ^= flip;
    EXPECT_TRUE(testing::same_bytes(got, want)) << "inference " << inference;
  }
  EXPECT_EQ(chip.fault(), "");
}

TEST(FcOnTheVirtualEdgeTpu, RandomShapesEqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261203);
  expect_equal_to_cpu(64, 64, false, random);
  expect_equal_to_cpu(1024, 1024, false, random);
  for (int i = 0; i < 24; ++i) {
    const int n = 64 * (1 + static_cast<int>(random() % 16));
    const int k = 64 * (1 + static_cast<int>(random() % 16));
    expect_equal_to_cpu(n, k, false, random);
  }
}

TEST(FcOnTheVirtualEdgeTpu, FusedReluAndRelu6EqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(11);
  for (int i = 0; i < 4; ++i) {
    const int n = 64 * (1 + static_cast<int>(random() % 16));
    const int k = 64 * (1 + static_cast<int>(random() % 16));
    expect_equal_to_cpu(n, k, true, random, container::Activation::kRelu);
    expect_equal_to_cpu(n, k, i % 2 == 0, random, container::Activation::kRelu6);
  }
}

TEST(FcOnTheVirtualEdgeTpu, OutputCountsNotAMultipleOf64EqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(17);
  expect_equal_to_cpu(1, 64, true, random);
  expect_equal_to_cpu(10, 576, true, random);
  for (int i = 0; i < 4; ++i) {
    const int n = 1 + static_cast<int>(random() % 1024);
    const int k = 64 * (1 + static_cast<int>(random() % 16));
    expect_equal_to_cpu(n, k, i % 2 == 0, random);
  }
}

TEST(FcOnTheVirtualEdgeTpu, Int8InputsAndOutputsEqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(13);
  for (int i = 0; i < 4; ++i) {
    const int n = 64 * (1 + static_cast<int>(random() % 16));
    const int k = 64 * (1 + static_cast<int>(random() % 16));
    expect_equal_to_cpu(n, k, i % 2 == 0, random, container::Activation::kNone, true);
  }
}

TEST(FcOnTheVirtualEdgeTpu, RandomShapesWithBiasEqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(7);
  expect_equal_to_cpu(64, 64, true, random);
  for (int i = 0; i < 12; ++i) {
    const int n = 64 * (1 + static_cast<int>(random() % 16));
    const int k = 64 * (1 + static_cast<int>(random() % 16));
    expect_equal_to_cpu(n, k, true, random);
  }
}

// Several layers resident at once (the llm chip path): each layer's groups on its own tiles and
// its parameters at its own wide unit; all caching programs run first, then every layer's
// inference, twice, each equal to the reference in every byte. A layer whose parameters
// overwrote another's would change that layer's bytes. One layer gives each output group its own
// output zero point and clamps (several matmuls of one input in one program).
TEST(FcOnTheVirtualEdgeTpu, PlacedLayersStayResidentTogether) {
  std::mt19937 random(29);
  struct Placed {
    FcLayer layer;
    FcPlacement placement;
    FcPrograms programs;
    std::vector<uint8_t> x, want;
  };
  std::vector<Placed> layers;
  // Tiles, and each group's unit on its tile (several groups of one layer share a unit).
  const int top = 0x2000 - fc_units_per_tile(1024, false);
  const std::vector<std::tuple<int, int, std::vector<int>, std::vector<int>>> shapes = {
      {320, 320, {11, 3, 7, 0, 15}, {}},
      {200, 768, {3, 7, 0, 15}, {4 * 300, 4 * 100, 4 * 300, 4 * 200}},
      {64, 1024, {9}, {top}},
      {1024,
       64,
       {15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
       std::vector<int>(16, 4000)},
      // 24 groups: tiles 0..7 compute two each (their second at their own unit).
      {1536,
       320,
       {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 7, 6, 5, 4, 3, 2, 1, 0},
       [] {
         std::vector<int> u(16, 5000);
         u.resize(24, 5400);
         return u;
       }()}};
  for (const auto& [n, k, tiles, units] : shapes) {
    Placed p;
    FcLayer& l = p.layer;
    l.n = n;
    l.k = k;
    l.weights.resize(size_t(n) * size_t(k));
    for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
    l.in_zp = static_cast<int32_t>(random() % 200) + 28;
    l.out_zp = static_cast<int32_t>(random() % 100) + 78;
    l.in_scale = 0.01f;
    l.out_scale = 1.0f;
    // ~3 standard deviations of the sum (74 * 74 * sqrt(k) * mult) reach 127.
    const float typical = 127.0f / (3.0f * 74 * 74 * std::sqrt(static_cast<float>(k)));
    for (int c = 0; c < n; ++c)
      l.mult.push_back(typical * (0.5f + std::uniform_real_distribution<float>(0, 1)(random)));
    l.clamp_min = fc_clamp(0, l.out_zp, 1.0f);
    l.clamp_max = fc_clamp(255, l.out_zp, 1.0f);
    if (layers.size() == 1 || layers.size() == 4) {  // groups with their own output stages
      for (int g = 0; g < fc_groups(n); ++g) {
        const int32_t zp = 40 + 50 * (g % 4);
        l.group_out_zp.push_back(zp);
        l.group_clamp_min.push_back(fc_clamp(0, zp, 1.0f));
        l.group_clamp_max.push_back(fc_clamp(200, zp, 1.0f));  // a lower bound the outputs hit
      }
    }
    l.input_name = "x";
    l.output_name = "y";
    p.placement = {tiles, units};
    p.programs = generate_fc(l, p.placement);
    p.x.resize(size_t(k));
    for (auto& b : p.x) b = static_cast<uint8_t>(random());
    for (int r = 0; r < n; ++r) {
      const bool own = !l.group_out_zp.empty();
      const size_t g = size_t(r / 64);
      const host::edgetpu::Clamps clamps{own ? l.group_clamp_min[g] : l.clamp_min,
                                         own ? l.group_clamp_max[g] : l.clamp_max};
      const int32_t out_zp = own ? l.group_out_zp[g] : l.out_zp;
      int32_t acc = 0;
      for (int j = 0; j < k; ++j)
        acc += (int32_t{p.x[size_t(j)]} - l.in_zp) * l.weights[size_t(r) * size_t(k) + size_t(j)];
      const int32_t y = host::edgetpu::requantize(acc, l.mult[size_t(r)], clamps, out_zp);
      p.want.push_back(static_cast<uint8_t>(std::clamp(y, 0, 255)));
    }
    ASSERT_GT(std::set<uint8_t>(p.want.begin(), p.want.end()).size(), size_t(16));
    layers.push_back(std::move(p));
  }
  chip::VirtualEdgeTpu chip;
  for (const Placed& p : layers) chip::testing::run_executable(chip, p.programs.caching, {});
  for (int round = 0; round < 2; ++round) {
    for (const Placed& p : layers) {
      SCOPED_TRACE(std::to_string(p.layer.n) + " x " + std::to_string(p.layer.k));
      const auto& y = p.programs.execution.output_layers.at(0);
      const auto got = chip::testing::detile(
          y, chip::testing::run_executable(chip, p.programs.execution, {{"x", p.x}}).at(y.name));
      ASSERT_EQ(got, p.want) << "round " << round;
    }
  }
  EXPECT_EQ(chip.fault(), "");
  EXPECT_THROW(generate_fc(layers[0].layer, {{1, 2, 3, 4, 4}, {}}), Error);  // the same unit
  EXPECT_THROW(generate_fc(layers[0].layer, {{1, 2, 3, 4, 4}, {0, 0, 0, 0, 300}}), Error);
  EXPECT_THROW(generate_fc(layers[0].layer, {{1, 1, 1, 4, 5}, {0, 400, 800, 0, 0}}), Error);
  EXPECT_THROW(generate_fc(layers[0].layer, {{}, std::vector<int>(5, 0x2000 - 8)}), Error);
  EXPECT_THROW(generate_fc(layers[0].layer, {{}, {0, 0, 6, 0, 0}}), Error);
  EXPECT_THROW(generate_fc(layers[0].layer, {{}, {0, 0}}), Error);
  FcLayer short_stages = layers[1].layer;
  short_stages.group_out_zp.pop_back();
  EXPECT_THROW(generate_fc(short_stages, layers[1].placement), Error);
}

}  // namespace
}  // namespace tinycoral::compiler
