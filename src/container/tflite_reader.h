// Reading TFLite flatbuffers (identifier "TFL3") into the owned Model of tflite_model.h. The bytes
// are verified with flatbuffers::Verifier before anything is read, so a malformed file is an Error,
// never a crash. Facts: docs/container.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

#include "container/tflite_model.h"

namespace tinycoral::container {

// Throws Error naming what is wrong (bad identifier, failed verification, index out of range, ...).
Model read_tflite(std::span<const uint8_t> bytes);
// As read_tflite, with every error message prefixed by the file name.
Model read_tflite_file(const std::filesystem::path& path);

}  // namespace tinycoral::container
