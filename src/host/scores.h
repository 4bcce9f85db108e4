// Reading a model's outputs as numbers: every output type dequantized the one way the CLI, the
// library and the web app show it, and the K best classes in Google's order.
#pragma once

#include <cstddef>
#include <vector>

#include "host/kernel.h"

namespace tinycoral::host {

// Each element as a real value: quantized integer types as f32((q - zero_point) * scale), float32,
// int64 and bool as they are. Other types are an error naming the tensor.
std::vector<double> dequantized_values(const TensorView& t);

// The indices of the k best scores, best first; equal scores by the higher index (Google's order,
// expectations 1.7).
std::vector<size_t> top_k(const std::vector<double>& scores, size_t k);

}  // namespace tinycoral::host
