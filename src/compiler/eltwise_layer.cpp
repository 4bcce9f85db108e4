// Matching [QUANTIZE...] ADD|MUL [QUANTIZE] and computing its output stage (eltwise_layer.h).
#include "compiler/eltwise_layer.h"

#include <algorithm>

#include "common/error.h"
#include "compiler/fc_layer.h"
#include "host/quant_util.h"
#include "host/rational.h"
#include "host/rounding.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

namespace {

// A QUANTIZE between int8 and uint8 at the same scale only moves the zero point by 128.
bool folds(const GraphTensor& from, const GraphTensor& to) {
  return !from.quant.empty() && !to.quant.empty() &&
         from.quant.scale.at(0) == to.quant.scale.at(0) &&
         uint8_zero_point(from) == uint8_zero_point(to);
}

}  // namespace

std::string eltwise_output_stage(EltwiseLayer& layer, container::Activation activation) {
  if (layer.kind == EltwiseLayer::Kind::kRelu) {
    // The host's edgetpu constants: f32(s_in inv(s_out)), the activation's float32 clamps.
    layer.mult = host::edgetpu::ratio_scale(layer.a_scale, layer.out_scale);
    const host::edgetpu::Clamps c =
        host::edgetpu_clamps(activation, layer.out_scale, layer.out_zp, TensorType::kUInt8);
    layer.clamp_min = c.lo;
    layer.clamp_max = c.hi;
    return "";
  }
  if (!activation_clamps(activation, layer.out_zp, layer.out_scale, layer.clamp_min,
                         layer.clamp_max))
    return "ADD/MUL with a fused activation other than RELU/RELU6 is not generated yet";
  if (layer.kind == EltwiseLayer::Kind::kMul) {
    layer.mult = host::edgetpu::product_scale(layer.a_scale, layer.b_scale, layer.out_scale);
    return "";
  }
  const auto [w1, w2] = host::edgetpu_add_weights(layer.a_scale, layer.b_scale);
  if (w1 <= 0 || w2 <= 0) return "ADD input scales too far apart for the chip's 16-bit weights";
  layer.w1 = w1;
  layer.w2 = w2;
  layer.offset = -(w1 * layer.a_zp + w2 * layer.b_zp);
  layer.mult = (layer.a_scale / static_cast<float>(w1)) * host::edgetpu::inverse(layer.out_scale);
  return "";
}

std::string match_eltwise(const Graph& graph, const std::vector<int>& mapped_ops,
                          EltwiseLayer& layer) {
  const GraphOp* op = nullptr;
  for (int i : mapped_ops) {
    const GraphOp& o = graph.ops.at(static_cast<size_t>(i));
    if (is_builtin(o, BuiltinOp::kAdd) || is_builtin(o, BuiltinOp::kMul) ||
        is_builtin(o, BuiltinOp::kRelu) || is_builtin(o, BuiltinOp::kRelu6)) {
      if (op) return "tinycoral generates one ADD or MUL per model yet (not in a chain)";
      op = &o;
    } else if (!is_builtin(o, BuiltinOp::kQuantize)) {
      return cat("tinycoral has no code generator for ", o.name, " with ADD/MUL yet");
    }
  }
  if (!op) return "tinycoral generates ADD and MUL only here";
  const bool relu = is_builtin(*op, BuiltinOp::kRelu) || is_builtin(*op, BuiltinOp::kRelu6);
  layer.kind = is_builtin(*op, BuiltinOp::kAdd)   ? EltwiseLayer::Kind::kAdd
               : is_builtin(*op, BuiltinOp::kMul) ? EltwiseLayer::Kind::kMul
                                                  : EltwiseLayer::Kind::kRelu;
  if (op->inputs.size() != (relu ? 1u : 2u) || op->outputs.size() != 1)
    return cat(op->name, " with ", op->inputs.size(), " inputs");
  const GraphTensor& a = graph.tensor(op->inputs[0]);
  const GraphTensor& b = graph.tensor(op->inputs[relu ? 0 : 1]);
  const GraphTensor& y = graph.tensor(op->outputs[0]);
  for (const GraphTensor* t : {&a, &b, &y}) {
    if (!t->is_quantized_8bit() || t->quant.per_channel())
      return "ADD/MUL on tensors without per-tensor 8-bit quantization";
    if (t->is_constant()) return "ADD/MUL with a constant operand is not generated yet";
  }
  if (a.shape != y.shape || b.shape != y.shape)
    return "ADD/MUL with broadcasting (operands of different shapes) is not generated yet";
  // The boundary tensors: a QUANTIZE may feed each operand and read the output.
  const GraphTensor *in_a = &a, *in_b = &b, *out = &y;
  for (int i : mapped_ops) {
    const GraphOp& q = graph.ops.at(static_cast<size_t>(i));
    if (!is_builtin(q, BuiltinOp::kQuantize)) continue;
    const GraphTensor& from = graph.tensor(q.inputs.at(0));
    const GraphTensor& to = graph.tensor(q.outputs.at(0));
    bool used = false;
    if (q.outputs[0] == op->inputs[0]) in_a = &from, used = true;
    if (q.outputs[0] == op->inputs[relu ? 0 : 1]) in_b = &from, used = true;
    if (q.inputs[0] == op->outputs[0]) out = &to, used = true;
    if (!used) return "a QUANTIZE that neither feeds nor reads the ADD/MUL";
    if (!folds(from, to)) return "a QUANTIZE that rescales is not folded yet";
  }
  layer.elements = y.elements();
  layer.shape = y.shape;
  layer.a_name = in_a->name;
  layer.b_name = in_b->name;
  layer.output_name = out->name;
  layer.signed_a = in_a->type == TensorType::kInt8;
  layer.signed_b = in_b->type == TensorType::kInt8;
  layer.signed_output = out->type == TensorType::kInt8;
  const container::Activation activation = !relu ? fused_activation(*op)
                                           : is_builtin(*op, BuiltinOp::kRelu)
                                               ? container::Activation::kRelu
                                               : container::Activation::kRelu6;
  return eltwise_stage_of(layer, a, b, y, activation);
}

