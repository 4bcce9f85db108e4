// A compiled *_edgetpu.tflite model: the TFLite Model plus the parsed options of every
// edgetpu-custom-op in it (with their packages and executables). Also reads plain CPU TFLite files
// (then edgetpu_ops is empty). Facts: docs/container.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "container/executable.h"
#include "container/tflite_model.h"

namespace tinycoral::container {

struct EdgeTpuModel {
  Model model;
  struct CustomOp {
    int subgraph = 0;
    int op_index = 0;  // index into model.subgraphs[subgraph].operators
    EdgeTpuCustomOp options;
    bool operator==(const CustomOp&) const = default;
  };
  std::vector<CustomOp> edgetpu_ops;  // in subgraph, then operator order
  std::vector<std::string> warnings;  // non-fatal findings of the reader (not compared)

  // Same content: equal models and ops, where an edgetpu op's custom_options bytes are compared
  // through their parsed `options` (a re-serialized FlexBuffer need not be byte-identical).
  bool operator==(const EdgeTpuModel& other) const;
};

// Throws Error for anything malformed (TFLite, FlexBuffers options, packages, executables).
EdgeTpuModel read_edgetpu_model(std::span<const uint8_t> bytes);
// As read_edgetpu_model, with every error message prefixed by the file name.
EdgeTpuModel read_edgetpu_model_file(const std::filesystem::path& path);

// Re-serializes every edgetpu op's options (with its packages) into its operator's custom_options,
// then writes the TFLite file.
std::vector<uint8_t> write_edgetpu_model(const EdgeTpuModel& model);

}  // namespace tinycoral::container
