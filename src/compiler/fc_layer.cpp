// Matching [QUANTIZE] FULLY_CONNECTED [QUANTIZE] and computing its output stage (fc_layer.h).
#include "compiler/fc_layer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"

namespace tinycoral::compiler {

using container::BuiltinOp;
using container::TensorType;

float fc_multiplier(float w_scale, float x_scale, float y_scale) {
  const float inv_y = 1.0f / y_scale;
  const float wx = w_scale * x_scale;
  return wx * inv_y;
}

float fc_clamp(int q, int32_t out_zp, float y_scale) {
  const float real = static_cast<float>(static_cast<double>(q - out_zp) * y_scale);
  return real * (1.0f / y_scale);
}

std::vector<float> channel_multipliers(const GraphTensor& w, int channels, float x_scale,
                                       float y_scale) {
  std::vector<float> mult(static_cast<size_t>(channels));
  for (size_t c = 0; c < mult.size(); ++c) {
    const float ws = w.quant.scale.size() == 1 ? w.quant.scale[0] : w.quant.scale.at(c);
    mult[c] = fc_multiplier(ws, x_scale, y_scale);
  }
  return mult;
}

bool activation_clamps(container::Activation activation, int32_t out_zp, float y_scale,
                       float& clamp_min, float& clamp_max) {
  using container::Activation;
  if (activation != Activation::kNone && activation != Activation::kRelu &&
      activation != Activation::kRelu6) {
    return false;
  }
  int lo = 0, hi = 255;
  if (activation != Activation::kNone) lo = std::max(lo, out_zp);
  if (activation == Activation::kRelu6)
    // 6 in output steps; a scale so small that it exceeds the uint8 range clips nothing (and
    // must not reach an int conversion as infinity).
    hi = std::min(hi, out_zp + static_cast<int>(std::fmin(std::nearbyint(6.0f / y_scale), 512.0f)));
  clamp_min = fc_clamp(lo, out_zp, y_scale);
  clamp_max = fc_clamp(hi, out_zp, y_scale);
  return true;
}

std::string match_fc(const Graph& graph, const std::vector<int>& mapped_ops, FcLayer& layer) {
  std::vector<const GraphOp*> ops;
  for (int i : mapped_ops) ops.push_back(&graph.ops.at(static_cast<size_t>(i)));
  size_t fc_at = ops.size();
  for (size_t i = 0; i < ops.size(); ++i) {
    if (is_builtin(*ops[i], BuiltinOp::kFullyConnected)) {
      if (fc_at != ops.size()) return "tinycoral generates one FULLY_CONNECTED per model yet";
      fc_at = i;
    } else if (!is_builtin(*ops[i], BuiltinOp::kQuantize)) {
      return cat("tinycoral has no code generator for ", ops[i]->name, " yet");
    }
  }
  if (fc_at == ops.size()) return "tinycoral generates FULLY_CONNECTED only yet";
  if (fc_at > 1 || ops.size() - fc_at > 2) return "tinycoral folds one QUANTIZE on each side only";
  const GraphOp& fc = *ops[fc_at];
  const GraphTensor& x = graph.tensor(fc.inputs.at(0));
  const GraphTensor& w = graph.tensor(fc.inputs.at(1));
  const GraphTensor& y = graph.tensor(fc.outputs.at(0));
  if (fc.inputs.size() > 2 && fc.inputs[2] >= 0) {
    const GraphTensor& b = graph.tensor(fc.inputs[2]);
    if (b.type != TensorType::kInt32 || !b.is_constant())
      return "a FULLY_CONNECTED bias must be int32 constants";
    layer.bias.resize(b.data.size() / 4);
    std::memcpy(layer.bias.data(), b.data.data(), b.data.size());
  }
  if (w.type != TensorType::kInt8 || w.shape.size() != 2) {
    return "FULLY_CONNECTED weights must be 2-D int8";
  }
  container::Activation activation = container::Activation::kNone;
  if (const auto* o = std::get_if<container::FullyConnectedOptions>(&fc.options)) {
    activation = o->activation;
    if (activation != container::Activation::kNone && activation != container::Activation::kRelu &&
        activation != container::Activation::kRelu6) {
      return "FULLY_CONNECTED with a fused activation other than RELU/RELU6 is not generated yet";
    }
  }
  layer.n = w.shape[0];
  layer.k = w.shape[1];
  if (!layer.bias.empty() && layer.bias.size() != static_cast<size_t>(layer.n)) {
    return "the FULLY_CONNECTED bias does not have one value per output";
  }
  if (x.elements() != layer.k || y.elements() != layer.n) return "FULLY_CONNECTED with batch > 1";
  for (int64_t zp : w.quant.zero_point) {
    if (zp != 0) return "FULLY_CONNECTED weights with a non-zero zero point";
  }
  // The boundary: the QUANTIZE before (uint8 -> int8) and after (int8 -> uint8), if present.
  const GraphTensor* in = &x;
  const GraphTensor* out = &y;
  if (fc_at == 1) {
    const GraphOp& q = *ops[0];
    in = &graph.tensor(q.inputs.at(0));
    if (q.outputs.at(0) != fc.inputs[0]) return "the QUANTIZE before does not feed the layer";
  }
  if (ops.size() - fc_at == 2) {
    const GraphOp& q = *ops[fc_at + 1];
    out = &graph.tensor(q.outputs.at(0));
    if (q.inputs.at(0) != fc.outputs[0]) return "the QUANTIZE after does not read the layer";
  }
  // A QUANTIZE between int8 and uint8 at the same scale only moves the zero point by 128.
  if (in->quant.scale.at(0) != x.quant.scale.at(0) ||
      uint8_zero_point(*in) != uint8_zero_point(x) ||
      out->quant.scale.at(0) != y.quant.scale.at(0) ||
      uint8_zero_point(*out) != uint8_zero_point(y)) {
    return "a QUANTIZE that rescales is not folded yet";
  }
  // int8 boundaries reach the chip with their most significant bit flipped by the host
  // (SIGNED_FIXED_POINT8 layers, docs/container.md), so the chip sees uint8 with zero point + 128.
  layer.signed_input = in->type == TensorType::kInt8;
  layer.signed_output = out->type == TensorType::kInt8;
  layer.in_zp = uint8_zero_point(*in);
  layer.out_zp = uint8_zero_point(*out);
  layer.in_scale = x.quant.scale[0];
  layer.out_scale = y.quant.scale[0];
  layer.input_name = in->name;
  layer.output_name = out->name;
  layer.weights.resize(w.data.size());
  for (size_t i = 0; i < w.data.size(); ++i) layer.weights[i] = static_cast<int8_t>(w.data[i]);
  layer.mult = channel_multipliers(w, layer.n, layer.in_scale, layer.out_scale);
  activation_clamps(activation, layer.out_zp, layer.out_scale, layer.clamp_min, layer.clamp_max);
  return "";
}

}  // namespace tinycoral::compiler
