// The writer: puts generated executables into a DWN1 package inside an edgetpu-custom-op and
// rewrites the TFLite graph around it, laid out like edgetpu_compiler's output (the mapped
// operators replaced by one custom op; tensors and buffers nothing refers to any more dropped).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/partition.h"
#include "container/executable.h"
#include "container/tflite_model.h"

namespace tinycoral::compiler {

// The package edgetpu_compiler 16.0 writes: min_runtime_version 14, compiler_version "cl/",
// executables in the order given (EXECUTION_ONLY first, then PARAMETER_CACHING).
container::Package make_package(std::vector<container::Executable> executables);

// The whole output file: `cpu` with the operators of `partition.mapped_ops` replaced by one
// edgetpu-custom-op carrying `package` (taken, not copied: it holds the parameters).
std::vector<uint8_t> write_edgetpu_tflite(const container::Model& cpu, const Partition& partition,
                                          container::Package package);

}  // namespace tinycoral::compiler
