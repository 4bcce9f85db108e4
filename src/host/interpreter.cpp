// The CPU reference interpreter (interpreter.h): validation, kernel preparation, liveness-based
// arena planning, execution.
#include "host/interpreter.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "common/limits.h"
#include "host/arena_planner.h"
#include "host/ops/custom_output_shapes.h"

namespace tinycoral::host {

using container::Model;
using container::Subgraph;
using container::Tensor;

namespace {

// Bounds that keep a hostile model from asking for absurd memory or loops (common/limits.h).
constexpr int64_t kMaxTensorBytes = limits::kMaxTensorBytes;
constexpr int kMaxTensorRank = 8;

std::string op_display_name(const container::OperatorCode& code) {
  if (code.builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom))
    return "CUSTOM '" + code.custom_code + "'";
  return container::builtin_op_name(code.builtin_code);
}

int64_t checked_tensor_bytes(const Tensor& t, size_t index) {
  if (t.shape.size() > static_cast<size_t>(kMaxTensorRank))
    fail("tensor ", index, " ('", t.name, "'): rank ", t.shape.size(), " exceeds ", kMaxTensorRank);
  const size_t elem = container::tensor_type_size(t.type);
  if (elem == 0)
    fail("tensor ", index, " ('", t.name, "'): type ", container::tensor_type_name(t.type),
         " is not supported");
  int64_t n = 1;
  for (int32_t d : t.shape) {
    if (d < 0) fail("tensor ", index, " ('", t.name, "'): dynamic or negative dimension ", d);
    n *= d;
    if (n * static_cast<int64_t>(elem) > kMaxTensorBytes)
      fail("tensor ", index, " ('", t.name, "'): larger than the limit of ", kMaxTensorBytes,
           " bytes");
  }
  return n * static_cast<int64_t>(elem);
}

}  // namespace

struct Interpreter::State {
  std::unique_ptr<Model> model;
  Rounding rounding = Rounding::kTflite;
  std::vector<int64_t> tensor_bytes;
  std::vector<uint8_t*> tensor_data;  // per tensor: constant buffer, arena or variable storage
  std::vector<bool> is_constant;
  std::vector<OpContext> contexts;
  std::vector<std::unique_ptr<Kernel>> kernels;
  std::vector<size_t> scratch_offset;
  std::vector<uint8_t, AlignedAllocator<uint8_t>> arena;
  std::vector<std::vector<uint8_t, AlignedAllocator<uint8_t>>> variables;
  std::vector<int> variable_tensors;
  size_t arena_size = 0;

  const Subgraph& graph() const { return model->subgraphs[0]; }

  TensorView view(int index) const {
    TensorView v;
    if (index < 0) return v;
    const auto i = static_cast<size_t>(index);
    v.index = index;
    v.tensor = &graph().tensors[i];
    v.data = tensor_data[i];
    v.bytes = static_cast<size_t>(tensor_bytes[i]);
    v.constant = is_constant[i];
    return v;
  }
};

