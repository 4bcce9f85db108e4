// Test and bench helper: CPU twins of the gabor family of layers (QUANTIZE -> DEPTHWISE_CONV_2D
// with one input channel and depth multiplier C, SAME, stride 1 or 2 -> [AVERAGE_ or MAX_POOL_2D]
// -> QUANTIZE, uint8 at both ends; or int8 without the QUANTIZEs) of any size, with or without a
// bias and per-channel scales, and one check that compiles a twin, runs it on the virtual Edge TPU
// (parameter caching, then two inferences) and counts the output bytes that differ from the CPU
// reference in `edgetpu` rounding. Header-only so that the sweep in bench/ shares it.
#pragma once

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "support/compiled_twin.h"
#include "support/conv_parameters.h"
#include "support/same_bytes.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler::testing {

struct DepthwiseShape {
  int h, w, k, c, pool;                                      // pool 0 = none
  bool max = false;                                          // MAX_POOL_2D, else AVERAGE_POOL_2D
  container::Activation act = container::Activation::kNone;  // fused into the depthwise layer
  bool int8_io = false;  // int8 model input and output (no QUANTIZE operators)
  bool scales = false;   // one weight scale per channel (else one shared by all, as gabor's)
  bool bias = false;     // a random int32 bias (else zero, as gabor's)
  int stride = 1;        // the depthwise layer's stride (SAME padding)
};

inline std::string describe(const DepthwiseShape& s) {
  return cat(
      s.h, "x", s.w, " k", s.k, " C", s.c,
      s.pool ? cat(s.max ? " max pool " : " average pool ", s.pool) : "",
      s.act != container::Activation::kNone ? cat(" activation ", static_cast<int>(s.act)) : "",
      s.int8_io ? " int8" : "", s.scales ? " per-channel scales" : "", s.bias ? " bias" : "",
      s.stride > 1 ? cat(" stride ", s.stride) : "");
}

// As TensorFlow's converter writes the gabor models: per-channel int8 weights (one scale shared
// by the channels, as the gabor filters have), a zero int32 bias, random input and output
// quantizations that spread the outputs over the uint8 range.
inline container::Model depthwise_twin(const DepthwiseShape& s, std::mt19937& random) {
  using container::TensorType;
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float sx = 0.002f + 0.01f * unit(random);
  const int x_zp = static_cast<int>(random() % 256);
  const float sw = 0.0005f + 0.002f * unit(random);
  std::vector<float> wscale(static_cast<size_t>(s.c), sw);
  if (s.scales) {
    for (float& w : wscale) w = sw * (0.5f + unit(random));
  }
  // ~3 standard deviations of the sum map to 127; the input's mean sits |127.5 - zp| from its zero
  // point, which a channel's weights carry into its sum. (A max pool's outputs sit in the upper
  // tail: twice the range keeps them off 255.)
  const float spread = 74.0f + std::abs(127.5f - static_cast<float>(x_zp));
  const float sy = (s.pool && s.max ? 2.0f : 1.0f) * 3.0f * static_cast<float>(s.k) * 74 * spread *
                   sx * sw / 127;
  const int y_zp = static_cast<int>(random() % 100) + 78;
  const twins::ConvParameters params = twins::random_conv_parameters(
      wscale, static_cast<size_t>(s.k * s.k * s.c), s.c, s.bias ? 5000 : 0, random);

  container::Model m;
  m.description = "depthwise twin";
  m.operator_codes = {{114, "", 1}, {4, "", 3}, {s.max ? 17 : 1, "", 2}};
  m.buffers = {{}, {params.weights}, {twins::le32(params.bias)}};
  container::Subgraph g;
  const auto c = static_cast<size_t>(s.c);
  const std::vector<int64_t> zeros(c, 0);
  const int dh = (s.h + s.stride - 1) / s.stride, dw_w = (s.w + s.stride - 1) / s.stride;
  const int oh = s.pool ? dh / s.pool : dh, ow = s.pool ? dw_w / s.pool : dw_w;
  g.tensors = {
      twin_tensor("x", TensorType::kUInt8, {1, s.h, s.w, 1}, {sx}, {x_zp}),
      twin_tensor("xq", TensorType::kInt8, {1, s.h, s.w, 1}, {sx}, {x_zp - 128}),
      twin_tensor("w", TensorType::kInt8, {1, s.k, s.k, s.c}, wscale, zeros, 1),
      twin_tensor("b", TensorType::kInt32, {s.c}, std::vector<float>(c, sw * sx), zeros, 2),
      twin_tensor("yq", TensorType::kInt8, {1, dh, dw_w, s.c}, {sy}, {y_zp - 128}),
      twin_tensor("pq", TensorType::kInt8, {1, oh, ow, s.c}, {sy}, {y_zp - 128}),
      twin_tensor("y", TensorType::kUInt8, {1, oh, ow, s.c}, {sy}, {y_zp})};
  g.tensors[2].quantization.quantized_dimension = 3;
  container::Operator q_in, dw, pool, q_out;
  q_in.opcode_index = 0;
  q_in.inputs = {0};
  q_in.outputs = {1};
  dw.opcode_index = 1;
  dw.inputs = {1, 2, 3};
  dw.outputs = {4};
  dw.builtin_options_type = 2;
  container::DepthwiseConv2DOptions o;
  o.depth_multiplier = s.c;
  o.stride_h = o.stride_w = s.stride;
  o.activation = s.act;
  dw.options = o;
  pool.opcode_index = 2;
  pool.inputs = {4};
  pool.outputs = {5};
  pool.builtin_options_type = 5;
  container::Pool2DOptions p;
  p.padding = container::Padding::kValid;
  p.filter_h = p.filter_w = p.stride_h = p.stride_w = s.pool;
  pool.options = p;
  q_out.opcode_index = 0;
  q_out.inputs = {s.pool ? 5 : 4};
  q_out.outputs = {6};
  g.operators = s.pool ? std::vector{q_in, dw, pool, q_out} : std::vector{q_in, dw, q_out};
  if (s.int8_io) {  // the layer's int8 tensors are the model's input and output
    g.tensors[0] = twin_tensor("x", TensorType::kInt8, {1, s.h, s.w, 1}, {sx}, {x_zp - 128});
    g.tensors[6] = twin_tensor("y", TensorType::kInt8, {1, oh, ow, s.c}, {sy}, {y_zp - 128});
    dw.inputs[0] = 0;
    (s.pool ? pool : dw).outputs = {6};
    g.operators = s.pool ? std::vector{dw, pool} : std::vector{dw};
  }
  g.inputs = {0};
  g.outputs = {6};
  m.subgraphs.push_back(std::move(g));
  return m;
}

