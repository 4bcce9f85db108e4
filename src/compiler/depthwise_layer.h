// One DEPTHWISE_CONV_2D layer, optionally followed by an AVERAGE_ or MAX_POOL_2D, as the depthwise
// code generator sees it: uint8 (or int8) activations at the boundary (QUANTIZE operators that only
// move a zero point by 128 are folded in), int8 weights with one scale per output channel, an int32
// bias. The multiplier and the clamps are computed in float32 as edgetpu_compiler 16.0 stores them
// (the FC's formulas, fc_layer.h). The pool keeps the depthwise output's quantization (TFLite
// requires it for AVERAGE_POOL_2D), so it only averages or takes the maximum.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tinycoral::compiler {

struct DepthwiseLayer {
  int h = 0, w = 0;                // input height and width
  int in_channels = 0;             // C_in
  int channels = 0;                // C_out = C_in * depth multiplier
  int kh = 0, kw = 0;              // kernel
  int stride_h = 1, stride_w = 1;  // convolution strides
  bool same_padding = true;        // TFLite SAME (else VALID)
  std::vector<int8_t> weights;     // [kh][kw][channels], symmetric (zero point 0)
  std::vector<int32_t> bias;       // per output channel (zeros when absent)
  std::vector<float> mult;         // per output channel: f32(f32(w_scale x_scale) f32(1 / y_scale))
  int32_t in_zp = 0, out_zp = 0;   // uint8 domain
  float in_scale = 0, out_scale = 0;
  float clamp_min = 0, clamp_max = 0;  // fc_clamp of the activation's bounds
  int pool = 0;                        // pool window (and stride); 0 = no pool
  bool max_pool = false;               // MAX_POOL_2D (else AVERAGE_POOL_2D)
  std::string input_name, output_name;
  bool signed_input = false, signed_output = false;

  int out_h() const;  // the depthwise output (before the pool)
  int out_w() const;
};

// Recognises [QUANTIZE] DEPTHWISE_CONV_2D [AVERAGE_POOL_2D | MAX_POOL_2D] [QUANTIZE] and fills
// `layer`; returns
// "" or the reason tinycoral cannot generate it (the log's sentence).
std::string match_depthwise(const Graph& graph, const std::vector<int>& mapped_ops,
                            DepthwiseLayer& layer);

}  // namespace tinycoral::compiler