container::Activation fused_activation(const GraphOp& op) {
  if (const auto* o = std::get_if<container::ActivationOptions>(&op.options)) return o->activation;
  return container::Activation::kNone;
}

std::string eltwise_stage_of(EltwiseLayer& layer, const GraphTensor& a, const GraphTensor& b,
                             const GraphTensor& y, container::Activation activation) {
  layer.a_zp = uint8_zero_point(a);
  layer.b_zp = uint8_zero_point(b);
  layer.out_zp = uint8_zero_point(y);
  layer.a_scale = a.quant.scale[0];
  layer.b_scale = b.quant.scale[0];
  layer.out_scale = y.quant.scale[0];
  return eltwise_output_stage(layer, activation);
}

std::string match_residual_add(const Graph& graph, const GraphOp& op, int flowing,
                               const std::vector<int>& layer_inputs, ConvLayer& l) {
  if (op.inputs.size() != 2 || op.outputs.size() != 1) return "ADD needs two inputs";
  const bool flowing_first = op.inputs[0] == flowing;
  if (!flowing_first && op.inputs[1] != flowing)
    return "an ADD in a chain must read its last layer";
  const int other = flowing_first ? op.inputs[1] : op.inputs[0];
  const auto j = std::find(layer_inputs.begin(), layer_inputs.end(), other);
  if (j == layer_inputs.end())
    return "an ADD in a chain whose other operand is not the input of an earlier layer";
  const GraphTensor& a = graph.tensor(op.inputs[0]);
  const GraphTensor& b = graph.tensor(op.inputs[1]);
  const GraphTensor& y = graph.tensor(op.outputs[0]);
  for (const GraphTensor* t : {&a, &b, &y})
    if (!t->is_quantized_8bit() || t->quant.per_channel() || t->is_constant())
      return "an ADD in a chain on tensors without per-tensor 8-bit quantization";
  if (a.shape != y.shape || b.shape != y.shape || y.shape.size() != 4 || y.shape[0] != 1)
    return "an ADD in a chain needs two NHWC operands of its output's shape";
  EltwiseLayer e;
  if (std::string why = eltwise_stage_of(e, a, b, y, fused_activation(op)); !why.empty())
    return why;
  l.h = l.oh = y.shape[1];
  l.w = l.ow = y.shape[2];
  l.cin = l.cout = y.shape[3];
  l.kh = l.kw = 1;
  l.residual_of = static_cast<int>(j - layer_inputs.begin());
  l.add_w1 = e.w1;
  l.add_w2 = e.w2;
  l.add_offset = e.offset;
  l.add_flowing_first = flowing_first;
  l.in_zp = flowing_first ? e.a_zp : e.b_zp;
  l.out_zp = e.out_zp;
  l.in_scale = flowing_first ? e.a_scale : e.b_scale;
  l.out_scale = e.out_scale;
  l.mult.assign(static_cast<size_t>(l.cout), e.mult);
  l.clamp_min = e.clamp_min;
  l.clamp_max = e.clamp_max;
  return "";
}

}  // namespace tinycoral::compiler
