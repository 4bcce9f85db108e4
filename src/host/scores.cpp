// Output values and top-K classes (scores.h).
#include "host/scores.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"

namespace tinycoral::host {

std::vector<double> dequantized_values(const TensorView& t) {
  using container::TensorType;
  const int64_t n = t.elements();
  std::vector<double> v(static_cast<size_t>(n));
  const double s = t.quantized() ? t.scale() : 1.0;
  const double z = t.quantized() ? t.zero_point() : 0.0;
  const bool quantizable = t.type() != TensorType::kFloat32 && t.type() != TensorType::kInt64 &&
                           t.type() != TensorType::kBool && t.quantized();
  for (int64_t i = 0; i < n; ++i) {
    double x = 0;
    switch (t.type()) {
      case TensorType::kUInt8:
        x = t.as<uint8_t>()[i];
        break;
      case TensorType::kInt8:
        x = t.as<int8_t>()[i];
        break;
      case TensorType::kInt16:
        x = t.as<int16_t>()[i];
        break;
      case TensorType::kInt32:
        x = t.as<int32_t>()[i];
        break;
      case TensorType::kInt64:
        x = static_cast<double>(t.as<int64_t>()[i]);
        break;
      case TensorType::kFloat32:
        x = t.as<float>()[i];
        break;
      case TensorType::kBool:
        x = t.data[i] ? 1 : 0;
        break;
      default:
        fail("output '", t.name(), "' has unsupported type ",
             container::tensor_type_name(t.type()));
    }
    v[static_cast<size_t>(i)] = quantizable ? static_cast<float>((x - z) * s) : x;
  }
  return v;
}

std::vector<size_t> top_k(const std::vector<double>& scores, size_t k) {
  std::vector<size_t> idx(scores.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  const size_t n = std::min(idx.size(), k);
  std::partial_sort(
      idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(n), idx.end(),
      [&](size_t a, size_t b) { return scores[a] != scores[b] ? scores[a] > scores[b] : a > b; });
  idx.resize(n);
  return idx;
}

}  // namespace tinycoral::host
