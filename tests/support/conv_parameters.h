// The random parameters of the compiler tests' convolution and dense twins, drawn as TensorFlow's
// converter quantizes trained ones: int8 weights symmetric around zero point 0 with one scale per
// output channel (or one for all), int32 biases whose scale is the input's times the weights'.
// One place, so that every twin's weights mean the same and a test reads as its shapes.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler::twins {

// Little-endian int32 bytes, as a buffer holds biases and shapes.
inline std::vector<uint8_t> le32(const std::vector<int32_t>& v) {
  std::vector<uint8_t> out;
  for (int32_t x : v)
    for (int i = 0; i < 4; ++i)
      out.push_back(static_cast<uint8_t>(static_cast<uint32_t>(x) >> 8 * i));
  return out;
}

// `n` weight scales around 0.0009 (x `boost`: RELU6 layers want outputs well past 6 to clip).
inline std::vector<float> random_weight_scales(size_t n, std::mt19937& random, float boost = 1) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> scales(n);
  for (float& v : scales) v = boost * (0.0004f + 0.001f * unit(random));
  return scales;
}

struct ConvParameters {
  std::vector<float> scales;     // the weights': one per output channel, or one for all
  std::vector<uint8_t> weights;  // int8 in [-127, 127], as the buffer holds them
  std::vector<int32_t> bias;     // one per output channel
};

// `weights` random int8 weights, then `cout` biases in [-bias_range, bias_range] (all 0 and none
// drawn when bias_range is 0), in that order from `random`.
inline ConvParameters random_conv_parameters(std::vector<float> scales, size_t weights, int cout,
                                             int bias_range, std::mt19937& random) {
  ConvParameters p{std::move(scales), std::vector<uint8_t>(weights),
                   std::vector<int32_t>(static_cast<size_t>(cout))};
  for (auto& b : p.weights) b = static_cast<uint8_t>(static_cast<int>(random() % 255) - 127);
  if (bias_range > 0)
    for (auto& b : p.bias)
      b = static_cast<int32_t>(random() % static_cast<uint32_t>(2 * bias_range + 1)) - bias_range;
  return p;
}

// Adds `p` to `m` as two buffers and to `g` as the tensors "w<tag>" (`weight_shape`) and "b<tag>"
// (scale `input_scale` x the channel's weight scale); returns the weights' tensor (the bias's is
// the next one).
inline int add_conv_parameters(container::Model& m, container::Subgraph& g, const ConvParameters& p,
                               const std::string& tag, std::vector<int32_t> weight_shape,
                               float input_scale) {
  const auto wbuf = static_cast<uint32_t>(m.buffers.size());
  m.buffers.push_back({p.weights});
  m.buffers.push_back({le32(p.bias)});
  std::vector<float> bias_scale;
  for (size_t c = 0; c < p.bias.size(); ++c)
    bias_scale.push_back(input_scale * p.scales[p.scales.size() == 1 ? 0 : c]);
  const int wt = static_cast<int>(g.tensors.size());
  g.tensors.push_back(testing::twin_tensor("w" + tag, container::TensorType::kInt8,
                                           std::move(weight_shape), p.scales,
                                           std::vector<int64_t>(p.scales.size(), 0), wbuf));
  g.tensors.push_back(testing::twin_tensor("b" + tag, container::TensorType::kInt32,
                                           {static_cast<int32_t>(p.bias.size())}, bias_scale,
                                           std::vector<int64_t>(bias_scale.size(), 0), wbuf + 1));
  return wt;
}

}  // namespace tinycoral::compiler::twins
