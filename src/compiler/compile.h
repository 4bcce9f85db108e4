// `tinycoral compile` as a library: a CPU TFLite model in, the edgetpu model and its operation log
// out. Import (graph.h) -> partition (partition.h) -> code generation of the mapped part
// (fc_codegen.h) -> writer (writer.h). A mapped part no generator covers yet goes back to the CPU
// with the reason in the log, so every valid model gets an output; a malformed model is an Error.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/graph.h"
#include "compiler/operation_log.h"
#include "compiler/partition.h"

namespace tinycoral::compiler {

struct CompileResult {
  Graph graph;
  Partition partition;
  std::vector<LogRow> rows;
  std::vector<uint8_t> tflite;  // the *_edgetpu.tflite bytes
  int edgetpu_subgraphs = 0;    // 0 when everything stays on the CPU
};

CompileResult compile_model(std::span<const uint8_t> tflite_bytes);

}  // namespace tinycoral::compiler
