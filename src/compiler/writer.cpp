// Package and TFLite writing for compiled models (writer.h).
#include "compiler/writer.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "common/error.h"
#include "compiler/version.h"
#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"

namespace tinycoral::compiler {

container::Package make_package(std::vector<container::Executable> executables) {
  container::Package p;
  p.min_runtime_version = 14;
  p.compiler_version = kPackageCompilerVersion;
  p.executables = std::move(executables);
  return p;
}

std::vector<uint8_t> write_edgetpu_tflite(const container::Model& cpu, const Partition& partition,
                                          container::Package package, const HostPad* host_pad) {
  const container::Subgraph& sub = cpu.subgraphs.at(0);
  const std::set<int> mapped(partition.mapped_ops.begin(), partition.mapped_ops.end());
  container::Model out;
  out.version = cpu.version;
  out.description = "Exported from Subgraph.";
  container::Subgraph graph;
  graph.name = sub.name;

  // Operator codes: the custom op first (as edgetpu_compiler), then those the CPU part uses.
  std::map<uint32_t, uint32_t> code_map;
  container::OperatorCode custom;
  custom.builtin_code = static_cast<int32_t>(container::BuiltinOp::kCustom);
  custom.custom_code = std::string(container::kEdgeTpuCustomCode);
  out.operator_codes.push_back(custom);
  auto code_of = [&](uint32_t old) {
    auto it = code_map.find(old);
    if (it != code_map.end()) return it->second;
    out.operator_codes.push_back(cpu.operator_codes.at(old));
    const auto idx = static_cast<uint32_t>(out.operator_codes.size() - 1);
    code_map[old] = idx;
    return idx;
  };

  // Tensors and buffers, renumbered in order of first use.
  std::map<int, int> tensor_map;
  out.buffers.push_back({});
  auto tensor_of = [&](int old) -> int {
    if (old < 0) return old;
    auto it = tensor_map.find(old);
    if (it != tensor_map.end()) return it->second;
    container::Tensor t = sub.tensors.at(static_cast<size_t>(old));
    if (t.buffer != 0) {
      out.buffers.push_back(cpu.buffers.at(t.buffer));
      t.buffer = static_cast<uint32_t>(out.buffers.size() - 1);
    }
    graph.tensors.push_back(std::move(t));
    const int idx = static_cast<int>(graph.tensors.size() - 1);
    tensor_map[old] = idx;
    return idx;
  };
  for (int t : sub.inputs) graph.inputs.push_back(tensor_of(t));

  container::EdgeTpuModel model;
  bool placed = false;
  for (size_t i = 0; i < sub.operators.size(); ++i) {
    if (mapped.contains(static_cast<int>(i))) {
      if (placed) continue;
      placed = true;
      container::Operator op;
      op.opcode_index = 0;
      for (int t : partition.inputs) op.inputs.push_back(tensor_of(t));
      if (host_pad != nullptr) {
        // PAD(input, paddings) -> the padded image the custom op reads instead.
        const auto at = static_cast<size_t>(
            std::find(partition.inputs.begin(), partition.inputs.end(), host_pad->tensor) -
            partition.inputs.begin());
        const container::Tensor x = sub.tensors.at(static_cast<size_t>(host_pad->tensor));
        if (at >= op.inputs.size() || x.shape.size() != 4)
          fail("the host pad's tensor is not the custom op's NHWC input");
        container::OperatorCode pad_code;
        pad_code.builtin_code = static_cast<int32_t>(container::BuiltinOp::kPad);
        out.operator_codes.push_back(pad_code);
        container::Buffer paddings;
        for (const int32_t v :
             {0, 0, 0, 0, 0, host_pad->w - x.shape[2], 0, host_pad->cin - x.shape[3]})
          for (int b = 0; b < 4; ++b)
            paddings.data.push_back(static_cast<uint8_t>(static_cast<uint32_t>(v) >> (8 * b)));
        out.buffers.push_back(std::move(paddings));
        container::Tensor p;
        p.name = host_pad->name + "/paddings";
        p.shape = {4, 2};
        p.type = container::TensorType::kInt32;
        p.buffer = static_cast<uint32_t>(out.buffers.size() - 1);
        graph.tensors.push_back(std::move(p));
        container::Tensor y = x;
        y.name = host_pad->name;
        y.shape = {x.shape[0], x.shape[1], host_pad->w, host_pad->cin};
        y.shape_signature.clear();
        y.buffer = 0;
        graph.tensors.push_back(std::move(y));
        container::Operator pad;
        pad.opcode_index = static_cast<uint32_t>(out.operator_codes.size() - 1);
        pad.inputs = {op.inputs[at], static_cast<int>(graph.tensors.size()) - 2};
        pad.outputs = {static_cast<int>(graph.tensors.size()) - 1};
        graph.operators.push_back(std::move(pad));
        op.inputs[at] = static_cast<int>(graph.tensors.size()) - 1;
      }
      for (int t : partition.outputs) op.outputs.push_back(tensor_of(t));
      container::EdgeTpuModel::CustomOp c;
      c.subgraph = 0;
      c.op_index = static_cast<int>(graph.operators.size());
      c.options.version = 0;
      c.options.execution_preference = -1;
      c.options.chip_ids = {18};
      c.options.packages.push_back(std::move(package));
      model.edgetpu_ops.push_back(std::move(c));
      graph.operators.push_back(std::move(op));
      continue;
    }
    container::Operator op = sub.operators[i];
    op.opcode_index = code_of(op.opcode_index);
    for (int& t : op.inputs) t = tensor_of(t);
    for (int& t : op.outputs) t = tensor_of(t);
    for (int& t : op.intermediates) t = tensor_of(t);
    graph.operators.push_back(std::move(op));
  }
  for (int t : sub.outputs) graph.outputs.push_back(tensor_of(t));
  out.subgraphs.push_back(std::move(graph));
  model.model = std::move(out);
  return container::write_edgetpu_model(model);
}

}  // namespace tinycoral::compiler