Interpreter::Interpreter(Model model, InterpreterOptions options) : s_(std::make_unique<State>()) {
  s_->model = std::make_unique<Model>(std::move(model));
  s_->rounding = options.rounding;
  Model& m = *s_->model;
  if (m.subgraphs.empty()) fail("model has no subgraph");
  // Custom ops that size their outputs at prepare time in TFLite (PoseNet's decoder).
  resolve_custom_output_shapes(m);
  const Subgraph& g = m.subgraphs[0];
  const size_t nt = g.tensors.size();
  if (nt > limits::kMaxTensors)
    fail("the graph has ", nt, " tensors, more than the limit of ", limits::kMaxTensors);
  auto check_index = [&](int32_t idx, const std::string& what, bool optional) {
    if (idx == -1 && optional) return;
    if (idx < 0 || static_cast<size_t>(idx) >= nt)
      fail(what, " refers to tensor ", idx, " but the subgraph has ", nt, " tensors");
  };
  for (int32_t i : g.inputs) check_index(i, "graph input", false);
  for (int32_t i : g.outputs) check_index(i, "graph output", false);

  // Which tensors take part in execution.
  std::vector<bool> used(nt, false);
  for (int32_t i : g.inputs) used[static_cast<size_t>(i)] = true;
  for (int32_t i : g.outputs) used[static_cast<size_t>(i)] = true;
  for (size_t k = 0; k < g.operators.size(); ++k) {
    const auto& op = g.operators[k];
    const std::string where = cat("operator ", k);
    if (op.opcode_index >= m.operator_codes.size())
      fail(where, ": opcode index ", op.opcode_index, " out of range");
    for (int32_t i : op.inputs) {
      check_index(i, where + " input", true);
      if (i >= 0) used[static_cast<size_t>(i)] = true;
    }
    for (int32_t i : op.outputs) {
      check_index(i, where + " output", false);
      used[static_cast<size_t>(i)] = true;
    }
    for (int32_t i : op.intermediates) check_index(i, where + " intermediate", true);
  }

  // Sizes and constants.
  s_->tensor_bytes.assign(nt, 0);
  s_->tensor_data.assign(nt, nullptr);
  s_->is_constant.assign(nt, false);
  for (size_t i = 0; i < nt; ++i) {
    const Tensor& t = g.tensors[i];
    if (!used[i]) continue;
    s_->tensor_bytes[i] = checked_tensor_bytes(t, i);
    if (t.buffer >= m.buffers.size())
      fail("tensor ", i, " ('", t.name, "'): buffer ", t.buffer, " out of range");
    auto& data = m.buffers[t.buffer].data;
    if (!data.empty()) {
      if (static_cast<int64_t>(data.size()) != s_->tensor_bytes[i])
        fail("tensor ", i, " ('", t.name, "'): buffer holds ", data.size(), " bytes, shape needs ",
             s_->tensor_bytes[i]);
      s_->is_constant[i] = true;
      s_->tensor_data[i] = data.data();
    }
    if (!t.quantization.scale.empty() &&
        t.quantization.zero_point.size() != t.quantization.scale.size() &&
        !t.quantization.zero_point.empty())
      fail("tensor ", i, " ('", t.name, "'): ", t.quantization.scale.size(), " scales but ",
           t.quantization.zero_point.size(), " zero points");
  }
  for (int32_t i : g.inputs)
    if (s_->is_constant[static_cast<size_t>(i)])
      fail("graph input ", i, " ('", g.tensors[static_cast<size_t>(i)].name, "') is a constant");

  // Data flow: every non-constant operator input must be a graph input, a variable, or produced by
  // an earlier operator; every graph output must be produced (or be an input).
  std::vector<bool> ready(nt, false);
  for (int32_t i : g.inputs) ready[static_cast<size_t>(i)] = true;
  for (size_t i = 0; i < nt; ++i)
    if (s_->is_constant[i] || (used[i] && g.tensors[i].is_variable)) ready[i] = true;
  for (size_t k = 0; k < g.operators.size(); ++k) {
    const auto& op = g.operators[k];
    for (int32_t i : op.inputs)
      if (i >= 0 && !ready[static_cast<size_t>(i)])
        fail("operator ", k, " (", op_display_name(m.code_of(op)), ") reads tensor ", i, " ('",
             g.tensors[static_cast<size_t>(i)].name, "') before anything writes it");
    for (int32_t i : op.outputs) {
      if (s_->is_constant[static_cast<size_t>(i)])
        fail("operator ", k, " writes constant tensor ", i);
      ready[static_cast<size_t>(i)] = true;
    }
  }
  for (int32_t i : g.outputs)
    if (!ready[static_cast<size_t>(i)]) fail("graph output ", i, " is never written");

  // Prepare every operator: find a kernel factory that accepts it.
  const Registry registry = Registry::overlay(Registry::standard(), options.delegates);
  s_->contexts.resize(g.operators.size());
  for (size_t k = 0; k < g.operators.size(); ++k) {
    const auto& op = g.operators[k];
    OpContext& ctx = s_->contexts[k];
    ctx.op = &op;
    ctx.code = &m.code_of(op);
    ctx.op_name = ctx.code->builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom)
                      ? ctx.code->custom_code
                      : container::builtin_op_name(ctx.code->builtin_code);
    ctx.op_index = static_cast<int>(k);
    ctx.rounding = s_->rounding;
    for (int32_t i : op.inputs) ctx.inputs.push_back(s_->view(i));
    for (int32_t i : op.outputs) ctx.outputs.push_back(s_->view(i));
  }
  for (size_t k = 0; k < g.operators.size(); ++k) {
    OpContext& ctx = s_->contexts[k];
    const auto& factories = registry.find(*ctx.code);
    const std::string where = cat("operator ", k, " (", op_display_name(*ctx.code), ")");
    if (factories.empty()) {
      if (ctx.code->custom_code == "edgetpu-custom-op")
        fail(where,
             " is not supported on the CPU: this model was compiled for the Edge TPU (run "
             "it on a device, or use its CPU twin)");
      fail(where, " is not supported");
    }
    std::unique_ptr<Kernel> kernel;
    with_context(where, [&] {
      for (const auto& f : factories) {
        kernel = f(ctx);
        if (kernel) break;
      }
    });
    if (!kernel) {
      std::string types;
      for (const auto& in : ctx.inputs)
        if (in.present())
          types += std::string(types.empty() ? "" : ", ") + container::tensor_type_name(in.type());
      fail(where, " is not supported with inputs of type ", types);
    }
    s_->kernels.push_back(std::move(kernel));
  }

  // Memory plan: activations and scratch share one arena by liveness; variables get their own.
  ArenaPlanner planner;
  const int end = static_cast<int>(g.operators.size());
  std::vector<int> first(nt, std::numeric_limits<int>::max()), last(nt, -1);
  for (int32_t i : g.inputs) first[static_cast<size_t>(i)] = -1;
  for (int k = 0; k < end; ++k) {
    const auto& op = g.operators[static_cast<size_t>(k)];
    for (int32_t i : op.inputs)
      if (i >= 0) last[static_cast<size_t>(i)] = std::max(last[static_cast<size_t>(i)], k);
    for (int32_t i : op.outputs) {
      first[static_cast<size_t>(i)] = std::min(first[static_cast<size_t>(i)], k);
      last[static_cast<size_t>(i)] = std::max(last[static_cast<size_t>(i)], k);
    }
  }
  // Graph inputs and outputs live to the end: invoke() may run again on the same inputs, and
  // outputs are read after it.
  for (int32_t i : g.outputs) last[static_cast<size_t>(i)] = end;
  for (int32_t i : g.inputs) last[static_cast<size_t>(i)] = end;
  std::vector<int> tensor_item(nt, -1);
  for (size_t i = 0; i < nt; ++i) {
    if (!used[i] || s_->is_constant[i]) continue;
    if (g.tensors[i].is_variable) {
      s_->variable_tensors.push_back(static_cast<int>(i));
      continue;
    }
    tensor_item[i] = planner.add(static_cast<size_t>(s_->tensor_bytes[i]), first[i], last[i]);
  }
  std::vector<int> scratch_item(static_cast<size_t>(end), -1);
  for (int k = 0; k < end; ++k) {
    const size_t bytes = s_->kernels[static_cast<size_t>(k)]->scratch_bytes;
    if (bytes > 0) scratch_item[static_cast<size_t>(k)] = planner.add(bytes, k, k);
  }
  s_->arena_size = planner.plan();
  // The whole run's memory is checked before any of it is allocated (and zero-filled).
  uint64_t run_bytes = s_->arena_size;
  for (int i : s_->variable_tensors)
    run_bytes += static_cast<uint64_t>(s_->tensor_bytes[static_cast<size_t>(i)]);
  if (run_bytes > limits::kMaxArenaBytes)
    fail("the graph needs ", run_bytes, " bytes of tensor memory, more than the limit of ",
         limits::kMaxArenaBytes);
  s_->arena.assign(s_->arena_size, 0);
  for (size_t i = 0; i < nt; ++i)
    if (tensor_item[i] >= 0) s_->tensor_data[i] = s_->arena.data() + planner.offset(tensor_item[i]);
  s_->variables.resize(s_->variable_tensors.size());
  for (size_t v = 0; v < s_->variable_tensors.size(); ++v) {
    const auto i = static_cast<size_t>(s_->variable_tensors[v]);
    s_->variables[v].assign(static_cast<size_t>(s_->tensor_bytes[i]), 0);
    s_->tensor_data[i] = s_->variables[v].data();
  }
  reset_variables();
  for (size_t k = 0; k < s_->contexts.size(); ++k) {
    OpContext& ctx = s_->contexts[k];
    for (auto& v : ctx.inputs)
      if (v.index >= 0) v.data = s_->tensor_data[static_cast<size_t>(v.index)];
    for (auto& v : ctx.outputs) v.data = s_->tensor_data[static_cast<size_t>(v.index)];
    if (scratch_item[k] >= 0)
      ctx.scratch = {s_->arena.data() + planner.offset(scratch_item[k]),
                     s_->kernels[k]->scratch_bytes};
  }
}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

