// resolve_custom_output_shapes (custom_output_shapes.h): the output shapes PosenetDecoderOp and
// TFLite_Detection_PostProcess give their outputs in their prepare step.
#include "host/ops/custom_output_shapes.h"

#include <algorithm>

#include "common/error.h"
#include "host/ops/custom_options.h"
#include "host/ops/posenet_decoder.h"

namespace tinycoral::host {

int resolve_custom_output_shapes(container::Model& model) {
  int changed = 0;
  for (auto& g : model.subgraphs) {
    for (const auto& op : g.operators) {
      if (op.opcode_index >= model.operator_codes.size()) continue;  // the interpreter reports it
      const std::string& code = model.operator_codes[op.opcode_index].custom_code;
      std::vector<std::vector<int32_t>> shapes;
      if (code == "PosenetDecoderOp") {
        const ops::CustomOptions o(op.custom_options, code);
        const int32_t md = o.integer("max_detections", 1, 1000);
        const int32_t side = ops::kInstanceMaskSize;  // the 4-input form's fifth output
        shapes = {{1, md, ops::kPoseKeypoints, 2},
                  {1, md, ops::kPoseKeypoints},
                  {1, md},
                  {1},
                  {1, md, side, side}};
      } else if (code == "TFLite_Detection_PostProcess") {
        const ops::CustomOptions o(op.custom_options, code);
        const int32_t md = o.integer("max_detections", 0, 100000);
        const int32_t per = o.integer_or("max_classes_per_detection", 1, 1, 100000);
        const int64_t slots = int64_t{md} * per;
        if (slots > 1000000) fail(code, ": max_detections x max_classes_per_detection too large");
        const int32_t n = static_cast<int32_t>(slots);
        shapes = {{1, n, 4}, {1, n}, {1, n}, {1}};
      } else {
        continue;
      }
      for (size_t i = 0; i < std::min(shapes.size(), op.outputs.size()); ++i) {
        const int32_t t = op.outputs[i];
        if (t < 0 || static_cast<size_t>(t) >= g.tensors.size()) continue;
        auto& tensor = g.tensors[static_cast<size_t>(t)];
        // Only unspecified shapes are filled; a declared shape is checked by the kernel.
        if (!tensor.shape.empty() || tensor.type != container::TensorType::kFloat32) continue;
        tensor.shape = shapes[i];
        ++changed;
      }
    }
  }
  return changed;
}

}  // namespace tinycoral::host
