// Recognising a chain of CONV_2D layers and computing their output stages (conv_layer.h).
#include "compiler/conv_layer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <set>

#include "common/error.h"
#include "compiler/conv_plan.h"
#include "compiler/eltwise_layer.h"
#include "compiler/fc_layer.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

int conv_out_size(int in, int k, int stride, bool same) {
  return same ? (in + stride - 1) / stride : (in - k + stride) / stride;
}

int conv_pad_before(int in, int k, int stride, bool same) {
  if (!same) return 0;
  const int out = conv_out_size(in, k, stride, true);
  return std::max((out - 1) * stride + k - in, 0) / 2;
}

namespace {

constexpr int kHeadColumns = 64;  // output channels per group of the conv generator

// The zero points, multipliers and clamps of a layer reading x with weights w into y.
std::string output_stage(const GraphTensor& x, const GraphTensor& w, const GraphTensor& y,
                         container::Activation activation, ConvLayer& l) {
  l.in_zp = uint8_zero_point(x);
  l.out_zp = uint8_zero_point(y);
  l.in_scale = x.quant.scale.at(0);
  l.out_scale = y.quant.scale.at(0);
  l.mult = channel_multipliers(w, l.cout, l.in_scale, l.out_scale);
  if (!activation_clamps(activation, l.out_zp, l.out_scale, l.clamp_min, l.clamp_max))
    return "CONV_2D with a fused activation other than RELU/RELU6 is not generated yet";
  return "";
}

// The stored weights and their common zero point (int8 weights shifted by 128 to uint8).
std::string stored_weights(const GraphTensor& w, ConvLayer& l) {
  if (w.type != TensorType::kInt8 && w.type != TensorType::kUInt8)
    return "weights must be int8 or uint8";
  const int shift = w.type == TensorType::kInt8 ? 128 : 0;
  const int64_t zp0 = w.quant.zero_point.empty() ? 0 : w.quant.zero_point[0];
  for (int64_t zp : w.quant.zero_point)
    if (zp != zp0) return "weights with per-channel zero points that differ";
  l.weight_zp = static_cast<int32_t>(zp0) + shift;
  l.weights.resize(w.data.size());
  for (size_t i = 0; i < w.data.size(); ++i)
    l.weights[i] = static_cast<uint8_t>((w.type == TensorType::kInt8
                                             ? static_cast<int>(static_cast<int8_t>(w.data[i]))
                                             : static_cast<int>(w.data[i])) +
                                        shift);
  return "";
}

std::string stored_bias(const Graph& graph, const GraphOp& op, ConvLayer& l) {
  if (op.inputs.size() <= 2 || op.inputs[2] < 0) return "";
  const GraphTensor& b = graph.tensor(op.inputs[2]);
  if (b.type != TensorType::kInt32 || !b.is_constant()) return "a bias must be int32 constants";
  if (b.data.size() != 4 * static_cast<size_t>(l.cout))
    return "the bias does not have one value per output channel";
  l.bias.resize(static_cast<size_t>(l.cout));
  std::memcpy(l.bias.data(), b.data.data(), b.data.size());
  return "";
}

// Strides, output size and leading padding of the layer's windows (TFLite's SAME/VALID rule).
void place_windows(ConvLayer& l, int stride_h, int stride_w, container::Padding padding) {
  const bool same = padding == container::Padding::kSame;
  l.stride_h = stride_h;
  l.stride_w = stride_w;
  l.oh = conv_out_size(l.h, l.reach_h(), stride_h, same);
  l.ow = conv_out_size(l.w, l.reach_w(), stride_w, same);
  l.pad_top = conv_pad_before(l.h, l.reach_h(), stride_h, same);
  l.pad_left = conv_pad_before(l.w, l.reach_w(), stride_w, same);
}

bool output_shape_is(const GraphTensor& y, const ConvLayer& l) {
  return y.shape[1] == l.oh && y.shape[2] == l.ow && y.shape[3] == l.cout;
}

// One CONV_2D from its tensors and options; "" or the reason it is not generated.
std::string make_layer(const Graph& graph, const GraphOp& op, ConvLayer& l) {
  const auto* o = std::get_if<container::Conv2DOptions>(&op.options);
  if (o == nullptr) return "CONV_2D without options";
  if (o->dilation_h != 1 || o->dilation_w != 1) return "CONV_2D with dilation is not generated yet";
  const GraphTensor& x = graph.tensor(op.inputs.at(0));
  const GraphTensor& w = graph.tensor(op.inputs.at(1));
  const GraphTensor& y = graph.tensor(op.outputs.at(0));
  if (x.shape.size() != 4 || y.shape.size() != 4 || w.shape.size() != 4 || x.shape[0] != 1)
    return "CONV_2D must be NHWC with batch 1";
  if (!w.is_constant()) return "CONV_2D weights must be constants";
  l.h = x.shape[1];
  l.w = x.shape[2];
  l.cin = x.shape[3];
  l.cout = w.shape[0];
  l.kh = w.shape[1];
  l.kw = w.shape[2];
  if (w.shape[3] != l.cin) return "CONV_2D with groups is not generated";
  place_windows(l, o->stride_h, o->stride_w, o->padding);
  if (!output_shape_is(y, l)) return "the CONV_2D output shape disagrees with its options";
  if (std::string why = stored_weights(w, l); !why.empty()) return "CONV_2D " + why;
  if (std::string why = stored_bias(graph, op, l); !why.empty()) return "CONV_2D: " + why;
  return output_stage(x, w, y, o->activation, l);
}

// A DEPTHWISE_CONV_2D with depth multiplier 1: channel c of the output reads channel c of the
// input (weights [1][kh][kw][C], one scale per channel along axis 3).
std::string make_depthwise_layer(const Graph& graph, const GraphOp& op, ConvLayer& l) {
  const auto* o = std::get_if<container::DepthwiseConv2DOptions>(&op.options);
  if (o == nullptr) return "DEPTHWISE_CONV_2D without options";
  const GraphTensor& x = graph.tensor(op.inputs.at(0));
  const GraphTensor& w = graph.tensor(op.inputs.at(1));
  const GraphTensor& y = graph.tensor(op.outputs.at(0));
  if (x.shape.size() != 4 || y.shape.size() != 4 || w.shape.size() != 4 || x.shape[0] != 1)
    return "DEPTHWISE_CONV_2D must be NHWC with batch 1";
  if (!w.is_constant()) return "DEPTHWISE_CONV_2D weights must be constants";
  l.depthwise = true;
  l.h = x.shape[1];
  l.w = x.shape[2];
  l.cin = x.shape[3];
  l.cout = w.shape[3];
  l.kh = w.shape[1];
  l.kw = w.shape[2];
  l.dilation_h = o->dilation_h;
  l.dilation_w = o->dilation_w;
  if (l.cout != l.cin || l.cin < 4)
    return "a DEPTHWISE_CONV_2D in a chain needs depth multiplier 1 and 4 or more channels";
  place_windows(l, o->stride_h, o->stride_w, o->padding);
  if (!output_shape_is(y, l))
    return "the DEPTHWISE_CONV_2D output shape disagrees with its options";
  if (std::string why = stored_weights(w, l); !why.empty()) return "DEPTHWISE_CONV_2D " + why;
  if (std::string why = stored_bias(graph, op, l); !why.empty()) return "DEPTHWISE_CONV_2D: " + why;
  return output_stage(x, w, y, o->activation, l);
}

// An AVERAGE_POOL_2D (VALID: every window whole) as a depthwise layer with weights 1 and the
// multiplier f32(f32(s_x f32(1 / s_y)) / n) of the chip's averaging output stage.
std::string make_pool_layer(const Graph& graph, const GraphOp& op, ConvLayer& l) {
  const auto* o = std::get_if<container::Pool2DOptions>(&op.options);
  if (o == nullptr) return "AVERAGE_POOL_2D without options";
  const GraphTensor& x = graph.tensor(op.inputs.at(0));
  const GraphTensor& y = graph.tensor(op.outputs.at(0));
  if (x.shape.size() != 4 || y.shape.size() != 4 || x.shape[0] != 1)
    return "AVERAGE_POOL_2D must be NHWC with batch 1";
  const bool same = o->padding == container::Padding::kSame;
  l.depthwise = true;
  l.h = x.shape[1];
  l.w = x.shape[2];
  l.cin = l.cout = x.shape[3];
  l.kh = o->filter_h;
  l.kw = o->filter_w;
  place_windows(l, o->stride_h, o->stride_w, o->padding);
  if (l.pad_top != 0 || l.pad_left != 0 ||
      (same && ((l.oh - 1) * l.stride_h + l.kh > l.h || (l.ow - 1) * l.stride_w + l.kw > l.w)))
    return "AVERAGE_POOL_2D with windows past the image (padding) is not generated yet";
  if (!output_shape_is(y, l)) return "the AVERAGE_POOL_2D output shape disagrees with its options";
  l.weights.assign(static_cast<size_t>(l.kh) * l.kw * l.cout, 1);
  l.weight_zp = 0;
  l.in_zp = uint8_zero_point(x);
  l.out_zp = uint8_zero_point(y);
  l.in_scale = x.quant.scale.at(0);
  l.out_scale = y.quant.scale.at(0);
  const float ratio = l.in_scale * (1.0f / l.out_scale);
  l.mult.assign(static_cast<size_t>(l.cout), ratio / static_cast<float>(l.kh * l.kw));
  if (!activation_clamps(o->activation, l.out_zp, l.out_scale, l.clamp_min, l.clamp_max))
    return "AVERAGE_POOL_2D with a fused activation other than RELU/RELU6 is not generated yet";
  return "";
}

// A FULLY_CONNECTED after a CONV_2D (directly or through a RESHAPE that flattens the map): a VALID
// conv whose kernel covers the whole map, since the FC's K index (y W + x) C + c is the conv's
// [ky][kx][c] weight order. `prev` is the layer before.
std::string make_fc_layer(const Graph& graph, const GraphOp& op, const ConvLayer& prev,
                          ConvLayer& l) {
  const GraphTensor& x = graph.tensor(op.inputs.at(0));
  const GraphTensor& w = graph.tensor(op.inputs.at(1));
  const GraphTensor& y = graph.tensor(op.outputs.at(0));
  if (!w.is_constant() || w.shape.size() != 2)
    return "FULLY_CONNECTED weights must be 2-D constants";
  l.h = l.kh = prev.oh;
  l.w = l.kw = prev.ow;
  l.cin = prev.cout;
  l.oh = l.ow = 1;
  l.cout = w.shape[0];
  if (w.shape[1] != l.h * l.w * l.cin || y.elements() != l.cout)
    return "a FULLY_CONNECTED after a CONV_2D must read its whole map, batch 1";
  if (std::string why = stored_weights(w, l); !why.empty()) return "FULLY_CONNECTED " + why;
  if (std::string why = stored_bias(graph, op, l); !why.empty()) return "FULLY_CONNECTED: " + why;
  container::Activation activation = container::Activation::kNone;
  if (const auto* o = std::get_if<container::FullyConnectedOptions>(&op.options))
    activation = o->activation;
  return output_stage(x, w, y, activation, l);
}

// Fan-out heads: `ops` are CONV_2D layers that all read `source` with one geometry, and
// CONCATENATIONs along channels of some of them. Each head is a conv whose output the mapped part
// does not read, or a CONCATENATION of convs with its output quantization and activation (the
// concat then only places their channels side by side). They become one layer (ConvLayer::heads).
// `share_groups`: heads of one group at most may share a group side by side (Head::c0; not for
// joined heads, whose ops write operand slots, nor for 1-3 channel images, blocks of pixels).
std::string make_heads(const Graph& graph, const std::vector<const GraphOp*>& ops, int source,
                       ConvLayer& merged, bool share_groups) {
  struct Conv {
    const GraphOp* op = nullptr;
    ConvLayer l;
    bool used = false;
  };
  std::vector<Conv> convs;
  std::vector<const GraphOp*> concats, quantizes;
  for (const GraphOp* op : ops) {
    if (is_builtin(*op, BuiltinOp::kConv2D)) {
      Conv c{op, {}, false};
      if (op->inputs.at(0) != source) return "the layers do not form a chain";
      if (std::string why = make_layer(graph, *op, c.l); !why.empty()) return why;
      convs.push_back(std::move(c));
    } else if (is_builtin(*op, BuiltinOp::kConcatenation)) {
      concats.push_back(op);
    } else if (is_builtin(*op, BuiltinOp::kQuantize)) {
      quantizes.push_back(op);
    } else {
      return cat("tinycoral has no code generator for ", op->name, " in fan-out heads yet");
    }
  }
  if (convs.size() < 2) return "the layers do not form a chain";
  auto conv_writing = [&](int t) -> Conv* {
    for (Conv& c : convs)
      if (c.op->outputs.at(0) == t) return &c;
    return nullptr;
  };
  // Each head: its convs in channel order and the tensor it writes.
  struct Group {
    std::vector<Conv*> convs;
    int output = -1;
  };
  std::vector<Group> groups;
  for (const GraphOp* op : concats) {
    const auto* o = std::get_if<container::ConcatenationOptions>(&op->options);
    const GraphTensor& y = graph.tensor(op->outputs.at(0));
    const int rank = static_cast<int>(y.shape.size());
    if (o == nullptr || (o->axis != -1 && o->axis != rank - 1) ||
        o->activation != container::Activation::kNone)
      return "a CONCATENATION in fan-out heads that is not along channels";
    Group g;
    g.output = op->outputs.at(0);
    for (int t : op->inputs) {
      Conv* c = conv_writing(t);
      if (c == nullptr || c->used)
        return "a CONCATENATION in fan-out heads of other tensors than their convolutions'";
      const GraphTensor& x = graph.tensor(t);
      if (x.quant.scale.at(0) != y.quant.scale.at(0) || uint8_zero_point(x) != uint8_zero_point(y))
        return "a CONCATENATION in fan-out heads that rescales";
      c->used = true;
      g.convs.push_back(c);
    }
    groups.push_back(std::move(g));
  }
  for (Conv& c : convs) {
    if (c.used) continue;
    groups.push_back({{&c}, c.op->outputs.at(0)});
  }
  // A QUANTIZE after a head that only changes the type (int8 <-> uint8, the same scale and
  // uint8 zero point: the same bytes on the chip) is the head's; its output the head's output.
  for (const GraphOp* q : quantizes) {
    Group* head = nullptr;
    for (Group& g : groups) head = g.output == q->inputs.at(0) ? &g : head;
    if (head == nullptr) return "a QUANTIZE in fan-out heads that does not read a head";
    const GraphTensor& a = graph.tensor(q->inputs.at(0));
    const GraphTensor& b = graph.tensor(q->outputs.at(0));
    if (a.quant.empty() || b.quant.empty() || a.quant.scale[0] != b.quant.scale[0] ||
        uint8_zero_point(a) != uint8_zero_point(b))
      return "a QUANTIZE that rescales is not folded yet";
    head->output = q->outputs.at(0);
  }
  for (const Group& g : groups)
    for (const GraphOp* op : ops)
      for (int t : op->inputs)
        if (t == g.output) return "a fan-out head whose output another layer reads";
  // Heads in the order of the operators that write them (the mapped part's outputs' order).
  auto writer_index = [&](const Group& g) {
    for (size_t k = 0; k < ops.size(); ++k)
      if (ops[k]->outputs.at(0) == g.output) return k;
    return ops.size();
  };
  std::sort(groups.begin(), groups.end(),
            [&](const Group& a, const Group& b) { return writer_index(a) < writer_index(b); });
  const ConvLayer& first = groups.front().convs.front()->l;
  merged = first;
  merged.weights.clear();
  merged.mult.clear();
  merged.bias.clear();
  merged.heads.clear();
  merged.cout = 0;
  bool any_bias = false;
  for (const Conv& c : convs) any_bias = any_bias || !c.l.bias.empty();
  const size_t per_out = static_cast<size_t>(first.kh) * first.kw * first.cin;
  share_groups = share_groups && first.cin % 4 == 0;
  // Channels appended with multiplier 0 and the weight zero point (they add nothing).
  auto pad_to = [&](int channels) {
    if (channels <= merged.cout) return;
    const auto pad = static_cast<size_t>(channels - merged.cout);
    const int32_t zp = merged.weight_zps.back();
    merged.weights.insert(merged.weights.end(), pad * per_out, static_cast<uint8_t>(zp));
    merged.mult.insert(merged.mult.end(), pad, 0.0f);
    merged.bias.insert(merged.bias.end(), pad, 0);
    merged.weight_zps.insert(merged.weight_zps.end(), pad, zp);
    merged.cout = channels;
  };
  for (const Group& g : groups) {
    ConvLayer::Head head;
    int channels = 0;
    for (const Conv* c : g.convs) channels += c->l.cout;
    // After the previous head in its one group when both fit it in whole words, else from a
    // group of its own (the previous head's last group padded to 64 columns).
    // A group's ops have one weight zero point (the simulator models no other): the head's
    // weights re-expressed around the group's, or the group's around the head's, when they stay
    // in 0..255 (the same w - zp: exact).
    const int used = merged.cout % kHeadColumns;
    bool shares = share_groups && used > 0 &&
                  merged.heads.back().g1 - merged.heads.back().g0 == 1 &&
                  used + channels <= kHeadColumns;
    int32_t shift = shares ? merged.weight_zps.back() - g.convs.front()->l.weight_zp : 0;
    auto fits = [](const uint8_t* w, size_t n, int32_t by) {
      return std::all_of(w, w + n, [&](uint8_t v) { return v + by >= 0 && v + by <= 255; });
    };
    bool head_fits = shares;
    for (const Conv* c : g.convs)
      head_fits = head_fits && fits(c->l.weights.data(), c->l.weights.size(), shift);
    uint8_t* group_weights = merged.weights.data() + (merged.cout - used) * per_out;
    if (shares && !head_fits && fits(group_weights, used * per_out, -shift)) {
      std::for_each(group_weights, group_weights + used * per_out,
                    [&](uint8_t& v) { v = static_cast<uint8_t>(v - shift); });
      for (int c = merged.cout - used; c < merged.cout; ++c)
        merged.weight_zps[static_cast<size_t>(c)] -= shift;
      shift = 0;
    }
    shares = shares && (head_fits || shift == 0);
    if (!shares && used > 0) pad_to(merged.cout - used + kHeadColumns);
    head.g0 = merged.cout / kHeadColumns;
    head.c0 = merged.cout % kHeadColumns;
    const ConvLayer& l0 = g.convs.front()->l;
    head.out_zp = l0.out_zp;
    head.out_scale = l0.out_scale;
    head.clamp_min = l0.clamp_min;
    head.clamp_max = l0.clamp_max;
    const GraphTensor& y = graph.tensor(g.output);
    head.output_name = y.name;
    head.signed_output = y.type == TensorType::kInt8;
    for (const Conv* c : g.convs) {
      const ConvLayer& l = c->l;
      if (l.kh != first.kh || l.kw != first.kw || l.stride_h != first.stride_h ||
          l.stride_w != first.stride_w || l.pad_top != first.pad_top ||
          l.pad_left != first.pad_left || l.oh != first.oh || l.ow != first.ow)
        return "fan-out heads of different geometry";
      if (l.out_zp != head.out_zp || l.clamp_min != head.clamp_min ||
          l.clamp_max != head.clamp_max || l.weight_zp != l0.weight_zp)
        return "a CONCATENATION in fan-out heads whose operands' output stages differ";
      for (const uint8_t w : l.weights)
        merged.weights.push_back(static_cast<uint8_t>(w + (shares ? shift : 0)));
      merged.mult.insert(merged.mult.end(), l.mult.begin(), l.mult.end());
      if (l.bias.empty())
        merged.bias.insert(merged.bias.end(), static_cast<size_t>(l.cout), 0);
      else
        merged.bias.insert(merged.bias.end(), l.bias.begin(), l.bias.end());
      merged.weight_zps.insert(merged.weight_zps.end(), static_cast<size_t>(l.cout),
                               l.weight_zp + (shares ? shift : 0));
      head.cout += l.cout;
      merged.cout += l.cout;
    }
    // The head's channels in whole words (a next head may share its group), its last group
    // later padded to whole 64 columns: multiplier 0, weights its zero point.
    pad_to((merged.cout + 3) / 4 * 4);
    head.g1 = (merged.cout + kHeadColumns - 1) / kHeadColumns;
    merged.heads.push_back(std::move(head));
  }
  pad_to((merged.cout + kHeadColumns - 1) / kHeadColumns * kHeadColumns);
  if (!any_bias) merged.bias.clear();
  return "";
}

// An explicit PAD before a CONV_2D or DEPTHWISE_CONV_2D folded into the layer's own padding: the
// chip fills a padded image with the input's zero point, which is exactly what TFLite's quantized
// PAD writes when its input and output share the quantization (it pads with the output's zero
// point). Reads the spatial paddings into `pad` (top, bottom, left, right), or says why not.
std::string foldable_pad(const Graph& graph, const GraphOp& op, std::array<int, 4>& pad) {
  if (op.inputs.size() != 2 || op.inputs[1] < 0) return "a PAD without its paddings";
  const GraphTensor& x = graph.tensor(op.inputs[0]);
  const GraphTensor& p = graph.tensor(op.inputs[1]);
  const GraphTensor& y = graph.tensor(op.outputs.at(0));
  if (!p.is_constant() || p.type != TensorType::kInt32 || p.data.size() != 4 * 4 * 2 ||
      x.shape.size() != 4 || y.shape.size() != 4)
    return "a PAD in a chain needs constant int32 [4, 2] paddings of an NHWC image";
  int32_t v[8];
  std::memcpy(v, p.data.data(), sizeof v);
  if (v[0] != 0 || v[1] != 0 || v[6] != 0 || v[7] != 0)
    return "a PAD in a chain that pads the batch or the channels";
  for (int k = 2; k < 6; ++k)
    if (v[k] < 0) return "a PAD with negative paddings";
  if (x.quant.empty() || y.quant.empty() || x.quant.scale[0] != y.quant.scale[0] ||
      uint8_zero_point(x) != uint8_zero_point(y))
    return "a PAD in a chain whose output quantization differs from its input's";
  pad = {v[2], v[3], v[4], v[5]};
  return "";
}

// The program writes only the heads' outputs: no other tensor of theirs (a concatenated
// convolution's own output) may be read by the CPU part or be a graph output.
std::string heads_read_outside(const Graph& graph, const std::vector<int>& mapped_ops,
                               const std::vector<const GraphOp*>& heads, const ConvLayer& merged) {
  std::set<int> inside;  // tensors the heads' operators write but do not output
  for (const GraphOp* op : heads)
    for (int t : op->outputs) inside.insert(t);
  for (const ConvLayer::Head& h : merged.heads)
    for (auto it = inside.begin(); it != inside.end();)
      it = graph.tensor(*it).name == h.output_name ? inside.erase(it) : std::next(it);
  const std::set<int> mapped(mapped_ops.begin(), mapped_ops.end());
  std::vector<int> read(graph.outputs.begin(), graph.outputs.end());
  for (const GraphOp& op : graph.ops)
    if (!mapped.contains(op.index)) read.insert(read.end(), op.inputs.begin(), op.inputs.end());
  for (int t : read)
    if (inside.contains(t)) return "a tensor inside fan-out heads that the CPU part reads";
  return "";
}

// Heads joined by ADD/MUL (`joins`, in graph order) into one image: each operand a head's output
// or an earlier join's, every one of them read by the joins only, all of one shape. Fills
// merged.joins and `output` (the last join's output, the image the chain continues from).
std::string match_joins(const Graph& graph, const std::vector<int>& mapped_ops,
                        const std::vector<const GraphOp*>& head_ops,
                        const std::vector<const GraphOp*>& joins, ConvLayer& merged, int& output) {
  std::vector<int> known;  // operand k's tensor
  for (const ConvLayer::Head& h : merged.heads) {
    int t = -1;
    for (const GraphOp* op : head_ops)
      if (graph.tensor(op->outputs.at(0)).name == h.output_name) t = op->outputs.at(0);
    if (t < 0) return "fan-out heads without their outputs";
    known.push_back(t);
  }
  const std::vector<int32_t> shape = graph.tensor(known.front()).shape;
  for (const GraphOp* op : joins) {
    if (op->inputs.size() != 2 || op->outputs.size() != 1)
      return cat(op->name, " joining fan-out heads needs two inputs");
    const auto a = std::find(known.begin(), known.end(), op->inputs[0]);
    const auto b = std::find(known.begin(), known.end(), op->inputs[1]);
    if (a == known.end() || b == known.end())
      return cat(op->name, " after fan-out heads that reads other tensors than the heads'");
    const GraphTensor& ta = graph.tensor(op->inputs[0]);
    const GraphTensor& tb = graph.tensor(op->inputs[1]);
    const GraphTensor& y = graph.tensor(op->outputs[0]);
    for (const GraphTensor* t : {&ta, &tb, &y})
      if (!t->is_quantized_8bit() || t->quant.per_channel() || t->shape != shape)
        return cat(op->name, " joining fan-out heads of other shapes or quantizations");
    EltwiseLayer e;
    e.kind = is_builtin(*op, BuiltinOp::kMul) ? EltwiseLayer::Kind::kMul : EltwiseLayer::Kind::kAdd;
    if (std::string why = eltwise_stage_of(e, ta, tb, y, fused_activation(*op)); !why.empty())
      return why;
    ConvLayer::Join j;
    j.mul = e.kind == EltwiseLayer::Kind::kMul;
    j.a = static_cast<int>(a - known.begin());
    j.b = static_cast<int>(b - known.begin());
    j.a_zp = e.a_zp;
    j.b_zp = e.b_zp;
    j.out_zp = e.out_zp;
    j.out_scale = e.out_scale;
    j.w1 = e.w1;
    j.w2 = e.w2;
    j.offset = e.offset;
    j.mult = e.mult;
    j.clamp_min = e.clamp_min;
    j.clamp_max = e.clamp_max;
    merged.joins.push_back(j);
    known.push_back(op->outputs[0]);
  }
  // Every operand but the result is read by the joins and nothing else (the program keeps them on
  // the chip), and each by some join.
  const std::set<int> inner(known.begin(), known.end() - 1);
  std::set<int> read_by_joins;
  for (const GraphOp* op : joins) read_by_joins.insert(op->inputs.begin(), op->inputs.end());
  for (int t : inner)
    if (!read_by_joins.contains(t)) return "a fan-out head or join whose output nothing joins";
  std::set<const GraphOp*> join_set(joins.begin(), joins.end());
  const std::set<int> mapped(mapped_ops.begin(), mapped_ops.end());
  for (int t : graph.outputs)
    if (inner.contains(t)) return "a joined fan-out head that is also a graph output";
  for (const GraphOp& op : graph.ops) {
    if (join_set.contains(&op)) continue;
    for (int t : op.inputs)
      if (inner.contains(t))
        return mapped.contains(op.index) ? "a joined fan-out head that another layer reads"
                                         : "a joined fan-out head that the CPU part reads";
  }
  output = known.back();
  return "";
}

}  // namespace