const Model& Interpreter::model() const { return *s_->model; }
Rounding Interpreter::rounding() const { return s_->rounding; }
size_t Interpreter::num_inputs() const { return s_->graph().inputs.size(); }
size_t Interpreter::num_outputs() const { return s_->graph().outputs.size(); }
size_t Interpreter::arena_bytes() const { return s_->arena_size; }

TensorView Interpreter::input(size_t i) const {
  if (i >= num_inputs()) fail("model has ", num_inputs(), " inputs, no input ", i);
  return s_->view(s_->graph().inputs[i]);
}

TensorView Interpreter::output(size_t i) const {
  if (i >= num_outputs()) fail("model has ", num_outputs(), " outputs, no output ", i);
  return s_->view(s_->graph().outputs[i]);
}

void Interpreter::set_input(size_t i, std::span<const uint8_t> bytes) {
  const TensorView v = input(i);
  if (bytes.size() != v.bytes)
    fail("input ", i, " ('", v.name(), "') takes ", v.bytes, " bytes, got ", bytes.size());
  if (!bytes.empty()) std::memcpy(v.data, bytes.data(), bytes.size());
}

std::span<const uint8_t> Interpreter::output_bytes(size_t i) const {
  const TensorView v = output(i);
  return {v.data, v.bytes};
}

