// Matching [QUANTIZE] DEPTHWISE_CONV_2D [AVERAGE_POOL_2D] [QUANTIZE] (depthwise_layer.h).
#include "compiler/depthwise_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "compiler/fc_layer.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

namespace {

int same_out(int in, int stride) { return (in + stride - 1) / stride; }
int valid_out(int in, int k, int stride) { return (in - k) / stride + 1; }

}  // namespace

int DepthwiseLayer::out_h() const {
  return same_padding ? same_out(h, stride_h) : valid_out(h, kh, stride_h);
}
int DepthwiseLayer::out_w() const {
  return same_padding ? same_out(w, stride_w) : valid_out(w, kw, stride_w);
}

std::string match_depthwise(const Graph& graph, const std::vector<int>& mapped_ops,
                            DepthwiseLayer& layer) {
  std::vector<const GraphOp*> ops;
  for (int i : mapped_ops) ops.push_back(&graph.ops.at(static_cast<size_t>(i)));
  // The expected chain, in order; QUANTIZE at either end is optional.
  size_t at = 0;
  const GraphOp* q_in = nullptr;
  const GraphOp* pool = nullptr;
  const GraphOp* q_out = nullptr;
  if (at < ops.size() && is_builtin(*ops[at], BuiltinOp::kQuantize)) q_in = ops[at++];
  if (at == ops.size() || !is_builtin(*ops[at], BuiltinOp::kDepthwiseConv2D)) {
    return "tinycoral generates [QUANTIZE] DEPTHWISE_CONV_2D [AVERAGE_POOL_2D] [QUANTIZE] only";
  }
  const GraphOp& dw = *ops[at++];
  if (at < ops.size() && (is_builtin(*ops[at], BuiltinOp::kAveragePool2D) ||
                          is_builtin(*ops[at], BuiltinOp::kMaxPool2D))) {
    pool = ops[at++];
  }
  if (at < ops.size() && is_builtin(*ops[at], BuiltinOp::kQuantize)) q_out = ops[at++];
  if (at != ops.size()) return cat("tinycoral has no code generator for ", ops[at]->name, " yet");

  const GraphTensor& x = graph.tensor(dw.inputs.at(0));
  const GraphTensor& wt = graph.tensor(dw.inputs.at(1));
  const GraphTensor& y = graph.tensor(dw.outputs.at(0));
  if (wt.type != TensorType::kInt8 || wt.shape.size() != 4 || !wt.is_constant()) {
    return "DEPTHWISE_CONV_2D weights must be constant 4-D int8";
  }
  for (int64_t zp : wt.quant.zero_point) {
    if (zp != 0) return "DEPTHWISE_CONV_2D weights with a non-zero zero point";
  }
  if (x.shape.size() != 4 || x.shape[0] != 1) return "DEPTHWISE_CONV_2D with batch > 1";
  const auto* o = std::get_if<container::DepthwiseConv2DOptions>(&dw.options);
  if (o == nullptr) return "DEPTHWISE_CONV_2D without its options";
  if (o->dilation_h != 1 || o->dilation_w != 1) return "DEPTHWISE_CONV_2D with dilation";
  layer.h = x.shape[1];
  layer.w = x.shape[2];
  layer.in_channels = x.shape[3];
  layer.kh = wt.shape[1];
  layer.kw = wt.shape[2];
  layer.channels = wt.shape[3];
  layer.stride_h = o->stride_h;
  layer.stride_w = o->stride_w;
  layer.same_padding = o->padding == container::Padding::kSame;
  if (layer.channels != layer.in_channels * std::max(1, o->depth_multiplier)) {
    return "DEPTHWISE_CONV_2D whose channels are not C_in x depth multiplier";
  }
  const auto c = static_cast<size_t>(layer.channels);
  layer.weights.resize(wt.data.size());
  for (size_t i = 0; i < wt.data.size(); ++i) layer.weights[i] = static_cast<int8_t>(wt.data[i]);
  layer.bias.assign(c, 0);
  if (dw.inputs.size() > 2 && dw.inputs[2] >= 0) {
    const GraphTensor& b = graph.tensor(dw.inputs[2]);
    if (b.type != TensorType::kInt32 || !b.is_constant() || b.data.size() != 4 * c) {
      return "a DEPTHWISE_CONV_2D bias must be one int32 constant per channel";
    }
    std::memcpy(layer.bias.data(), b.data.data(), b.data.size());
  }

  // The boundary tensors and the QUANTIZEs that only move the zero point.
  const GraphTensor* in = &x;
  if (q_in != nullptr) {
    if (q_in->outputs.at(0) != dw.inputs[0]) return "the QUANTIZE before does not feed the layer";
    in = &graph.tensor(q_in->inputs.at(0));
  }
  const GraphTensor* last = &y;
  if (pool != nullptr) {
    if (pool->inputs.at(0) != dw.outputs[0])
      return cat("the ", pool->name, " does not read the layer");
    const auto* p = std::get_if<container::Pool2DOptions>(&pool->options);
    if (p == nullptr || p->filter_h != p->filter_w || p->stride_h != p->filter_h ||
        p->stride_w != p->filter_w || p->padding != container::Padding::kValid ||
        p->activation != container::Activation::kNone) {
      return cat("tinycoral generates square ", pool->name,
                 " windows with stride = window, VALID, no activation only");
    }
    const GraphTensor& py = graph.tensor(pool->outputs.at(0));
    if (py.quant.scale.at(0) != y.quant.scale.at(0) ||
        uint8_zero_point(py) != uint8_zero_point(y)) {
      return cat("a ", pool->name, " that rescales is not generated yet");
    }
    layer.pool = p->filter_h;
    layer.max_pool = is_builtin(*pool, BuiltinOp::kMaxPool2D);
    last = &py;
  }
  const GraphTensor* out = last;
  if (q_out != nullptr) {
    if (q_out->inputs.at(0) != last->index) return "the QUANTIZE after does not read the layer";
    out = &graph.tensor(q_out->outputs.at(0));
  }
  if (in->quant.scale.at(0) != x.quant.scale.at(0) ||
      uint8_zero_point(*in) != uint8_zero_point(x) ||
      out->quant.scale.at(0) != last->quant.scale.at(0) ||
      uint8_zero_point(*out) != uint8_zero_point(*last)) {
    return "a QUANTIZE that rescales is not folded yet";
  }
  layer.signed_input = in->type == TensorType::kInt8;
  layer.signed_output = out->type == TensorType::kInt8;
  layer.in_zp = uint8_zero_point(*in);
  layer.out_zp = uint8_zero_point(*out);
  layer.in_scale = x.quant.scale[0];
  layer.out_scale = y.quant.scale[0];
  layer.input_name = in->name;
  layer.output_name = out->name;
  layer.mult = channel_multipliers(wt, static_cast<int>(c), layer.in_scale, layer.out_scale);
  if (!activation_clamps(o->activation, layer.out_zp, layer.out_scale, layer.clamp_min,
                         layer.clamp_max)) {
    return "DEPTHWISE_CONV_2D with a fused activation other than RELU/RELU6 is not generated yet";
  }
  return "";
}

}  // namespace tinycoral::compiler
