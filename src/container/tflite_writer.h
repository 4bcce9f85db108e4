// Serializing a Model back into a TFLite flatbuffer (identifier "TFL3") that TFLite and our reader
// accept; read_tflite(write_tflite(m)) == m.
#pragma once

#include <cstdint>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::container {

std::vector<uint8_t> write_tflite(const Model& model);

}  // namespace tinycoral::container
