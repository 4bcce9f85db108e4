// The compile pipeline (compile.h).
//
// The mapped part is lowered by the first generator that recognises it (lower_mapped_part): a
// single FULLY_CONNECTED (fc_codegen.h), a chain of CONV_2D layers (conv_codegen.h), ADD or MUL of
// two tensors (eltwise_codegen.h), and the others of kGenerators. A generator
// answers "" and its package, or the reason it does not cover the part; when none covers it the
// part goes back to the CPU with the most specific reason. New generators (depthwise, pooling, and
// mixed chains) add one entry to kGenerators.
#include "compiler/compile.h"

#include <array>
#include <optional>
#include <set>
#include <utility>

#include "common/error.h"
#include "compiler/conv_codegen.h"
#include "compiler/conv_layer.h"
#include "compiler/depthwise_codegen.h"
#include "compiler/depthwise_layer.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/eltwise_layer.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"
#include "compiler/softmax_codegen.h"
#include "compiler/softmax_layer.h"
#include "compiler/writer.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"

namespace tinycoral::compiler {

namespace {

// A generator's answer for one mapped part: the package, or why not.
struct Lowered {
  std::optional<container::Package> package;
  std::string why;
  std::optional<HostPad> host_pad;  // the input padded on the host (pad_input_on_host)
};
using Generator = Lowered (*)(const Graph&, const std::vector<int>&);

Lowered lower_fc(const Graph& graph, const std::vector<int>& ops) {
  FcLayer layer;
  std::string why = match_fc(graph, ops, layer);
  if (why.empty()) why = fc_unsupported(layer.n, layer.k);
  if (!why.empty()) return {std::nullopt, why};
  FcPrograms programs = generate_fc(layer);
  return {make_package({std::move(programs.execution), std::move(programs.caching)}), ""};
}

Lowered lower_conv_chain(const Graph& graph, const std::vector<int>& ops) {
  ConvChain chain;
  std::string why = match_conv_chain(graph, ops, chain);
  std::optional<HostPad> host_pad;
  std::optional<ConvPrograms> programs;
  std::string first_why;
  // 1-3 channel images whose rows do not stream as they are: first repacked on the chip (no
  // operator on the CPU), unless its staging does not fit beside the first stage's images.
  if (why.empty()) {
    ConvChain attempt = chain;
    std::string attempt_why;
    if (repack_input_on_chip(attempt)) {
      programs = try_generate_conv(attempt, attempt_why);
    } else if (widen_input_on_chip(attempt) && widened_pixels_pay(chain, attempt)) {
      // 1-3 channel images that stream as they are: widened to whole-word pixels on the chip
      // where the first layer's ops save more cycles than the repack takes.
      programs = try_generate_conv(attempt, attempt_why);
    }
    if (programs)
      return {make_package({std::move(programs->execution), std::move(programs->caching)}), "",
              std::nullopt};
  }
  // 1-3 channel images as they are (or columns padded on the host), else in 4-byte pixels: a
  // first layer whose partial last block of pixels the placement cannot take.
  for (const bool whole_pixels : {false, true}) {
    if (!why.empty()) break;
    ConvChain attempt = chain;
    host_pad.reset();
    if (pad_input_on_host(attempt, whole_pixels))
      host_pad = HostPad{graph.ops.at(static_cast<size_t>(ops.front())).inputs.at(0),
                         attempt.host_w, attempt.host_cin, attempt.input_name};
    else if (whole_pixels)
      break;
    std::string attempt_why;
    programs = try_generate_conv(attempt, attempt_why);
    if (programs) break;
    if (!whole_pixels) first_why = std::move(attempt_why);
  }
  if (!programs && why.empty()) why = first_why;  // (the image as it is: the natural reason)
  if (!programs) return {std::nullopt, why, std::nullopt};
  return {make_package({std::move(programs->execution), std::move(programs->caching)}), "",
          std::move(host_pad)};
}

Lowered lower_depthwise(const Graph& graph, const std::vector<int>& ops) {
  DepthwiseLayer layer;
  std::string why = match_depthwise(graph, ops, layer);
  if (why.empty()) why = depthwise_unsupported(layer);
  if (!why.empty()) return {std::nullopt, why};
  DepthwisePrograms programs = generate_depthwise(layer);
  return {make_package({std::move(programs.execution), std::move(programs.caching)}), ""};
}

// [QUANTIZE] CONV_2D... then [RESHAPE] SOFTMAX and its FCs (the colour filters): both parts in one
// program (generate_conv_softmax), or "" when the part has no CONV_2D before its SOFTMAX.
std::optional<Lowered> lower_conv_softmax(const Graph& graph, const std::vector<int>& ops) {
  auto is = [&](int op, container::BuiltinOp code) {
    return graph.ops.at(static_cast<size_t>(op)).builtin == static_cast<int32_t>(code);
  };
  size_t split = 0;
  while (split < ops.size() && !is(ops[split], container::BuiltinOp::kReshape) &&
         !is(ops[split], container::BuiltinOp::kSoftmax))
    ++split;
  const std::vector<int> head(ops.begin(), ops.begin() + static_cast<std::ptrdiff_t>(split));
  const std::vector<int> tail(ops.begin() + static_cast<std::ptrdiff_t>(split), ops.end());
  bool conv = false;
  for (int op : head) conv = conv || is(op, container::BuiltinOp::kConv2D);
  if (!conv || tail.empty()) return std::nullopt;
  ConvChain chain;
  SoftmaxFcLayer layer;
  std::string why = match_conv_chain(graph, head, chain);
  if (why.empty()) why = match_softmax_fc(graph, tail, layer);
  std::optional<SoftmaxPrograms> programs;
  if (why.empty()) programs = generate_conv_softmax(chain, layer, why);
  if (!programs) return Lowered{std::nullopt, why};
  return Lowered{make_package({std::move(programs->execution), std::move(programs->caching)}), ""};
}

Lowered lower_softmax_fc(const Graph& graph, const std::vector<int>& ops) {
  if (std::optional<Lowered> joined = lower_conv_softmax(graph, ops)) return std::move(*joined);
  SoftmaxFcLayer layer;
  std::string why = match_softmax_fc(graph, ops, layer);
  if (why.empty()) why = softmax_fc_unsupported(layer);
  if (!why.empty()) return {std::nullopt, why};
  SoftmaxPrograms programs = generate_softmax_fc(layer);
  return {make_package({std::move(programs.execution), std::move(programs.caching)}), ""};
}

Lowered lower_eltwise(const Graph& graph, const std::vector<int>& ops) {
  EltwiseLayer layer;
  std::string why = match_eltwise(graph, ops, layer);
  if (why.empty()) why = eltwise_unsupported(layer);
  if (!why.empty()) return {std::nullopt, why};
  return {make_package({generate_eltwise(layer)}), ""};
}

// Where the part first holds an operator of this type, or ops.size() (to pick the reason to log).
size_t first_of(const Graph& graph, const std::vector<int>& ops, container::BuiltinOp code) {
  for (size_t i = 0; i < ops.size(); ++i)
    if (graph.ops.at(static_cast<size_t>(ops[i])).builtin == static_cast<int32_t>(code)) return i;
  return ops.size();
}

Lowered lower_mapped_part(const Graph& graph, const std::vector<int>& ops) {
  struct Entry {
    container::BuiltinOp op;  // the operator the generator is about
    Generator generate;
  };
  static constexpr std::array<Entry, 8> kGenerators = {
      Entry{container::BuiltinOp::kFullyConnected, lower_fc},
      Entry{container::BuiltinOp::kConv2D, lower_conv_chain},
      Entry{container::BuiltinOp::kDepthwiseConv2D, lower_depthwise},
      Entry{container::BuiltinOp::kSoftmax, lower_softmax_fc},
      Entry{container::BuiltinOp::kAdd, lower_eltwise},
      Entry{container::BuiltinOp::kMul, lower_eltwise},
      Entry{container::BuiltinOp::kRelu, lower_eltwise},
      Entry{container::BuiltinOp::kRelu6, lower_eltwise}};
  // The reason to log: that of the generator for the part's whole shape when the part holds its
  // operator (SOFTMAX with its FCs, then the chain, the only one for CONV_2D and for parts of
  // several layers), else that of the generator for the part's earliest operator. Never a
  // single-layer generator's complaint about a CONV_2D it does not generate.
  auto rank = [&](container::BuiltinOp op) {
    const size_t at = first_of(graph, ops, op);
    if (at == ops.size()) return std::pair<int, size_t>{3, at};
    if (op == container::BuiltinOp::kSoftmax) return std::pair<int, size_t>{0, 0};
    if (op == container::BuiltinOp::kConv2D) return std::pair<int, size_t>{1, 0};
    return std::pair<int, size_t>{2, at};
  };
  std::string why;
  std::pair<int, size_t> lead{4, 0};
  for (const Entry& g : kGenerators) {
    Lowered l = g.generate(graph, ops);
    if (l.package) return l;
    if (const auto r = rank(g.op); r < lead) {
      why = l.why;
      lead = r;
    }
  }
  return {std::nullopt, why};
}

// Where a classifier's SOFTMAX (followed by at most a QUANTIZE) starts at the end of the mapped
// part, or nullopt.
std::optional<size_t> softmax_tail(const Graph& graph, const std::vector<int>& ops) {
  auto is = [&](size_t i, container::BuiltinOp code) {
    return graph.ops.at(static_cast<size_t>(ops[i])).builtin == static_cast<int32_t>(code);
  };
  for (size_t i = ops.size(); i-- > 0 && i + 2 >= ops.size();)
    if (is(i, container::BuiltinOp::kSoftmax) &&
        (i + 1 == ops.size() || is(i + 1, container::BuiltinOp::kQuantize)))
      return i;
  return std::nullopt;
}

// Where the branches after the mapped part's last fan-out start, or nullopt: the first operator
// (not an ADD, whose second operand is a residual's) that reads an image a later operator reads
// too, when every operator from it on depends on that image (DeepLab's image pooling and 1x1
// branches after its backbone). The part before it is a chain the generator may still cover.
std::optional<size_t> branch_tail(const Graph& graph, const std::vector<int>& ops) {
  auto op = [&](size_t i) -> const GraphOp& { return graph.ops.at(static_cast<size_t>(ops[i])); };
  for (size_t i = ops.size(); i-- > 1;) {
    if (is_builtin(op(i), container::BuiltinOp::kAdd) || op(i).inputs.empty()) continue;
    const int image = op(i).inputs[0];
    size_t first = i;
    for (size_t k = 0; k < i; ++k)
      if (!is_builtin(op(k), container::BuiltinOp::kAdd) && !op(k).inputs.empty() &&
          op(k).inputs[0] == image) {
        first = k;
        break;
      }
    if (first == i || first == 0) continue;
    // (Every operator from `first` on reads the image or what one of them wrote.)
    std::set<int> downstream{image};
    bool all = true;
    for (size_t k = first; k < ops.size() && all; ++k) {
      bool reads = false;
      for (int t : op(k).inputs) reads = reads || downstream.count(t) > 0;
      all = reads;
      downstream.insert(op(k).outputs.begin(), op(k).outputs.end());
    }
    return all ? std::optional<size_t>{first} : std::nullopt;
  }
  return std::nullopt;
}

}  // namespace

CompileResult compile_model(std::span<const uint8_t> tflite_bytes) {
  const container::Model cpu = container::read_tflite(tflite_bytes);
  CompileResult r;
  r.graph = import_graph(cpu);
  r.partition = partition(r.graph);
  if (!r.partition.mapped_ops.empty()) {
    Lowered lowered = lower_mapped_part(r.graph, r.partition.mapped_ops);
    // No generator covers a chain with its SOFTMAX: the SOFTMAX runs on the CPU, the rest maps.
    if (const auto at = softmax_tail(r.graph, r.partition.mapped_ops); !lowered.package && at) {
      Partition without = r.partition;
      unmap_tail(r.graph, without, *at,
                 "tinycoral runs this SOFTMAX on the CPU (no generator after a chain yet)");
      Lowered l = lower_mapped_part(r.graph, without.mapped_ops);
      if (l.package) r.partition = std::move(without);
      lowered = std::move(l);  // or the reason that remains without the SOFTMAX
    }
    // No generator covers the branches after a fan-out: they run on the CPU, the chain before
    // them maps.
    if (const auto at = branch_tail(r.graph, r.partition.mapped_ops); !lowered.package && at) {
      Partition without = r.partition;
      unmap_tail(r.graph, without, *at, "tinycoral runs this branch on the CPU: " + lowered.why);
      Lowered l = lower_mapped_part(r.graph, without.mapped_ops);
      if (l.package) {
        r.partition = std::move(without);
        lowered = std::move(l);
      }
    }
    if (!lowered.package) {
      unmap_all(r.partition, lowered.why);
    } else {
      r.tflite = write_edgetpu_tflite(cpu, r.partition, std::move(*lowered.package),
                                      lowered.host_pad ? &*lowered.host_pad : nullptr);
      r.edgetpu_subgraphs = 1;
    }
  }
  if (r.edgetpu_subgraphs == 0) r.tflite = container::write_tflite(cpu);
  r.rows = log_rows(r.graph, r.partition);
  return r;
}

}  // namespace tinycoral::compiler