std::string match_conv_chain(const Graph& graph, const std::vector<int>& mapped_ops,
                             ConvChain& chain) {
  std::vector<const GraphOp*> ops;
  for (int i : mapped_ops) ops.push_back(&graph.ops.at(static_cast<size_t>(i)));
  size_t first = 0, end = ops.size();
  if (!ops.empty() && is_builtin(*ops.front(), BuiltinOp::kQuantize)) first = 1;
  if (end > first && is_builtin(*ops.back(), BuiltinOp::kQuantize)) --end;
  if (first >= end) return "no CONV_2D in the mapped part";
  int flowing = -1;               // the tensor the next layer must read
  std::vector<int> layer_inputs;  // the tensor each layer reads (a residual ADD's other operand)
  std::array<int, 4> pad{};       // an explicit PAD before the next layer (foldable_pad)
  bool padded = false;
  for (size_t i = first; i < end; ++i) {
    const GraphOp& op = *ops[i];
    ConvLayer l;
    if (is_builtin(op, BuiltinOp::kPad)) {
      if (padded || i + 1 >= end || (flowing >= 0 && op.inputs.at(0) != flowing) ||
          ops[i + 1]->inputs.at(0) != op.outputs.at(0) ||
          !(is_builtin(*ops[i + 1], BuiltinOp::kConv2D) ||
            is_builtin(*ops[i + 1], BuiltinOp::kDepthwiseConv2D)))
        return "a PAD in a chain that does not feed a CONV_2D or DEPTHWISE_CONV_2D";
      if (std::string why = foldable_pad(graph, op, pad); !why.empty()) return why;
      padded = true;
      flowing = op.outputs.at(0);
      continue;
    }
    if (is_builtin(op, BuiltinOp::kAdd) && !chain.layers.empty()) {
      if (std::string why = match_residual_add(graph, op, flowing, layer_inputs, l); !why.empty())
        return why;
      layer_inputs.push_back(flowing);
      chain.layers.push_back(std::move(l));
      flowing = op.outputs.at(0);
      continue;
    }
    // Fan-out: this CONV_2D and a later one read the same image: the rest are heads.
    bool fan_out = false;
    for (size_t j = i + 1; j < ops.size() && is_builtin(op, BuiltinOp::kConv2D); ++j)
      fan_out = fan_out || (is_builtin(*ops[j], BuiltinOp::kConv2D) &&
                            ops[j]->inputs.at(0) == op.inputs.at(0));
    if (fan_out && (flowing < 0 || op.inputs.at(0) == flowing)) {
      if (padded) return "a PAD before fan-out heads is not folded yet";
      // Heads joined by ADD/MUL: the ADDs and MULs among the heads' operators (before the first
      // other operator); the chain goes on from the last one's output. Otherwise the heads end
      // the chain (their QUANTIZEs, the last one included, belong to them).
      auto joins_heads = [&](const GraphOp& o) {
        return is_builtin(o, BuiltinOp::kAdd) || is_builtin(o, BuiltinOp::kMul);
      };
      size_t join_end = i, join_at = end;
      while (join_end < end &&
             ((is_builtin(*ops[join_end], BuiltinOp::kConv2D) &&
               ops[join_end]->inputs.at(0) == op.inputs.at(0)) ||
              is_builtin(*ops[join_end], BuiltinOp::kConcatenation) ||
              is_builtin(*ops[join_end], BuiltinOp::kQuantize) || joins_heads(*ops[join_end]))) {
        if (joins_heads(*ops[join_end])) join_at = std::min(join_at, join_end);
        ++join_end;
      }
      const bool joined = join_at < end;
      std::vector<const GraphOp*> rest, joins;
      for (size_t k = i; k < (joined ? join_end : ops.size()); ++k)
        (joins_heads(*ops[k]) ? joins : rest).push_back(ops[k]);
      if (std::string why = make_heads(graph, rest, op.inputs.at(0), l, !joined); !why.empty())
        return why;
      if (std::string why = heads_read_outside(graph, mapped_ops, rest, l); !why.empty())
        return why;
      layer_inputs.push_back(op.inputs.at(0));
      if (!joined) {
        chain.layers.push_back(std::move(l));
        end = ops.size();
        break;
      }
      if (std::string why = match_joins(graph, mapped_ops, rest, joins, l, flowing); !why.empty())
        return why;
      if (ops[join_end - 1]->outputs.at(0) != flowing)  // (the next layer reads the result)
        return "fan-out heads joined by ADD/MUL whose result is not their last operator's";
      chain.layers.push_back(std::move(l));
      i = join_end - 1;
      continue;
    }
    if (flowing >= 0 && op.inputs.at(0) != flowing) {
      if (std::find(layer_inputs.begin(), layer_inputs.end(), op.inputs.at(0)) !=
          layer_inputs.end())
        return cat("a ", op.name,
                   " reading an image that an earlier layer reads too (branches other than "
                   "fan-out heads of CONV_2D layers are not generated yet)");
      return "the layers do not form a chain";
    }
    if (is_builtin(op, BuiltinOp::kConv2D)) {
      if (std::string why = make_layer(graph, op, l); !why.empty()) return why;
    } else if (is_builtin(op, BuiltinOp::kDepthwiseConv2D)) {
      if (std::string why = make_depthwise_layer(graph, op, l); !why.empty()) return why;
    } else if (is_builtin(op, BuiltinOp::kAveragePool2D) && !chain.layers.empty()) {
      if (std::string why = make_pool_layer(graph, op, l); !why.empty()) return why;
    } else if (is_builtin(op, BuiltinOp::kReshape) && !chain.layers.empty() && i + 1 == end) {
      // The last map reshaped (the classifier's [1, 1, 1, N] -> [1, N], looming's [1, 3, 3, 1]
      // -> [1, 9]): the same bytes in the same order.
      flowing = op.outputs.at(0);
      continue;
    } else if (is_builtin(op, BuiltinOp::kReshape) && !chain.layers.empty() && i + 1 < end &&
               is_builtin(*ops[i + 1], BuiltinOp::kFullyConnected)) {
      flowing = op.outputs.at(0);  // a flatten: the bytes stay where they are
      continue;
    } else if (is_builtin(op, BuiltinOp::kFullyConnected) && !chain.layers.empty()) {
      if (std::string why = make_fc_layer(graph, op, chain.layers.back(), l); !why.empty())
        return why;
    } else {
      return cat("tinycoral has no code generator for ", op.name, " in a chain yet");
    }
    if (padded) {  // the layer reads the unpadded image with the PAD's rows and columns added
      l.h -= pad[0] + pad[1];
      l.w -= pad[2] + pad[3];
      l.pad_top += pad[0];
      l.pad_left += pad[2];
      padded = false;
    }
    layer_inputs.push_back(op.inputs.at(0));
    chain.layers.push_back(std::move(l));
    flowing = op.outputs.at(0);
  }
  const GraphTensor& x = graph.tensor(ops[first]->inputs.at(0));
  // (Fan-out heads have their outputs in ConvLayer::heads.)
  const bool heads = !chain.layers.empty() && !chain.layers.back().heads.empty() &&
                     chain.layers.back().joins.empty();
  const GraphTensor& y = heads ? x : graph.tensor(ops[end - 1]->outputs.at(0));
  const GraphTensor* in = &x;
  const GraphTensor* out = &y;
  if (first == 1) {
    if (ops[0]->outputs.at(0) != ops[1]->inputs.at(0))
      return "the QUANTIZE before does not feed the layer";
    in = &graph.tensor(ops[0]->inputs.at(0));
  }
  if (end < ops.size()) {
    if (ops.back()->inputs.at(0) != ops[end - 1]->outputs.at(0))
      return "the QUANTIZE after does not read the layer";
    out = &graph.tensor(ops.back()->outputs.at(0));
  }
  if (in->quant.empty() || out->quant.empty() || in->quant.scale[0] != x.quant.scale.at(0) ||
      uint8_zero_point(*in) != uint8_zero_point(x) || out->quant.scale[0] != y.quant.scale.at(0) ||
      uint8_zero_point(*out) != uint8_zero_point(y))
    return "a QUANTIZE that rescales is not folded yet";
  chain.signed_input = in->type == TensorType::kInt8;
  chain.signed_output = out->type == TensorType::kInt8;
  chain.input_name = in->name;
  chain.output_name = out->name;
  return "";
}

