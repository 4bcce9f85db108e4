// CPU twins of CONV_2D chains for the compiler's tests and sweeps: QUANTIZE -> int8 CONV_2D or
// DEPTHWISE_CONV_2D ...
// [-> RESHAPE -> FULLY_CONNECTED] -> QUANTIZE with random weights, biases and quantizations that
// spread the outputs over the uint8 range, as TensorFlow's converter writes such models.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "container/tflite_model.h"
#include "support/conv_parameters.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler::twins {

using testing::twin_tensor;

using container::Activation;
using container::TensorType;

struct ConvSpec {
  int cout = 8, k = 3, stride = 1;
  bool same = true, bias = true, per_channel = true;
  Activation act = Activation::kNone;
  // A FULLY_CONNECTED over the whole map instead (k, stride, same unused); `reshape` puts the
  // converter's flattening RESHAPE before it.
  bool fc = false, reshape = true;
  // A DEPTHWISE_CONV_2D with depth multiplier 1 instead (cout is the input's channels).
  bool depthwise = false;
  // Tap (ky, kx) reads input pixel (y s + ky d, x s + kx d): a window reaching (k - 1) d + 1.
  int dilation = 1;
  // An AVERAGE_POOL_2D of k x k windows (VALID, the input's quantization) instead.
  bool pool = false;
  // After this (last) layer of a 1x1 map: the classifier's RESHAPE to [1, C] and a SOFTMAX.
  bool softmax = false;
  // A residual ADD instead: the previous layer's output plus the input of layer `residual_from`
  // (the same shape), the previous output as ADD's input 0 when `add_first`; `act` fused.
  int residual_from = -1;
  bool add_first = true;
};

// MobileNet's depthwise form: a DEPTHWISE_CONV_2D over C channels with depth multiplier 1, k x k,
// bias, per-channel weights.
inline ConvSpec depthwise(int k, int stride, bool same = true, Activation act = Activation::kNone) {
  ConvSpec s{0, k, stride, same};
  s.depthwise = true;
  s.act = act;
  return s;
}