void Interpreter::invoke() {
  for (size_t k = 0; k < s_->kernels.size(); ++k) s_->kernels[k]->eval(s_->contexts[k]);
}

void Interpreter::reset_variables() {
  const Subgraph& g = s_->graph();
  for (size_t v = 0; v < s_->variable_tensors.size(); ++v) {
    const Tensor& t = g.tensors[static_cast<size_t>(s_->variable_tensors[v])];
    // As TFLite's ResetVariableTensor: int8 states start at their zero point, others at zero bytes.
    const int64_t zp = t.quantization.zero_point.empty() ? 0 : t.quantization.zero_point[0];
    const uint8_t fill = t.type == container::TensorType::kInt8 ? static_cast<uint8_t>(zp) : 0;
    std::fill(s_->variables[v].begin(), s_->variables[v].end(), fill);
  }
}

std::vector<std::string> unsupported_operators(const Model& model, const Registry& registry) {
  std::set<std::string> names;
  if (model.subgraphs.empty()) return {};
  for (const auto& op : model.subgraphs[0].operators) {
    if (op.opcode_index >= model.operator_codes.size()) continue;
    const auto& code = model.code_of(op);
    if (!registry.knows(code)) names.insert(op_display_name(code));
  }
  return {names.begin(), names.end()};
}

}  // namespace tinycoral::host
