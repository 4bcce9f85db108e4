// The "soft-argmax" part as the softmax code generator sees it: [QUANTIZE] [RESHAPE] SOFTMAX over
// N positions, then FULLY_CONNECTED layers with one output each that read the probabilities
// (libredgetpu's bright spot trackers: the x and y coordinates), joined by a CONCATENATION. The
// activations are uint8 (or int8) at the boundary; QUANTIZEs that only move a zero point by 128
// are folded in. Multipliers and clamps are computed in float32 as edgetpu_compiler 16.0 stores
// them (the FC's formulas, fc_layer.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tinycoral::compiler {

struct SoftmaxFcLayer {
  int n = 0;           // softmax positions
  float exp_mult = 0;  // f32(beta x the softmax input's scale): the exponential's input scale
  // The FC clamp formula in the softmax input's scale s (255 and -255 when s = 1; the colour
  // trackers' s = 0.994 gives 255.000015 and -255.000015): the maximum's upper clamp, and the
  // lower clamp of x - m + 255.
  float byte_clamp_max = 0, shift_clamp_min = 0;
  // One entry per FULLY_CONNECTED, in the CONCATENATION's input order.
  std::vector<std::vector<int8_t>> weights;  // [n] each, symmetric
  std::vector<float> mult;                   // f32(f32(s_w s_p) f32(1 / s_y)), s_p = 1/256
  int32_t in_zp = 0, out_zp = 0;             // uint8 domain
  float in_scale = 0, out_scale = 0;
  float clamp_min = 0, clamp_max = 0;
  std::string input_name, output_name;
  bool signed_input = false, signed_output = false;
};

// Recognises [QUANTIZE] [RESHAPE] SOFTMAX FULLY_CONNECTED x2 CONCATENATION and fills `layer`;
// returns "" or the reason tinycoral cannot generate it (the log's sentence).
std::string match_softmax_fc(const Graph& graph, const std::vector<int>& mapped_ops,
                             SoftmaxFcLayer& layer);

}  // namespace tinycoral::compiler
