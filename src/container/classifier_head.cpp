// The classifier head (classifier_head.h). Google's quantization, which its checks depend on:
// weights uint8 over [min(0, w), max(0, w)]; biases int32 with scale = input scale x weight scale
// and zero point 0; the FC output uint8 over the given logits range widened to contain 0; the
// softmax output uint8 with scale 1/256, zero point 0. Values are rounded in float, as there.
#include "container/classifier_head.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "container/schema/tflite_generated.h"

namespace tinycoral::container {

Uint8Params uint8_params_for_range(float min, float max) {
  if (!std::isfinite(min) || !std::isfinite(max))
    fail("quantization range [", min, ", ", max, "] is not finite");
  if (!(min <= 0 && max >= 0)) fail("quantization range [", min, ", ", max, "] does not contain 0");
  if (min == max) fail("quantization range [0, 0] is a point: no scale");
  const float qmin = 0, qmax = 255;
  Uint8Params p;
  p.scale = (max - min) / (qmax - qmin);
  // The zero point from whichever end adds the smaller terms, then nudged into [0, 255].
  const float from_min = qmin - min / p.scale;
  const float from_max = qmax - max / p.scale;
  const float from_min_error = std::abs(qmin) + std::abs(min / p.scale);
  const float from_max_error = std::abs(qmax) + std::abs(max / p.scale);
  const float zp = from_min_error < from_max_error ? from_min : from_max;
  p.zero_point = zp < qmin ? 0 : zp > qmax ? 255 : static_cast<int32_t>(std::round(zp));
  return p;
}

namespace {

Quantization quantization(const Uint8Params& p, float min, float max) {
  Quantization q;
  q.scale = {p.scale};
  q.zero_point = {p.zero_point};
  q.min = {min};
  q.max = {max};
  return q;
}

uint32_t opcode_index(Model& m, BuiltinOp op) {
  const auto code = static_cast<int32_t>(op);
  for (size_t i = 0; i < m.operator_codes.size(); ++i)
    if (m.operator_codes[i].builtin_code == code) return static_cast<uint32_t>(i);
  OperatorCode c;
  c.builtin_code = code;
  m.operator_codes.push_back(c);
  return static_cast<uint32_t>(m.operator_codes.size() - 1);
}

int32_t add_tensor(Subgraph& g, Tensor t) {
  g.tensors.push_back(std::move(t));
  return static_cast<int32_t>(g.tensors.size() - 1);
}

uint32_t add_buffer(Model& m, std::vector<uint8_t> data) {
  m.buffers.push_back(Buffer{std::move(data)});
  return static_cast<uint32_t>(m.buffers.size() - 1);
}

// Appends `op` reading the graph's output (and `extra` inputs) and makes `out` the new output.
void append_op(Model& m, BuiltinOp code, tflite::BuiltinOptions tag, BuiltinOptions options,
               std::vector<int32_t> extra, int32_t out) {
  Subgraph& g = m.subgraphs[0];
  Operator op;
  op.opcode_index = opcode_index(m, code);
  op.inputs = {g.outputs[0]};
  op.inputs.insert(op.inputs.end(), extra.begin(), extra.end());
  op.outputs = {out};
  op.builtin_options_type = static_cast<uint8_t>(tag);
  op.options = std::move(options);
  g.operators.push_back(std::move(op));
  g.outputs[0] = out;
}

}  // namespace

Model append_classifier_head(Model model, const ClassifierHead& head) {
  if (model.subgraphs.size() != 1)
    fail("appending a classifier needs a model with one subgraph, not ", model.subgraphs.size());
  Subgraph& g = model.subgraphs[0];
  if (g.outputs.size() != 1)
    fail("appending a classifier needs a model with one output, not ", g.outputs.size());
  const Tensor features = g.tensors.at(static_cast<size_t>(g.outputs[0]));
  if (features.type != TensorType::kUInt8 || features.quantization.scale.size() != 1)
    fail("the embedding '", features.name, "' is not a per-tensor quantized uint8 tensor");
  if (features.shape.empty()) fail("the embedding '", features.name, "' has no shape");
  const int32_t dim = features.shape.back();
  const size_t classes = head.biases.size();
  if (classes == 0 || dim <= 0 || head.weights.size() != classes * static_cast<size_t>(dim))
    fail("classifier weights: ", head.weights.size(), " values for ", classes, " classes of ", dim,
         " features");

  auto finite = [](const std::vector<float>& v) {
    return std::all_of(v.begin(), v.end(), [](float x) { return std::isfinite(x); });
  };
  if (!finite(head.weights) || !finite(head.biases))
    fail("classifier weights and biases must be finite numbers");
  if (!(features.quantization.scale[0] > 0))
    fail("the embedding '", features.name, "' has scale ", features.quantization.scale[0]);
  const auto [wmin_it, wmax_it] = std::minmax_element(head.weights.begin(), head.weights.end());
  const float wmin = std::min(0.0f, *wmin_it), wmax = std::max(0.0f, *wmax_it);
  const Uint8Params wq = uint8_params_for_range(wmin, wmax);
  std::vector<uint8_t> w(head.weights.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const float q = std::round(static_cast<float>(wq.zero_point) + head.weights[i] / wq.scale);
    w[i] = static_cast<uint8_t>(std::clamp(q, 0.0f, 255.0f));
  }

  const float bias_scale = features.quantization.scale[0] * wq.scale;
  std::vector<uint8_t> b(classes * 4);
  for (size_t i = 0; i < classes; ++i) {
    const double q = std::round(static_cast<double>(head.biases[i] / bias_scale));
    const auto v = static_cast<int32_t>(std::clamp(q, -2147483648.0, 2147483647.0));
    std::memcpy(&b[i * 4], &v, 4);
  }
  const auto [bmin_it, bmax_it] = std::minmax_element(head.biases.begin(), head.biases.end());

  const float omin = std::min(0.0f, head.logits_min), omax = std::max(0.0f, head.logits_max);
  const Uint8Params oq = uint8_params_for_range(omin, omax);

  Tensor weights{.name = "Appended/FC/Weights",
                 .shape = {static_cast<int32_t>(classes), dim},
                 .type = TensorType::kUInt8,
                 .buffer = add_buffer(model, std::move(w)),
                 .quantization = quantization(wq, wmin, wmax)};
  Tensor bias{.name = "Appended/FC/Bias",
              .shape = {static_cast<int32_t>(classes)},
              .type = TensorType::kInt32,
              .buffer = add_buffer(model, std::move(b)),
              .quantization = {.scale = {bias_scale},
                               .zero_point = {0},
                               .min = {std::min(0.0f, *bmin_it)},
                               .max = {std::max(0.0f, *bmax_it)}}};
  std::vector<int32_t> logits_shape(features.shape.begin(), features.shape.end() - 1);
  logits_shape.push_back(static_cast<int32_t>(classes));
  Tensor logits{.name = "Appended/FC/Output",
                .shape = logits_shape,
                .type = TensorType::kUInt8,
                .quantization = quantization(oq, omin, omax)};
  const int32_t wi = add_tensor(g, std::move(weights));
  const int32_t bi = add_tensor(g, std::move(bias));
  const int32_t li = add_tensor(g, logits);
  append_op(model, BuiltinOp::kFullyConnected, tflite::BuiltinOptions::FullyConnectedOptions,
            FullyConnectedOptions{}, {wi, bi}, li);

  std::vector<int32_t> scores_shape = logits_shape;
  if (features.shape.size() == 4) {
    scores_shape = {logits_shape.front(), logits_shape.back()};
    Tensor flat{.name = "Imprinting/Reshape/Output",
                .shape = scores_shape,
                .type = TensorType::kUInt8,
                .quantization = logits.quantization};
    append_op(model, BuiltinOp::kReshape, tflite::BuiltinOptions::ReshapeOptions,
              ReshapeOptions{scores_shape}, {}, add_tensor(g, std::move(flat)));
  }
  Tensor scores{.name = "Imprinting/Softmax/Output",
                .shape = scores_shape,
                .type = TensorType::kUInt8,
                .quantization = {.scale = {1.0f / 256}, .zero_point = {0}, .min = {0}, .max = {1}}};
  append_op(model, BuiltinOp::kSoftmax, tflite::BuiltinOptions::SoftmaxOptions,
            SoftmaxOptions{1.0f}, {}, add_tensor(g, std::move(scores)));
  return model;
}

}  // namespace tinycoral::container