namespace {

// The narrowest width >= l.w whose rows the host can stream with `cin` channels (input_streamable).
int host_streamable_width(const ConvLayer& l, int cin) {
  ConvLayer probe;
  probe.h = l.h;
  probe.cin = cin;
  for (probe.w = l.w;; ++probe.w)
    if (conv::input_streamable(probe)) return probe.w;
}

// Whether a first layer `l` takes its image padded or repacked: a CONV_2D (no ADD) reading pixels
// that are not whole words. (Joined heads read the image as it is in blocks of pixels, as any
// first layer, or, when those cannot be generated, in whole-word pixels: a partial last block, a
// block's channels over 64. Other fan-out heads read only whole-word pixels.)
bool image_paddable(const ConvLayer& l) {
  return !l.depthwise && !l.residual() && (l.heads.empty() || !l.joins.empty()) && l.cin % 4 != 0;
}

// The first layer's channels padded to `cin` with its weight zero points: the image's new
// channels hold the input zero point, so they add nothing whatever their weights.
void pad_channels(ConvLayer& l, int cin) {
  const size_t taps = static_cast<size_t>(l.kh) * l.kw;
  std::vector<uint8_t> weights;
  weights.reserve(static_cast<size_t>(l.cout) * taps * cin);
  for (int oc = 0; oc < l.cout; ++oc)
    for (size_t t = 0; t < taps; ++t)
      for (int c = 0; c < cin; ++c)
        weights.push_back(
            c < l.cin
                ? l.weights[(static_cast<size_t>(oc) * taps + t) * static_cast<size_t>(l.cin) +
                            static_cast<size_t>(c)]
                : static_cast<uint8_t>(l.weight_zp_of(oc)));
  l.weights = std::move(weights);
  l.cin = cin;
}

}  // namespace

