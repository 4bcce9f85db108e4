// *_edgetpu.tflite <-> EdgeTpuModel: the TFLite model plus the parsed options of every operator
// whose code is CUSTOM with custom_code "edgetpu-custom-op" (driver.md 5.1 step 1).
#include "container/edgetpu_model.h"

#include "common/error.h"
#include "common/file.h"
#include "container/edgetpu_custom_op.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"

namespace tinycoral::container {
namespace {

bool is_edgetpu_op(const Model& model, const Operator& op) {
  const OperatorCode& code = model.code_of(op);
  return code.builtin_code == static_cast<int32_t>(BuiltinOp::kCustom) &&
         code.custom_code == kEdgeTpuCustomCode;
}

// The model with the options bytes of its edgetpu ops cleared.
Model without_edgetpu_options(const EdgeTpuModel& m) {
  Model out = m.model;
  for (const EdgeTpuModel::CustomOp& op : m.edgetpu_ops) {
    if (op.subgraph < 0 || static_cast<size_t>(op.subgraph) >= out.subgraphs.size()) continue;
    auto& ops = out.subgraphs[op.subgraph].operators;
    if (op.op_index >= 0 && static_cast<size_t>(op.op_index) < ops.size())
      ops[op.op_index].custom_options.clear();
  }
  return out;
}

}  // namespace

bool EdgeTpuModel::operator==(const EdgeTpuModel& other) const {
  return edgetpu_ops == other.edgetpu_ops &&
         without_edgetpu_options(*this) == without_edgetpu_options(other);
}

EdgeTpuModel read_edgetpu_model(std::span<const uint8_t> bytes) {
  EdgeTpuModel out;
  out.model = read_tflite(bytes);
  for (size_t s = 0; s < out.model.subgraphs.size(); ++s) {
    const Subgraph& g = out.model.subgraphs[s];
    for (size_t i = 0; i < g.operators.size(); ++i) {
      if (!is_edgetpu_op(out.model, g.operators[i])) continue;
      with_context(cat("subgraph ", s, " operator ", i, " (edgetpu-custom-op)"), [&] {
        std::vector<std::string> warnings;
        EdgeTpuModel::CustomOp op{static_cast<int>(s), static_cast<int>(i),
                                  read_edgetpu_custom_op(g.operators[i].custom_options, &warnings)};
        for (std::string& w : warnings)
          out.warnings.push_back(cat("subgraph ", s, " operator ", i, ": ", w));
        out.edgetpu_ops.push_back(std::move(op));
      });
    }
  }
  return out;
}

EdgeTpuModel read_edgetpu_model_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file(path);  // its errors name the file already
  return with_context(path.string(), [&] { return read_edgetpu_model(bytes); });
}

std::vector<uint8_t> write_edgetpu_model(const EdgeTpuModel& model) {
  Model out = model.model;
  for (const EdgeTpuModel::CustomOp& op : model.edgetpu_ops) {
    if (op.subgraph < 0 || static_cast<size_t>(op.subgraph) >= out.subgraphs.size())
      fail("edgetpu op refers to subgraph ", op.subgraph, " of ", out.subgraphs.size());
    Subgraph& g = out.subgraphs[op.subgraph];
    if (op.op_index < 0 || static_cast<size_t>(op.op_index) >= g.operators.size())
      fail("edgetpu op refers to operator ", op.op_index, " of ", g.operators.size(),
           " in subgraph ", op.subgraph);
    Operator& target = g.operators[op.op_index];
    if (target.opcode_index >= out.operator_codes.size() || !is_edgetpu_op(out, target))
      fail("subgraph ", op.subgraph, " operator ", op.op_index, " is not an edgetpu-custom-op");
    target.custom_options = write_edgetpu_custom_op(op.options);
  }
  return write_tflite(out);
}

}  // namespace tinycoral::container
