// CPU twins of conv chains whose last map is read by fan-out heads (several CONV_2D layers reading
// the same image, each written to its own graph output or joined by a CONCATENATION along
// channels: PoseNet's heatmaps, offsets and displacements), and PoseNet-shaped twins at any input
// size (MobileNet v1's trunk at output stride 16 and PoseNet's three heads).
#pragma once

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "container/tflite_model.h"
#include "support/conv_parameters.h"
#include "support/conv_twin.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler::twins {

struct HeadSpec {
  int cout = 8;
  int k = 1;
  bool concat_with_next = false;  // joined with the next head by a CONCATENATION
  Activation act = Activation::kNone;
  bool quantize = false;  // a QUANTIZE to uint8 after the output (gen2021 PoseNet's heads)
};

// Adds a CONV_2D reading tensor `x` (int8 [1, h, w, cin], scale sx) with output quantization
// (sy, zy) to `m`; returns its output tensor.
inline int add_head_conv(container::Model& m, int x, int cin, float sx, const HeadSpec& spec,
                         float sy, int zy, std::mt19937& random) {
  container::Subgraph& g = m.subgraphs.at(0);
  const std::vector<int32_t> shape = g.tensors.at(static_cast<size_t>(x)).shape;  // (a copy)
  const twins::ConvParameters p = twins::random_conv_parameters(
      twins::random_weight_scales(static_cast<size_t>(spec.cout), random),
      static_cast<size_t>(spec.cout) * spec.k * spec.k * cin, spec.cout, 20000, random);
  const int wt = static_cast<int>(g.tensors.size());
  const std::string name = cat("head", wt);
  twins::add_conv_parameters(m, g, p, name, {spec.cout, spec.k, spec.k, cin}, sx);
  g.tensors.push_back(
      twin_tensor(name, TensorType::kInt8, {1, shape[1], shape[2], spec.cout}, {sy}, {zy - 128}));
  container::Operator op;
  op.opcode_index = 1;
  op.inputs = {x, wt, wt + 1};
  op.outputs = {wt + 2};
  op.builtin_options_type = 1;
  container::Conv2DOptions o;
  o.padding = container::Padding::kSame;
  o.activation = spec.act;
  op.options = o;
  g.operators.push_back(op);
  return wt + 2;
}

// The twin of a conv chain (int8 input and output, conv_twin) whose last output is read by the
// heads; the heads' outputs (a CONCATENATION's for joined heads) are the graph's outputs.
inline container::Model heads_twin(int h, int w, int cin, const std::vector<ConvSpec>& trunk,
                                   const std::vector<HeadSpec>& heads, std::mt19937& random) {
  container::Model m = conv_twin(h, w, cin, trunk, random, /*int8_io=*/true);
  m.operator_codes.push_back({2, "", 1});  // CONCATENATION
  const auto concat_code = static_cast<uint32_t>(m.operator_codes.size() - 1);
  container::Subgraph& g = m.subgraphs.at(0);
  const int x = g.outputs.at(0);
  const container::Tensor source = g.tensors.at(static_cast<size_t>(x));
  const int channels = source.shape.at(3);
  const float sx = source.quantization.scale.at(0);
  g.outputs.clear();
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<int> joined;
  float sy = 0;
  int zy = 0;
  for (const HeadSpec& spec : heads) {
    if (joined.empty()) {  // a new output: its own quantization, spreading the sums
      sy = 3.0f * std::sqrt(static_cast<float>(spec.k * spec.k * channels)) * 74 * 74 * sx *
           0.0009f / 127 * (0.7f + 0.6f * unit(random));
      zy = static_cast<int>(random() % 100) + 78;
    }
    const int out = add_head_conv(m, x, channels, sx, spec, sy, zy, random);
    joined.push_back(out);
    if (spec.concat_with_next) continue;
    if (joined.size() == 1) {
      g.outputs.push_back(out);
    } else {
      // (The CONCATENATION's output is this head's output.)
      int total = 0;
      for (int t : joined) total += g.tensors.at(static_cast<size_t>(t)).shape.at(3);
      const std::vector<int32_t> shape = g.tensors.at(static_cast<size_t>(out)).shape;
      g.tensors.push_back(twin_tensor(cat("concat", g.tensors.size()), TensorType::kInt8,
                                      {1, shape[1], shape[2], total}, {sy}, {zy - 128}));
      container::Operator concat;
      concat.opcode_index = concat_code;
      concat.inputs = joined;
      concat.outputs = {static_cast<int>(g.tensors.size()) - 1};
      concat.builtin_options_type = 10;
      container::ConcatenationOptions co;
      co.axis = 3;
      concat.options = co;
      g.operators.push_back(concat);
      g.outputs.push_back(concat.outputs[0]);
    }
    joined.clear();
    if (spec.quantize) {
      container::Tensor y = g.tensors.at(static_cast<size_t>(g.outputs.back()));
      y.name += "_uint8";
      y.type = TensorType::kUInt8;
      y.quantization.zero_point[0] += 128;
      g.tensors.push_back(y);
      container::Operator q;
      q.opcode_index = 0;  // QUANTIZE
      q.inputs = {g.outputs.back()};
      q.outputs = {static_cast<int>(g.tensors.size()) - 1};
      g.operators.push_back(q);
      g.outputs.back() = q.outputs[0];
    }
  }
  return m;
}

// PoseNet's trunk (MobileNet v1 at output stride 16, the 0.75 model's channels divided by
// `divisor`: 24 -> 48 -> 96 -> 192 -> 384 at 1, the last stride-2 layer at stride 1) on an
// h x w x 3 image: the first 3x3 stride-2 conv and 13 depthwise/pointwise pairs, RELU6 after each.
inline std::vector<ConvSpec> posenet_trunk(int divisor = 1) {
  auto layer = [](int cout, int k, int stride, bool depthwise) {
    ConvSpec s;
    s.cout = cout;
    s.k = k;
    s.stride = stride;
    s.depthwise = depthwise;
    s.act = Activation::kRelu6;
    return s;
  };
  std::vector<ConvSpec> trunk = {layer(24 / divisor, 3, 2, false)};
  int c = 24 / divisor;
  // (Output channels and stride of each pair's depthwise layer.)
  const std::pair<int, int> pairs[] = {{48, 1},  {96, 2},  {96, 1},  {192, 2}, {192, 1},
                                       {384, 2}, {384, 1}, {384, 1}, {384, 1}, {384, 1},
                                       {384, 1}, {384, 1}, {384, 1}};
  for (const auto& [cout, stride] : pairs) {
    trunk.push_back(layer(c, 3, stride, true));
    c = cout / divisor;
    trunk.push_back(layer(c, 1, 1, false));
  }
  return trunk;
}

// PoseNet's heads: heatmaps (17), short offsets (34) and the mid offsets (two 32-channel
// convolutions joined by a CONCATENATION).
inline std::vector<HeadSpec> posenet_heads() { return {{17}, {34}, {32, 1, true}, {32}}; }

// A PoseNet-shaped twin (int8 input and outputs) on an h x w x 3 image.
inline container::Model posenet_twin(int h, int w, std::mt19937& random, int divisor = 1) {
  return heads_twin(h, w, 3, posenet_trunk(divisor), posenet_heads(), random);
}

}  // namespace tinycoral::compiler::twins
