// The writer: puts generated executables into a DWN1 package inside an edgetpu-custom-op and
// rewrites the TFLite graph around it, laid out like edgetpu_compiler's output (the mapped
// operators replaced by one custom op; tensors and buffers nothing refers to any more dropped).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/partition.h"
#include "container/executable.h"
#include "container/tflite_model.h"

namespace tinycoral::compiler {

// The package edgetpu_compiler 16.0 writes: min_runtime_version 14, compiler_version "cl/",
// executables in the order given (EXECUTION_ONLY first, then PARAMETER_CACHING).
container::Package make_package(std::vector<container::Executable> executables);

// The custom op's input padded on the host (conv_layer.h, pad_input_on_host): tensor `tensor`
// [1, H, W, C] becomes `name` [1, H, w, cin] through a PAD on the CPU right before the custom op
// (TFLite's quantized PAD writes the zero point).
struct HostPad {
  int tensor = -1;
  int w = 0, cin = 0;
  std::string name;
};

// The whole output file: `cpu` with the operators of `partition.mapped_ops` replaced by one
// edgetpu-custom-op carrying `package` (taken, not copied: it holds the parameters), its input
// padded by a PAD before it when `host_pad` says so.
std::vector<uint8_t> write_edgetpu_tflite(const container::Model& cpu, const Partition& partition,
                                          container::Package package,
                                          const HostPad* host_pad = nullptr);

}  // namespace tinycoral::compiler