// The CPU twin of a chain of CONV_2D layers on an H x W x Cin uint8 image, as TensorFlow's
// converter writes it (int8 inside, QUANTIZE at both ends).
// With int8_io the QUANTIZE operators are left out: the int8 tensors are the model's input ("x")
// and output.
inline container::Model conv_twin(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                                  std::mt19937& random, bool int8_io = false) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  container::Model m;
  m.description = "conv twin";
  m.operator_codes = {{114, "", 1}, {3, "", 3}, {9, "", 5},  {22, "", 1},
                      {4, "", 3},   {1, "", 2}, {25, "", 2}, {0, "", 2}};
  m.buffers = {{}};
  container::Subgraph g;
  float sx = 0.004f + 0.01f * unit(random);
  int zx = static_cast<int>(random() % 200) + 28;
  g.tensors.push_back(twin_tensor("x", TensorType::kUInt8, {1, h, w, cin}, {sx}, {zx}));
  g.tensors.push_back(twin_tensor("xq", TensorType::kInt8, {1, h, w, cin}, {sx}, {zx - 128}));
  container::Operator q_in;
  q_in.opcode_index = 0;
  q_in.inputs = {0};
  q_in.outputs = {1};
  g.operators.push_back(q_in);
  int x_tensor = 1;
  std::vector<int> layer_input;  // the tensor each layer reads
  std::vector<std::pair<float, int>> layer_quant;
  for (size_t i = 0; i < specs.size(); ++i) {
    ConvSpec s = specs[i];
    layer_input.push_back(x_tensor);
    layer_quant.push_back({sx, zx});
    if (s.residual_from >= 0) {
      const auto from = static_cast<size_t>(s.residual_from);
      const auto [so, zo] = layer_quant.at(from);
      const float sy = (sx + so) * (0.35f + 0.2f * unit(random));  // spreads the sums
      const int zy = static_cast<int>(random() % 100) + 78;
      g.tensors.push_back(
          twin_tensor(cat("y", i), TensorType::kInt8, {1, h, w, cin}, {sy}, {zy - 128}));
      container::Operator add;
      add.opcode_index = 7;
      add.inputs = s.add_first ? std::vector<int32_t>{x_tensor, layer_input.at(from)}
                               : std::vector<int32_t>{layer_input.at(from), x_tensor};
      add.outputs = {static_cast<int>(g.tensors.size()) - 1};
      add.builtin_options_type = 11;
      add.options = container::ActivationOptions{s.act};
      g.operators.push_back(add);
      x_tensor = add.outputs[0];
      sx = sy;
      zx = zy;
      continue;
    }
    if (s.depthwise || s.pool) s.cout = cin;
    const int reach = (s.k - 1) * s.dilation + 1;
    const int oh = s.fc     ? 1
                   : s.same ? (h + s.stride - 1) / s.stride
                            : (h - reach + s.stride) / s.stride;
    const int ow = s.fc     ? 1
                   : s.same ? (w + s.stride - 1) / s.stride
                            : (w - reach + s.stride) / s.stride;
    if (s.pool) {
      g.tensors.push_back(
          twin_tensor(cat("y", i), TensorType::kInt8, {1, oh, ow, cin}, {sx}, {zx - 128}));
      container::Operator pool;
      pool.opcode_index = 5;
      pool.inputs = {x_tensor};
      pool.outputs = {static_cast<int>(g.tensors.size()) - 1};
      pool.builtin_options_type = 5;
      container::Pool2DOptions po;
      po.padding = container::Padding::kValid;
      po.filter_h = po.filter_w = s.k;
      po.stride_h = po.stride_w = s.stride;
      pool.options = po;
      g.operators.push_back(pool);
      x_tensor = pool.outputs[0];
      h = oh;
      w = ow;
      continue;
    }
    std::vector<float> sw = random_weight_scales(s.per_channel ? s.cout : 1, random,
                                                 s.act == Activation::kRelu6 ? 20.0f : 1.0f);
    const float sw_sum = std::accumulate(sw.begin(), sw.end(), 0.0f);
    const int kdim = s.fc ? h * w * cin : s.k * s.k * (s.depthwise ? 1 : cin);
    float sy = 3.0f * std::sqrt(static_cast<float>(kdim)) * 74 * 74 * sx *
               (sw_sum / static_cast<float>(sw.size())) / 127;
    // Each layer multiplies the scale by about 2 sqrt(kdim): deep chains (MobileNet v2's 60
    // layers) would pass float's range. Only ratios reach the integers (sx sw / sy is the
    // multiplier; weights and biases are drawn as integers), so shrinking the weight scales
    // with sy keeps the chain's arithmetic and its scales finite.
    if (sy > 1e4f) {
      for (float& v : sw) v *= sx / sy;
      sy = sx;
    }
    const int zy = static_cast<int>(random() % 100) + 78;
    ConvParameters p = random_conv_parameters(std::move(sw), static_cast<size_t>(s.cout) * kdim,
                                              s.cout, 20000, random);
    if (s.depthwise)  // k^2 products per output: a smaller bias keeps the outputs in range
      for (auto& b : p.bias) b = b * s.k * s.k / 64;
    std::vector<int32_t> wshape = {s.cout, s.k, s.k, cin};
    if (s.fc) wshape = {s.cout, kdim};
    if (s.depthwise) wshape = {1, s.k, s.k, s.cout};
    const int wt = add_conv_parameters(m, g, p, std::to_string(i), wshape, sx);
    if (s.depthwise) g.tensors[static_cast<size_t>(wt)].quantization.quantized_dimension = 3;
    g.tensors.push_back(
        twin_tensor(cat("y", i), TensorType::kInt8, {1, oh, ow, s.cout}, {sy}, {zy - 128}));
    container::Operator conv;
    conv.opcode_index = 1;
    conv.inputs = {x_tensor, wt, s.bias ? wt + 1 : -1};
    conv.outputs = {wt + 2};
    conv.builtin_options_type = 1;
    container::Conv2DOptions o;
    o.padding = s.same ? container::Padding::kSame : container::Padding::kValid;
    o.stride_h = o.stride_w = s.stride;
    o.dilation_h = o.dilation_w = s.dilation;
    o.activation = s.act;
    conv.options = o;
    if (s.depthwise) {
      conv.opcode_index = 4;
      conv.builtin_options_type = 2;
      container::DepthwiseConv2DOptions d;
      d.padding = o.padding;
      d.stride_h = d.stride_w = s.stride;
      d.dilation_h = d.dilation_w = s.dilation;
      d.activation = s.act;
      conv.options = d;
    }
    if (s.fc) {
      if (s.reshape) {  // the converter's flatten: same bytes, same quantization
        const int flat = static_cast<int>(g.tensors.size());
        g.tensors.push_back(
            twin_tensor(cat("flat", i), TensorType::kInt8, {1, kdim}, {sx}, {zx - 128}));
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
  if (specs.back().softmax) {  // RESHAPE [1, 1, 1, C] -> [1, C], SOFTMAX in int8 (1/256, -128)
    const int flat = static_cast<int>(g.tensors.size());
    g.tensors.push_back(twin_tensor("logits", TensorType::kInt8, {1, cin}, {sx}, {zx - 128}));
    g.tensors.push_back(
        twin_tensor("probabilities", TensorType::kInt8, {1, cin}, {1.0f / 256}, {-128}));
    container::Operator reshape, softmax;
    reshape.opcode_index = 3;
    reshape.inputs = {x_tensor};
    reshape.outputs = {flat};
    softmax.opcode_index = 6;
    softmax.inputs = {flat};
    softmax.outputs = {flat + 1};
    softmax.builtin_options_type = 9;
    softmax.options = container::SoftmaxOptions{};
    g.operators.push_back(reshape);
    g.operators.push_back(softmax);
    x_tensor = flat + 1;
    sx = 1.0f / 256;
    zx = 0;
  }
  const int out = static_cast<int>(g.tensors.size());
  g.tensors.push_back(twin_tensor("y", TensorType::kUInt8,
                                  specs.back().fc || specs.back().softmax
                                      ? std::vector<int32_t>{1, cin}
                                      : std::vector<int32_t>{1, h, w, cin},
                                  {sx}, {zx}));
  container::Operator q_out;
  q_out.opcode_index = 0;
  q_out.inputs = {x_tensor};
  q_out.outputs = {out};
  g.operators.push_back(q_out);
  g.inputs = {0};
  g.outputs = {out};
  if (int8_io) {
    g.operators.erase(g.operators.begin());
    g.operators.pop_back();
    g.tensors[0].name = "x_uint8";
    g.tensors[1].name = "x";
    g.inputs = {1};
    g.outputs = {x_tensor};
  }
  m.subgraphs.push_back(std::move(g));
  return m;
}

inline std::string describe(int h, int w, int cin, const std::vector<ConvSpec>& specs) {
  std::string s = cat(h, "x", w, "x", cin);
  for (const ConvSpec& c : specs)
    s += c.residual_from >= 0 ? cat(" -> add layer ", c.residual_from, "'s input",
                                    c.add_first ? "" : " (first)", " act ", static_cast<int>(c.act))
         : c.pool             ? cat(" -> average pool ", c.k, "x", c.k, " s", c.stride)
         : c.fc               ? cat(" -> fc ", c.cout, c.reshape ? " after reshape" : "")
                : cat(c.depthwise ? " -> depthwise " : " -> conv ", c.k, "x", c.k, " s", c.stride,
                      c.dilation > 1 ? cat(" d", c.dilation) : "", c.same ? " SAME" : " VALID",
                      " cout ", c.cout, c.bias ? " bias" : "", c.per_channel ? "" : " per-tensor",
                      " act ", static_cast<int>(c.act));
  return s;
}

// A random layer on a random image that the generator covers: rows of whole 8-byte units, the
// kernel inside the image for VALID, up to 64 output channels or whole groups of 64.
struct RandomCase {
  int h, w, cin;
  ConvSpec spec;
};
inline RandomCase random_case(std::mt19937& random, int max_side = 14) {
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
  c.h = lo + static_cast<int>(random() % static_cast<unsigned>(max_side));
  c.w = lo + static_cast<int>(random() % static_cast<unsigned>(max_side));
  if (c.w * c.cin % 8 != 0 && (c.h % 2 != 0 || c.w * c.cin > 128)) ++c.w;
  return c;
}

// A chain of `layers` (2 or more) from `first` on: the layers after it random_case's, SAME (the
// maps shrink quickly otherwise), every output but the last in whole words (a multiple of 4
// channels up to 64).
inline std::vector<ConvSpec> random_chain(ConvSpec first, int layers, std::mt19937& random) {
  const auto whole_words = [](int cout) { return cout <= 64 ? (cout + 3) / 4 * 4 : cout; };
  first.cout = whole_words(first.cout);
  std::vector<ConvSpec> specs{first};
  for (int j = 1; j < layers; ++j) {
    ConvSpec s = random_case(random).spec;
    s.same = true;
    if (j + 1 < layers) s.cout = whole_words(s.cout);
    specs.push_back(s);
  }
  return specs;
}

// The same on a 1-3 channel image: width a multiple of 4 (rows of whole words), an even height
// when rows are 4 bytes past whole 8-byte units, and B x Cout <= 64 in multiples of 4 (B output
// pixels per position: the least B with B stride Cin a multiple of 4).
inline RandomCase random_few_channel_case(std::mt19937& random, int max_side = 14) {
  RandomCase c = random_case(random, max_side);
  c.cin = 1 + static_cast<int>(random() % 3);
  c.w = (c.w + 3) / 4 * 4;
  if (c.w * c.cin % 8 != 0 && c.h % 2 != 0) ++c.h;
  int block = 1;
  while (block * c.spec.stride * c.cin % 4 != 0) ++block;
  const int unit = block == 4 ? 1 : block == 2 ? 2 : 4;  // B x unit is a multiple of 4
  c.spec.cout = unit * (1 + static_cast<int>(random() % static_cast<unsigned>(64 / block / unit)));
  return c;
}

}  // namespace tinycoral::compiler::twins