bool pad_input_on_host(ConvChain& chain, bool whole_pixels) {
  if (chain.layers.empty()) return false;
  ConvLayer& l = chain.layers.front();
  if (!image_paddable(l) || (!whole_pixels && conv::input_streamable(l))) return false;
  // Columns only (the channels stay, fewer bytes over USB), or whole-word pixels in rows that
  // stream when asked or when that is fewer bytes a row.
  int cin = conv::round_up(l.cin, 4), w = host_streamable_width(l, cin);
  if (const int narrow = host_streamable_width(l, l.cin);
      !whole_pixels && narrow * l.cin <= w * cin) {
    cin = l.cin;
    w = narrow;
  }
  pad_channels(l, cin);
  l.w = w;
  chain.host_w = w;
  chain.host_cin = cin;
  chain.input_name += "/tinycoral_host_pad";
  return true;
}

bool repack_input_on_chip(ConvChain& chain) {
  if (chain.layers.empty()) return false;
  ConvLayer& l = chain.layers.front();
  // (pad_input_on_host's cases, always in columns only: the host's bytes do not depend on it.)
  if (!image_paddable(l) || conv::input_streamable(l)) return false;
  chain.repack_w = l.w;
  l.w = host_streamable_width(l, l.cin);  // (the same channels: the weights stay)
  return true;
}

bool widen_input_on_chip(ConvChain& chain) {
  if (chain.layers.empty()) return false;
  ConvLayer& l = chain.layers.front();
  // (pad_input_on_host's cases with its 4-byte pixels, where they need no columns: the same
  // image in place.)
  if (!image_paddable(l) || !conv::input_streamable(l)) return false;
  const int cin = conv::round_up(l.cin, 4);
  if (host_streamable_width(l, cin) != l.w) return false;
  chain.repack_w = l.w;
  chain.repack_cin = l.cin;
  pad_channels(l, cin);
  return true;
}

}  // namespace tinycoral::compiler
