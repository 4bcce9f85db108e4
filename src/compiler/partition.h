// The partitioner: which operators of the graph go to the Edge TPU, with edgetpu_compiler's rules.
// An operator is supported when its type is on the Edge TPU's list, every tensor it reads or
// writes is 8-bit quantized (int32 bias constants and LSTM state aside), no activation has more
// than 3 dimensions larger than 1, and its type-specific constraints hold. An unsupported operator
// ends the mapped part for everything downstream of it (one Edge TPU subgraph, as edgetpu_compiler
// does without multi-subgraph mode); independent branches still map. Each decision carries the
// sentence edgetpu_compiler writes into its operation log. Checked against Google's own outputs
// for every model pair in the test data (tests/compiler/partition_google_test.cpp).
#pragma once

#include <string>
#include <vector>

#include "compiler/graph.h"

namespace tinycoral::compiler {

// edgetpu_compiler's status sentences.
inline constexpr const char* kMapped = "Mapped to Edge TPU";
inline constexpr const char* kNotSupported = "Operation not supported";
inline constexpr const char* kBadType = "Operation is working on an unsupported data type";
inline constexpr const char* kBadRank =
    "Tensor has unsupported rank (up to 3 innermost dimensions mapped)";
inline constexpr const char* kLaterSubgraph = "More than one subgraph is not supported";
inline constexpr const char* kUnspecified =
    "Operation is otherwise supported, but not mapped due to some unspecified limitation";

struct OpDecision {
  int op = 0;  // index into Graph::ops
  bool mapped = false;
  std::string reason;  // kMapped, or why it stays on the CPU
};

struct Partition {
  std::vector<OpDecision> decisions;  // one per operator, in graph order
  std::vector<int> mapped_ops;        // the Edge TPU part, in execution order
  std::vector<int> inputs;            // tensors the mapped part reads from outside (activations)
  std::vector<int> outputs;  // tensors it writes that the CPU part or the graph output reads
};

// Why op cannot run on the Edge TPU, or "" if it can (the per-operator rules, without the
// ordering rule).
std::string unsupported_reason(const Graph& graph, const GraphOp& op);

Partition partition(const Graph& graph);

// Moves the mapped operators from position `first` of `mapped_ops` on to the CPU with `reason`
// (a tail the code generators do not cover, e.g. a classifier's SOFTMAX) and recomputes the
// boundary tensors.
void unmap_tail(const Graph& graph, Partition& partition, size_t first, const std::string& reason);

// Moves every operator of `partition` to the CPU with `reason` (used when no code generator covers
// the mapped part yet).
void unmap_all(Partition& partition, const std::string& reason);

}  // namespace tinycoral::compiler
