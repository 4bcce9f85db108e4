// The public classification helpers (include/tinycoral/classify.h) over the host's image and label
// readers; the same choices as `tinycoral run --image --top --labels`.
#include "tinycoral/classify.h"

#include <algorithm>
#include <numeric>

#include "common/error.h"
#include "host/image.h"
#include "host/labels.h"

namespace tinycoral {

namespace {

container::TensorType tensor_type(DataType t) {
  switch (t) {
    case DataType::kUInt8:
      return container::TensorType::kUInt8;
    case DataType::kInt8:
      return container::TensorType::kInt8;
    default:
      fail("an image input must be uint8 or int8, not ", data_type_name(t));
  }
}

}  // namespace

std::vector<uint8_t> image_input(const std::string& image_path, const TensorInfo& input) {
  const host::Image image = host::read_image(image_path);
  return with_context(image_path, [&] {
    return host::image_to_input(image, input.shape, tensor_type(input.type),
                                host::ResizeMode::kBilinear, host::Normalization{});
  });
}

void set_input_image(Interpreter& model, size_t i, const std::string& image_path) {
  model.set_input(i, image_input(image_path, model.input(i)));
}

std::vector<Class> get_classes(const Interpreter& model, size_t top_k, float threshold,
                               size_t output) {
  const std::vector<float> scores = model.output_values(output);
  std::vector<int> ids(scores.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto better = [&](int a, int b) {
    const auto sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
    return sa != sb ? sa > sb : a > b;
  };
  const size_t n = std::min(top_k, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), better);
  std::vector<Class> out;
  for (size_t k = 0; k < n; ++k) {
    const float score = scores[static_cast<size_t>(ids[k])];
    if (score >= threshold) out.push_back({ids[k], score});
  }
  return out;
}

std::map<int, std::string> read_labels(const std::string& path) {
  const host::Labels labels = host::Labels::read(path);  // kept: the loop reads its map
  std::map<int, std::string> out;
  for (const auto& [index, label] : labels.all()) out[static_cast<int>(index)] = label;
  return out;
}

}  // namespace tinycoral
