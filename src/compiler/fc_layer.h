// One FULLY_CONNECTED layer as the code generator sees it: y[N] = requant(W[N,K] x[K]), batch 1,
// int8 weights with one scale per output channel, uint8 or int8 activations at the boundary (the
// QUANTIZE operators around an int8 layer only shift zero points by 128 and are folded in). The
// per-channel multiplier and the clamps are computed in float32 exactly as edgetpu_compiler 16.0
// stores them (docs/compiler.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tinycoral::compiler {

struct FcLayer {
  int n = 0, k = 0;
  std::vector<int8_t> weights;  // [n][k], symmetric (zero point 0)
  std::vector<float> mult;    // per output channel: f32(f32(w_scale * x_scale) * f32(1 / y_scale))
  std::vector<int32_t> bias;  // per output channel; empty = no bias (the twins' form)
  int32_t in_zp = 0, out_zp = 0;  // uint8 domain
  float in_scale = 0, out_scale = 0;
  float clamp_min = 0,
        clamp_max = 0;  // f32(f32((q - out_zp) * y_scale) * f32(1 / y_scale)), q = 0/255
  std::string input_name, output_name;               // the boundary tensors' names
  bool signed_input = false, signed_output = false;  // int8 (not uint8) at the boundary
  // Several matmuls of one input in one program (the llm chip path): each 64-output group may
  // have its own output zero point and clamps (one op per distinct stage). Empty: the layer's.
  std::vector<int32_t> group_out_zp;
  std::vector<float> group_clamp_min, group_clamp_max;
  // The weights' K when it is less than k (0: k), a multiple of 4: the input keeps k bytes in
  // 64-byte pieces (k a multiple of 64), the op runs weight_k / 4 words and the tiles hold
  // weight_k / 4 weight rows a group (fc_units_per_tile(layer): 8 + weight_k units without a
  // bias). Columns weight_k..k-1 must be zero: they add nothing. The one way to an FC whose K is
  // not a multiple of 64 (the llm path's dim-K FCs, wo over the heads side by side, the scores
  // over a head's bytes): the generators refuse a k that is not a multiple of 64.
  int weight_k = 0;
  // The K the op runs over and the weights hold (weight_k, else k).
  int op_k() const { return weight_k ? weight_k : k; }
};

// Recognises the mapped part [QUANTIZE] FULLY_CONNECTED [QUANTIZE] (uint8 at both ends) and builds
// the layer; returns "" and fills `layer`, or the reason tinycoral cannot generate it yet.
std::string match_fc(const Graph& graph, const std::vector<int>& mapped_ops, FcLayer& layer);

// The per-channel multiplier and the clamps of the output stage (fc_layer.h's formulas).
float fc_multiplier(float w_scale, float x_scale, float y_scale);
float fc_clamp(int q, int32_t out_zp, float y_scale);
// Every MAC layer's output stage (FC, conv, depthwise): the multiplier of each output channel
// from the weights' scale for that channel (or their single scale), and the clamps of a fused
// NONE, RELU or RELU6 (TFLite's bounds in the quantized domain; rounding is monotone, so clamping
// before it gives the same bytes). activation_clamps is false for any other activation.
std::vector<float> channel_multipliers(const GraphTensor& w, int channels, float x_scale,
                                       float y_scale);
bool activation_clamps(container::Activation activation, int32_t out_zp, float y_scale,
                       float& clamp_min, float& clamp_max);

}  // namespace tinycoral::compiler
