// CONV_2D layers as the code generator sees them, and the recognition of a mapped part that is a
// chain of them: [QUANTIZE] CONV_2D (-> CONV_2D ...) [QUANTIZE], batch 1, NHWC, uint8 activations
// on the chip (int8 tensors shifted by 128, as for FULLY_CONNECTED), weights with one scale per
// tensor or per output channel. The per-channel multipliers and the clamps are computed in float32
// with fc_layer.h's formulas (edgetpu_compiler 16.0's, checked on the dense twins).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph.h"

namespace tinycoral::compiler {

struct ConvLayer {
  int h = 0, w = 0, cin = 0;  // input
  int oh = 0, ow = 0, cout = 0;
  int kh = 0, kw = 0, stride_h = 1, stride_w = 1;
  // Tap (ky, kx) of output pixel (y, x) reads input pixel (y s + ky d, x s + kx d) (depthwise
  // layers only; a dilated CONV_2D is refused): the window reaches (k - 1) d + 1 pixels.
  int dilation_h = 1, dilation_w = 1;
  int reach_h() const { return (kh - 1) * dilation_h + 1; }
  int reach_w() const { return (kw - 1) * dilation_w + 1; }
  int pad_top = 0, pad_left = 0;  // TFLite SAME padding (0 for VALID)
  // A DEPTHWISE_CONV_2D with depth multiplier 1 (cout = cin): output channel c reads input
  // channel c only; its weights are [kh][kw][c] (TFLite's [1][kh][kw][C]).
  bool depthwise = false;
  // Weights [cout][kh][kw][cin] as the chip stores them (uint8: int8 + 128, uint8 as is), and the
  // stored zero point (the same for every channel).
  std::vector<uint8_t> weights;
  int32_t weight_zp = 128;
  std::vector<float> mult;        // per output channel, fc_multiplier()
  std::vector<int32_t> bias;      // per output channel; empty = no bias
  int32_t in_zp = 0, out_zp = 0;  // uint8 domain
  float in_scale = 0, out_scale = 0;
  float clamp_min = 0, clamp_max = 0;  // fc_clamp() of the activation's bounds
  // A residual ADD (eltwise_layer.h, match_residual_add): 1x1 geometry, no weights; adds the
  // previous layer's output and the input image of layer `residual_of` as acc = add_w1 (input 0)
  // + add_w2 (input 1) + add_offset, scaled by mult[0]. `add_flowing_first`: input 0 is the
  // previous layer's output.
  int residual_of = -1;
  int32_t add_w1 = 0, add_w2 = 0, add_offset = 0;
  bool add_flowing_first = true;
  bool residual() const { return residual_of >= 0; }
  // Fan-out heads (match_conv_chain): several CONV_2D layers of one geometry reading the same
  // image, each written to a graph output, as one last layer whose output groups are the heads'
  // in turn, each head from a whole group of 64 (its columns past its channels get multiplier 0).
  // Each head keeps its own output zero point and clamps (its ops: a head's groups are parts of
  // their own) and its weight zero point (`weight_zps`, one per output channel: the zero-point
  // row holds one per column).
  // Heads of one group at most share a group when their channels fit it side by side in whole
  // words (PoseNet's 17 heatmaps in columns 0-19, its 34 offsets in 20-55: one set of weight
  // rows for both): each head's op computes the group's columns up to its last word and writes
  // them from column 0, the head of the highest columns first, so that each head's words hold
  // its own channels once all ops have run; the host is sent only the head's words.
  struct Head {
    int g0 = 0, g1 = 0;  // its output groups
    int c0 = 0;          // columns of group g0 before its first channel (another head's)
    int cout = 0;        // its channels, from channel 64 g0 + c0 on
    int32_t out_zp = 0;
    float out_scale = 0, clamp_min = 0, clamp_max = 0;
    std::string output_name;
    bool signed_output = false;
  };
  std::vector<Head> heads;
  // Heads joined by elementwise operations (libredgetpu's looming_64x64_3x3: each head squared by
  // MUL(x, x), the squares ADDed), in graph order. Operand k < heads.size() is head k's output,
  // k >= heads.size() join k - heads.size()'s; the last join's output is the layer's output, the
  // image the chain continues from. Each join's constants are the host's `edgetpu` ones
  // (eltwise_output_stage): ADD acc = w1 (a - a_zp) + w2 (b - b_zp), MUL acc = (a - a_zp)(b -
  // b_zp), then f32(acc) mult, the clamps, + out_zp.
  struct Join {
    bool mul = false;  // MUL, else ADD
    int a = 0, b = 0;
    int32_t a_zp = 0, b_zp = 0, out_zp = 0;
    float out_scale = 0;
    int32_t w1 = 0, w2 = 0, offset = 0;
    float mult = 0, clamp_min = 0, clamp_max = 0;
  };
  std::vector<Join> joins;
  std::vector<int32_t> weight_zps;  // per output channel when they differ; empty: weight_zp
  int32_t weight_zp_of(int channel) const {
    return weight_zps.empty() ? weight_zp : weight_zps.at(static_cast<size_t>(channel));
  }
  // The head that owns output group g (the first of those sharing it), or nullptr (a layer
  // without heads).
  const Head* head_of(int g) const {
    for (const Head& h : heads)
      if (g >= h.g0 && g < h.g1) return &h;
    return nullptr;
  }
  // The heads with channels in groups [g0, g1), the one of the highest columns first (the order
  // their ops run in: each writes the columns below its own, which the heads after it rewrite).
  std::vector<const Head*> heads_in(int g0, int g1) const {
    std::vector<const Head*> in;
    for (const Head& h : heads)
      if (h.g0 < g1 && h.g1 > g0) in.insert(in.begin(), &h);
    return in;
  }
  // The runs of groups the heads' parameters take: [g0, g1) per head, one for heads sharing a
  // group.
  std::vector<std::pair<int, int>> head_spans() const {
    std::vector<std::pair<int, int>> spans;
    for (const Head& h : heads)
      if (spans.empty() || h.g0 >= spans.back().second)
        spans.push_back({h.g0, h.g1});
      else
        spans.back().second = std::max(spans.back().second, h.g1);
    return spans;
  }
};

// The layers of one mapped chain and its boundary tensors.
struct ConvChain {
  std::vector<ConvLayer> layers;
  std::string input_name, output_name;
  bool signed_input = false, signed_output = false;  // int8 (not uint8) at the boundary
  // The image as the host pads it (pad_input_on_host): its width and channels, 0 if not padded.
  int host_w = 0, host_cin = 0;
  // The model's image width when the host sends the image as it is and the chip repacks its rows
  // into the first layer's wider image (repack_input_on_chip); 0 otherwise.
  int repack_w = 0;
  // The host's channels when the repack also widens its pixels to whole words (1-3); 0 when the
  // repack keeps the first layer's channels.
  int repack_cin = 0;
  // The channels of the image as the host sends it.
  int host_channels() const { return repack_cin > 0 ? repack_cin : layers.front().cin; }
};

// An input whose pixels are not whole words (1-3 channels) with rows that cannot be streamed in
// 8-byte units (PoseNet's 481 x 3 rows, 1443 bytes), when the chip cannot repack it
// (repack_input_on_chip, tried first), is padded on the host with its zero point (a PAD on the
// CPU before the custom op, see writer.h): columns only, to the narrowest rows that
// stream, or channels to 4 and columns to rows that stream when that is fewer bytes a row or
// `whole_pixels` asks for it (4-byte pixels always; for a chain whose first layer's partial last
// block of pixels the generator cannot take). Exactly equivalent: new channels hold the input
// zero point, so they add nothing whatever their weights (the weight zero point), and the new
// columns lie where the first layer reads its padding (the zero point) or nothing. Changes the
// first layer and sets host_w and host_cin; false (chain untouched) when no pad is needed or the
// first layer is not a CONV_2D.
bool pad_input_on_host(ConvChain& chain, bool whole_pixels = false);

// The same columns-only image (pad_input_on_host) built on the chip instead: the host sends the
// model's rows as they are (1443 bytes for PoseNet), the chip takes the 8-byte units covering each
// tile's rows into a staging region and copies the rows byte by byte into the first layer's
// image, whose new columns hold the zero point (conv_input.cpp, repack_input). Widens the first
// layer and sets repack_w; false (chain untouched) where pad_input_on_host would not pad columns
// only.
bool repack_input_on_chip(ConvChain& chain);

// The host's image as it is, its 1-3 channel pixels widened on the chip to whole words (the
// first layer's channels padded to 4 with weight zero points, as pad_input_on_host's whole
// pixels): the first layer then takes one word a tap. Sets repack_w and repack_cin.
bool widen_input_on_chip(ConvChain& chain);

// Recognises [QUANTIZE] CONV_2D... [QUANTIZE] where each CONV_2D (or DEPTHWISE_CONV_2D with depth
// multiplier 1 and at least 4 channels) reads the previous one's output, optionally ended by
// fan-out heads: CONV_2D layers of one geometry that all read the same image, each writing a
// tensor the mapped part does not read (a graph output), or a CONCATENATION along channels of
// several of them with the same output quantization (its output is then the head's); or heads
// joined by ADD/MUL into one image (ConvLayer::joins), after which the chain goes on;
// returns "" and fills `chain`, or the reason tinycoral cannot generate it yet.
std::string match_conv_chain(const Graph& graph, const std::vector<int>& mapped_ops,
                             ConvChain& chain);

// TFLite's output size and leading padding for one spatial dimension.
int conv_out_size(int in, int k, int stride, bool same);
int conv_pad_before(int in, int k, int stride, bool same);

}  // namespace tinycoral::compiler
