// Matching [QUANTIZE] [RESHAPE] SOFTMAX FULLY_CONNECTED... CONCATENATION (softmax_layer.h).
#include "compiler/softmax_layer.h"

#include "common/error.h"
#include "compiler/fc_layer.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

namespace {

// Same scale and the same zero point in the uint8 domain: a QUANTIZE between them only moves
// the zero point by 128.
bool same_quant(const GraphTensor& a, const GraphTensor& b) {
  return a.quant.scale.at(0) == b.quant.scale.at(0) && uint8_zero_point(a) == uint8_zero_point(b);
}

}  // namespace

std::string match_softmax_fc(const Graph& graph, const std::vector<int>& mapped_ops,
                             SoftmaxFcLayer& layer) {
  std::vector<const GraphOp*> ops;
  for (int i : mapped_ops) ops.push_back(&graph.ops.at(static_cast<size_t>(i)));
  size_t at = 0;
  const GraphOp* q_in = nullptr;
  if (at < ops.size() && is_builtin(*ops[at], BuiltinOp::kQuantize)) q_in = ops[at++];
  if (at < ops.size() && is_builtin(*ops[at], BuiltinOp::kReshape)) ++at;
  if (at == ops.size() || !is_builtin(*ops[at], BuiltinOp::kSoftmax)) {
    return "tinycoral generates [QUANTIZE] [RESHAPE] SOFTMAX FULLY_CONNECTED... CONCATENATION only";
  }
  const GraphOp& sm = *ops[at++];
  std::vector<const GraphOp*> fcs;
  while (at < ops.size() && is_builtin(*ops[at], BuiltinOp::kFullyConnected))
    fcs.push_back(ops[at++]);
  if (at + 1 != ops.size() || !is_builtin(*ops[at], BuiltinOp::kConcatenation) || fcs.size() != 2) {
    return "a SOFTMAX is generated only when two FULLY_CONNECTED read it into a CONCATENATION";
  }
  const GraphOp& cat_op = *ops[at];

  const GraphTensor& x = graph.tensor(sm.inputs.at(0));
  const GraphTensor& p = graph.tensor(sm.outputs.at(0));
  const GraphTensor& y = graph.tensor(cat_op.outputs.at(0));
  if (x.shape.empty() || p.shape.size() != 2 || p.shape[0] != 1) {
    return "a SOFTMAX over more than one row is not generated yet";
  }
  layer.n = p.shape[1];
  if (p.quant.scale.at(0) != 1.0f / 256 || uint8_zero_point(p) != 0) {
    return "a SOFTMAX whose output is not quantized as TFLite's (1/256, zero point -128)";
  }
  const auto* so = std::get_if<container::SoftmaxOptions>(&sm.options);
  const float beta = so != nullptr ? so->beta : 1.0f;
  layer.exp_mult = beta * x.quant.scale.at(0);
  layer.byte_clamp_max = fc_clamp(255, 0, x.quant.scale[0]);
  layer.shift_clamp_min = fc_clamp(0, 255, x.quant.scale[0]);

  // The CONCATENATION's inputs, in its order, are the FULLY_CONNECTED outputs.
  const auto* co = std::get_if<container::ConcatenationOptions>(&cat_op.options);
  const int64_t joined = static_cast<int64_t>(fcs.size());
  if (co == nullptr || co->activation != container::Activation::kNone ||
      cat_op.inputs.size() != fcs.size() || y.elements() != joined || y.shape.back() != joined) {
    return "a CONCATENATION with an activation or other inputs is not generated yet";
  }
  for (int input : cat_op.inputs) {
    const GraphOp* fc = nullptr;
    for (const GraphOp* f : fcs)
      if (f->outputs.at(0) == input) fc = f;
    if (fc == nullptr || fc->inputs.at(0) != sm.outputs.at(0)) {
      return "the CONCATENATION does not join FULLY_CONNECTED layers that read the SOFTMAX";
    }
    const GraphTensor& w = graph.tensor(fc->inputs.at(1));
    const GraphTensor& fy = graph.tensor(fc->outputs.at(0));
    if (fc->inputs.size() > 2 && fc->inputs[2] >= 0) return "a FULLY_CONNECTED with a bias";
    const auto* fo = std::get_if<container::FullyConnectedOptions>(&fc->options);
    if (fo == nullptr || fo->activation != container::Activation::kNone) {
      return "a FULLY_CONNECTED with a fused activation after a SOFTMAX";
    }
    if (w.type != TensorType::kInt8 || !w.is_constant() || w.elements() != layer.n ||
        w.quant.zero_point.at(0) != 0) {
      return "FULLY_CONNECTED weights after a SOFTMAX must be one constant int8 row";
    }
    if (!same_quant(fy, y)) return "a CONCATENATION that rescales is not generated yet";
    layer.weights.emplace_back(w.data.begin(), w.data.end());
    layer.mult.push_back(fc_multiplier(w.quant.scale.at(0), p.quant.scale.at(0), y.quant.scale[0]));
  }

  const GraphTensor* in = &x;
  if (q_in != nullptr) {
    in = &graph.tensor(q_in->inputs.at(0));
    if (!same_quant(*in, graph.tensor(q_in->outputs.at(0)))) {
      return "a QUANTIZE that rescales is not folded yet";
    }
  }
  if (in->elements() != layer.n) return "the SOFTMAX does not read the whole input";
  layer.signed_input = in->type == TensorType::kInt8;
  layer.signed_output = y.type == TensorType::kInt8;
  layer.in_zp = uint8_zero_point(*in);
  layer.out_zp = uint8_zero_point(y);
  layer.in_scale = in->quant.scale.at(0);
  layer.out_scale = y.quant.scale.at(0);
  layer.clamp_min = fc_clamp(0, layer.out_zp, layer.out_scale);
  layer.clamp_max = fc_clamp(255, layer.out_zp, layer.out_scale);
  layer.input_name = in->name;
  layer.output_name = y.name;
  return "";
}

}  // namespace tinycoral::compiler
