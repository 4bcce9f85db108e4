// `tinycoral inspect FILE [--json]`: a *.tflite model at a glance. Operators (and which run on the
// Edge TPU, i.e. are edgetpu-custom-op), tensors with shapes, types and quantization, and for every
// compiled package its executables: type, instruction count, parameter bytes, input/output layers,
// DMA hints, caching token. The text and the JSON report are built from one JSON document, so
// they never disagree. Facts: docs/container.md.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "container/edgetpu_model.h"
#include "isa/isa.h"

namespace tinycoral::cli {
namespace {

using container::BufferKind;
using container::DmaHint;
using container::EdgeTpuModel;
using container::Executable;
using container::HintKind;
using container::Layer;
using container::Tensor;
using nlohmann::json;

const char* buffer_kind_name(BufferKind k) {
  switch (k) {
    case BufferKind::kOutput:
      return "OUTPUT";
    case BufferKind::kInput:
      return "INPUT";
    case BufferKind::kParameter:
      return "PARAMETER";
    case BufferKind::kScratch:
      return "SCRATCH";
  }
  return "?";
}

const char* data_type_name(container::DataType t) {
  using container::DataType;
  switch (t) {
    case DataType::kFixedPoint8:
      return "FIXED_POINT8";
    case DataType::kFixedPoint16:
      return "FIXED_POINT16";
    case DataType::kSignedFixedPoint32:
      return "SIGNED_FIXED_POINT32";
    case DataType::kBfloat:
      return "BFLOAT";
    case DataType::kHalf:
      return "HALF";
    case DataType::kSingle:
      return "SINGLE";
    case DataType::kSignedFixedPoint8:
      return "SIGNED_FIXED_POINT8";
    case DataType::kSignedFixedPoint16:
      return "SIGNED_FIXED_POINT16";
  }
  return "?";
}

std::string operator_name(const container::Model& m, const container::Operator& op) {
  const auto& code = m.code_of(op);
  if (code.builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom))
    return code.custom_code;
  return container::builtin_op_name(code.builtin_code);
}

bool on_edgetpu(const EdgeTpuModel& m, size_t subgraph, size_t op) {
  for (const auto& e : m.edgetpu_ops)
    if (static_cast<size_t>(e.subgraph) == subgraph && static_cast<size_t>(e.op_index) == op)
      return true;
  return false;
}

json tensor_json(const container::Model& m, size_t index, const Tensor& t) {
  json q = nullptr;
  if (!t.quantization.empty()) {
    q = {{"scale", t.quantization.scale}, {"zero_point", t.quantization.zero_point}};
    if (t.quantization.scale.size() > 1)
      q["quantized_dimension"] = t.quantization.quantized_dimension;
  }
  const size_t buffer_bytes = t.buffer < m.buffers.size() ? m.buffers[t.buffer].data.size() : 0;
  return {{"index", index},
          {"name", t.name},
          {"shape", t.shape},
          {"type", container::tensor_type_name(t.type)},
          {"quantization", q},
          {"buffer", t.buffer},
          {"buffer_bytes", buffer_bytes}};
}

json meta_json(const container::Meta& m) {
  return {{"desc", buffer_kind_name(m.desc)},
          {"batch", m.batch},
          {"name", m.name},
          {"position", m.position == container::Half::kLower32 ? "LO32" : "HI32"}};
}

json hint_json(const DmaHint& h) {
  json j = {{"direction", h.direction == container::Direction::kInfeed ? "INFEED" : "OUTFEED"}};
  switch (h.kind) {
    case HintKind::kNone:
      j["kind"] = "none";
      break;
    case HintKind::kDma:
      j["kind"] = "dma";
      j["meta"] = meta_json(h.meta);
      j["offset"] = h.offset_in_bytes;
      j["size"] = h.size_in_bytes;
      break;
    case HintKind::kInstruction:
      j["kind"] = "instr";
      j["chunk"] = h.chunk_index;
      break;
    case HintKind::kInterrupt:
      j["kind"] = "interrupt";
      j["interrupt"] = h.interrupt_type;
      break;
    case HintKind::kFence:
      j["kind"] = "fence";
      break;
  }
  return j;
}

// The compact hint notation of models.md: I0 >INP(name)[off+size] <OUT(name)[...] INT0 FENCE.
std::string hint_text(const DmaHint& h) {
  switch (h.kind) {
    case HintKind::kNone:
      return "NONE";
    case HintKind::kInstruction:
      return cat("I", h.chunk_index);
    case HintKind::kInterrupt:
      return cat("INT", h.interrupt_type);
    case HintKind::kFence:
      return "FENCE";
    case HintKind::kDma: {
      const char* dir = h.direction == container::Direction::kInfeed ? ">" : "<";
      const char* kind = h.meta.desc == BufferKind::kInput       ? "INP"
                         : h.meta.desc == BufferKind::kOutput    ? "OUT"
                         : h.meta.desc == BufferKind::kParameter ? "PAR"
                                                                 : "SCR";
      const std::string name = h.meta.name.empty() ? "" : cat("(", h.meta.name, ")");
      return cat(dir, kind, name, "[", h.offset_in_bytes, "+", h.size_in_bytes, "]");
    }
  }
  return "?";
}

json layer_json(const Layer& l) {
  json j = {{"name", l.name},
            {"y", l.y_dim},
            {"x", l.x_dim},
            {"z", l.z_dim},
            {"size_bytes", l.size_bytes},
            {"zero_point", l.zero_point},
            {"dequantization_factor", l.dequantization_factor},
            {"data_type", data_type_name(l.data_type)},
            {"execution_count", l.execution_count_per_inference},
            {"cache_on_dram", l.cache_on_dram}};
  if (!l.shape.empty()) {
    json dims = json::array();
    for (const auto& r : l.shape) dims.push_back(r.end - r.start + 1);
    j["shape"] = dims;
  }
  if (l.is_output) j["output_layout"] = l.output_layout.has_value();
  return j;
}

json executable_json(size_t index, const Executable& e) {
  json streams = json::array();
  int64_t total_instructions = 0;
  bool all_decoded = true;
  for (const auto& s : e.bitstreams) {
    json b = {{"bytes", s.data.size()}, {"words", s.data.size() / isa::kWordBytes}};
    try {
      const size_t n = isa::decode(s.data).size();
      b["instructions"] = n;
      total_instructions += static_cast<int64_t>(n);
    } catch (const Error& err) {
      b["instructions"] = nullptr;
      b["decode_error"] = err.what();
      all_decoded = false;
    }
    json offsets = json::array();
    for (const auto& f : s.field_offsets) {
      json o = meta_json(f.meta);
      o["offset_bit"] = f.offset_bit;
      offsets.push_back(o);
    }
    b["field_offsets"] = offsets;
    streams.push_back(b);
  }
  json inputs = json::array(), outputs = json::array(), hints = json::array();
  for (const auto& l : e.input_layers) inputs.push_back(layer_json(l));
  for (const auto& l : e.output_layers) outputs.push_back(layer_json(l));
  for (const auto& h : e.dma_hints.hints) hints.push_back(hint_json(h));
  char token[32];
  std::snprintf(token, sizeof token, "0x%016llx",
                static_cast<unsigned long long>(e.parameter_caching_token));
  return {
      {"index", index},
      {"name", e.name},
      {"type", container::executable_type_name(e.type)},
      {"chip", e.chip},
      {"version", e.version},
      {"batch_size", e.batch_size},
      {"instructions", all_decoded ? json(total_instructions) : json(nullptr)},
      {"bitstreams", streams},
      {"parameter_bytes", e.parameters.size()},
      {"scratch_size_bytes", e.scratch_size_bytes},
      {"parameter_caching_token", token},
      {"estimated_cycles", e.estimated_cycles},
      {"used_narrow_memory_bytes_per_tile", e.used_narrow_memory_bytes_per_tile},
      {"use_tpu_dram_for_parameters", e.use_tpu_dram_for_parameters},
      {"input_layers", inputs},
      {"output_layers", outputs},
      {"dma_hints", {{"fully_deterministic", e.dma_hints.fully_deterministic}, {"hints", hints}}}};
}

json report(const std::string& path, size_t file_size, const EdgeTpuModel& em) {
  const container::Model& m = em.model;
  json subgraphs = json::array();
  size_t op_count = 0, tpu_ops = 0, executables = 0;
  for (size_t s = 0; s < m.subgraphs.size(); ++s) {
    const auto& g = m.subgraphs[s];
    json ops = json::array(), tensors = json::array();
    for (size_t i = 0; i < g.operators.size(); ++i) {
      const bool tpu = on_edgetpu(em, s, i);
      ops.push_back({{"index", i},
                     {"op", operator_name(m, g.operators[i])},
                     {"edgetpu", tpu},
                     {"inputs", g.operators[i].inputs},
                     {"outputs", g.operators[i].outputs}});
      ++op_count;
      tpu_ops += tpu;
    }
    for (size_t t = 0; t < g.tensors.size(); ++t)
      tensors.push_back(tensor_json(m, t, g.tensors[t]));
    subgraphs.push_back({{"index", s},
                         {"name", g.name},
                         {"inputs", g.inputs},
                         {"outputs", g.outputs},
                         {"operators", ops},
                         {"tensors", tensors}});
  }
  json edgetpu = json::array();
  for (const auto& op : em.edgetpu_ops) {
    json packages = json::array();
    for (const auto& p : op.options.packages) {
      json exes = json::array();
      for (size_t i = 0; i < p.executables.size(); ++i)
        exes.push_back(executable_json(i, p.executables[i]));
      executables += p.executables.size();
      packages.push_back({{"min_runtime_version", p.min_runtime_version},
                          {"compiler_version", p.compiler_version},
                          {"keypair_version", p.keypair_version},
                          {"signature_bytes", p.signature.size()},
                          {"virtual_chip_id", p.virtual_chip_id},
                          {"model_identifier", p.model_identifier},
                          {"executables", exes}});
    }
    edgetpu.push_back({{"subgraph", op.subgraph},
                       {"operator", op.op_index},
                       {"version", op.options.version},
                       {"chip_name", op.options.chip_name},
                       {"execution_preference", op.options.execution_preference},
                       {"chip_ids", op.options.chip_ids},
                       {"packages", packages}});
  }
  const auto& main = m.subgraphs.front();
  return {{"file", path},
          {"size", file_size},
          {"version", m.version},
          {"description", m.description},
          {"summary",
           {{"operators", op_count},
            {"edgetpu_operators", tpu_ops},
            {"inputs", main.inputs.size()},
            {"outputs", main.outputs.size()},
            {"executables", executables}}},
          {"subgraphs", subgraphs},
          {"edgetpu_ops", edgetpu},
          {"warnings", em.warnings}};
}

// --- text rendering of the report ---

std::string list(const json& a, const char* sep = ",") {
  std::string out;
  for (size_t i = 0; i < a.size(); ++i) out += (i ? sep : "") + a[i].dump();
  return out;
}

std::string quant_text(const json& q) {
  if (q.is_null()) return "";
  if (q["scale"].size() == 1)
    return cat(" scale ", q["scale"][0].get<double>(), " zp ",
               q["zero_point"].empty() ? 0 : q["zero_point"][0].get<int64_t>());
  return cat(" per-channel(", q["scale"].size(), " on dim ", q["quantized_dimension"].get<int>(),
             ")");
}

std::string tensor_line(const json& t) {
  return cat(t["name"].get<std::string>(), " ", t["type"].get<std::string>(), "[", list(t["shape"]),
             "]", quant_text(t["quantization"]));
}

std::string layer_line(const json& l) {
  return cat(l["name"].get<std::string>(), " ", l["y"].get<int>(), "x", l["x"].get<int>(), "x",
             l["z"].get<int>(), " ", l["data_type"].get<std::string>(), " zp ",
             l["zero_point"].get<int>(), " scale ", l["dequantization_factor"].get<double>(), ", ",
             l["size_bytes"].get<int>(), " bytes");
}

void print_text(const json& r, const EdgeTpuModel& em, std::ostream& out) {
  const json& s = r["summary"];
  out << r["file"].get<std::string>() << ": TFLite v" << r["version"].get<int>() << ", "
      << r["size"].get<size_t>() << " bytes";
  if (!r["description"].get<std::string>().empty())
    out << ", \"" << r["description"].get<std::string>() << "\"";
  out << "\n  " << s["operators"].get<size_t>() << " operators ("
      << s["edgetpu_operators"].get<size_t>() << " on the Edge TPU), " << s["inputs"].get<size_t>()
      << " inputs, " << s["outputs"].get<size_t>() << " outputs, " << s["executables"].get<size_t>()
      << " executables\n";
  for (const json& g : r["subgraphs"]) {
    out << "subgraph " << g["index"].get<size_t>();
    if (!g["name"].get<std::string>().empty()) out << " \"" << g["name"].get<std::string>() << "\"";
    out << ": " << g["tensors"].size() << " tensors, " << g["operators"].size() << " operators\n";
    const json& tensors = g["tensors"];
    for (const char* role : {"inputs", "outputs"}) {
      out << "  " << role << ":\n";
      for (const json& i : g[role])
        out << "    #" << i.get<int>() << " " << tensor_line(tensors[i.get<size_t>()]) << "\n";
    }
    out << "  operators:\n";
    for (const json& op : g["operators"])
      out << "    #" << op["index"].get<size_t>() << " " << op["op"].get<std::string>()
          << (op["edgetpu"].get<bool>() ? " [Edge TPU]" : " [CPU]") << " in [" << list(op["inputs"])
          << "] out [" << list(op["outputs"]) << "]\n";
    out << "  tensors:\n";
    for (const json& t : tensors) {
      out << "    #" << t["index"].get<size_t>() << " " << tensor_line(t);
      if (t["buffer_bytes"].get<size_t>() > 0)
        out << ", " << t["buffer_bytes"].get<size_t>() << " bytes of data";
      out << "\n";
    }
  }
  for (const json& op : r["edgetpu_ops"]) {
    out << "edgetpu-custom-op (subgraph " << op["subgraph"].get<int>() << ", operator "
        << op["operator"].get<int>() << "): version " << op["version"].get<int64_t>()
        << ", execution preference " << op["execution_preference"].get<int64_t>();
    if (!op["chip_ids"].empty()) out << ", chip ids [" << list(op["chip_ids"]) << "]";
    out << "\n";
    size_t pi = 0;
    for (const json& p : op["packages"]) {
      out << "  package " << pi++ << ": min runtime " << p["min_runtime_version"].get<int>()
          << ", compiler \"" << p["compiler_version"].get<std::string>() << "\", "
          << p["executables"].size() << " executables\n";
      for (const json& e : p["executables"]) {
        out << "    executable " << e["index"].get<size_t>() << " \""
            << e["name"].get<std::string>() << "\": " << e["type"].get<std::string>() << ", chip "
            << e["chip"].get<std::string>() << ", batch " << e["batch_size"].get<int>() << ", ";
        if (e["instructions"].is_null())
          out << "? instructions";
        else
          out << e["instructions"].get<int64_t>() << " instructions";
        out << " in " << e["bitstreams"].size() << " bitstream(s), "
            << e["parameter_bytes"].get<size_t>() << " parameter bytes, scratch "
            << e["scratch_size_bytes"].get<int>() << ", caching token "
            << e["parameter_caching_token"].get<std::string>() << "\n";
        size_t bi = 0;
        for (const json& b : e["bitstreams"]) {
          out << "      bitstream " << bi++ << ": " << b["bytes"].get<size_t>() << " bytes, ";
          if (b["instructions"].is_null())
            out << "not decodable (" << b["decode_error"].get<std::string>() << ")";
          else
            out << b["instructions"].get<size_t>() << " instructions";
          out << ", " << b["field_offsets"].size() << " field offsets\n";
        }
        for (const json& l : e["input_layers"]) out << "      input  " << layer_line(l) << "\n";
        for (const json& l : e["output_layers"]) out << "      output " << layer_line(l) << "\n";
      }
    }
  }
  // DMA hints in the compact notation, straight from the model.
  for (const auto& op : em.edgetpu_ops)
    for (size_t p = 0; p < op.options.packages.size(); ++p)
      for (size_t i = 0; i < op.options.packages[p].executables.size(); ++i) {
        const auto& hints = op.options.packages[p].executables[i].dma_hints;
        out << "DMA hints, package " << p << " executable " << i
            << (hints.fully_deterministic ? " (fully deterministic):" : " (not deterministic):");
        for (const auto& h : hints.hints) out << " " << hint_text(h);
        out << "\n";
      }
  for (const json& w : r["warnings"]) out << "warning: " << w.get<std::string>() << "\n";
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "inspect", "Show a .tflite model at a glance: operators, tensors, Edge TPU executables");
  static std::string path;
  static bool as_json = false;
  cmd->add_option("FILE", path, "a .tflite or *_edgetpu.tflite model")->required();
  cmd->add_flag("--json", as_json, "print the same report as JSON");
  cmd->callback([] {
    const std::vector<uint8_t> bytes = read_file(path);
    const EdgeTpuModel model =
        with_context(path, [&] { return container::read_edgetpu_model(bytes); });
    const json r = report(path, bytes.size(), model);
    if (as_json)
      std::cout << r.dump(1) << "\n";
    else
      print_text(r, model, std::cout);
  });
}

}  // namespace tinycoral::cli
