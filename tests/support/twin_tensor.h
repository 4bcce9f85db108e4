// The one tensor builder of the compiler tests' CPU twins (models built the way TensorFlow's
// converter writes them): a named tensor with type, shape, quantization and its buffer.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::compiler::testing {

inline container::Tensor twin_tensor(const std::string& name, container::TensorType type,
                                     std::vector<int32_t> shape, std::vector<float> scale,
                                     std::vector<int64_t> zp, uint32_t buffer = 0) {
  container::Tensor t;
  t.name = name;
  t.type = type;
  t.shape = std::move(shape);
  t.buffer = buffer;
  t.quantization.scale = std::move(scale);
  t.quantization.zero_point = std::move(zp);
  return t;
}

}  // namespace tinycoral::compiler::testing