struct ChipCheck {
  std::string refused;        // the compiler's reason when it left the layer on the CPU
  size_t bytes = 0;           // output bytes per inference
  size_t distinct = 0;        // distinct output values of the reference
  size_t saturated = 0;       // reference outputs at 0 or 255
  size_t at_zero_point = 0;   // reference outputs equal to the output zero point
  size_t differ[2] = {0, 0};  // bytes that differ, first and second inference
  std::string fault;          // the chip's fault, if any
};

// Compiles the twin of `s`, runs it on the virtual Edge TPU on a random image and compares.
inline ChipCheck check_on_chip(const DepthwiseShape& s, std::mt19937& random) {
  ChipCheck r;
  const container::Model twin = depthwise_twin(s, random);
  const CompiledTwin compiled(twin);
  if (compiled.result.edgetpu_subgraphs != 1) {
    r.refused = compiled.result.partition.decisions.at(0).reason;
    return r;
  }
  host::Interpreter cpu = edgetpu_reference(twin);
  const std::vector<uint8_t> x = random_bytes(static_cast<size_t>(s.h * s.w), random);
  const std::vector<uint8_t> want = reference_output(cpu, x);
  // The host flips the most significant bit of int8 (SIGNED_FIXED_POINT8) inputs and outputs.
  const uint8_t flip = s.int8_io ? 0x80 : 0;
  std::vector<uint8_t> device_x(x);
  for (auto& b : device_x) b ^= flip;
  r.bytes = want.size();
  r.distinct = std::set<uint8_t>(want.begin(), want.end()).size();
  const int y_zp = static_cast<int>(twin.subgraphs[0].tensors[6].quantization.zero_point[0]);
  for (uint8_t v : want) r.at_zero_point += static_cast<int>(s.int8_io ? int8_t(v) : v) == y_zp;
  for (uint8_t v : want) r.saturated += (v ^ flip) == 0 || (v ^ flip) == 255;

  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> got = compiled.infer(chip, {{"x", device_x}});
    for (auto& b : got) b ^= flip;
    r.differ[inference] = differing_bytes(got, want);
  }
  r.fault = chip.fault();
  return r;
}

// A random member of the family the generator covers: H a multiple of 4, W of 16 up to 256, odd k
// from 3 to 11 (at most the block), C in {4, 8, 12, 16}; a pool (average or max, window 2, 4 or 8)
// where it divides each tile's block, the block has at most 512 positions and the pooled block is
// whole 8-byte units; per-channel weight scales and a bias half of the time each, stride 2 a third
// of the time (output blocks of whole words).
inline DepthwiseShape random_depthwise_shape(std::mt19937& random, int max_h = 128) {
  for (;;) {
    DepthwiseShape s{};
    s.w = 16 * (1 + static_cast<int>(random() % 32));
    s.h = 4 * (1 + static_cast<int>(random() % static_cast<unsigned>(max_h / 4)));
    s.k = 3 + 2 * static_cast<int>(random() % 5);
    s.c = 4 * (1 + static_cast<int>(random() % 4));
    s.pool = random() % 2 == 0 ? 2 << (random() % 3) : 0;
    s.max = random() % 2 == 0;
    s.scales = random() % 2 == 0;
    s.bias = random() % 2 == 0;
    s.stride = random() % 3 == 0 ? 2 : 1;
    const int bh = s.h / 4, bw = s.w / 4;
    if (bh < 2 || bh < s.k / 2 || bw < s.k / 2) continue;
    if (bh % s.stride != 0 || bw / s.stride % 4 != 0) continue;
    const int oh = bh / s.stride, ow = bw / s.stride;  // output block
    if (s.pool && (oh % s.pool != 0 || ow % s.pool != 0 || oh * ow > 512 ||
                   (oh / s.pool) * (ow / s.pool) * s.c % 8 != 0)) {
      continue;
    }
    return s;
  }
}

}  // namespace tinycoral::compiler::testing
