// Helpers for image classifiers: an image file as a model's input, the best classes of an output,
// and label files.
//
//   tinycoral::set_input_image(model, 0, "cat.bmp");
//   model.invoke();
//   for (const tinycoral::Class& c : tinycoral::get_classes(model, 3)) ...
#pragma once

#include <cstddef>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "tinycoral/export.h"
#include "tinycoral/interpreter.h"

namespace tinycoral {

// Reads a BMP, PNG or JPEG and converts it to the bytes of an image input of shape [1, H, W, C]
// (uint8 or int8): channels converted, resized with bilinear filtering as libcoral does. Throws
// Error for an unreadable image or an input that is not an image.
TINYCORAL_API std::vector<uint8_t> image_input(const std::string& image_path,
                                               const TensorInfo& input);
// The same, written into input `i` of `model`.
TINYCORAL_API void set_input_image(Interpreter& model, size_t i, const std::string& image_path);

struct Class {
  int id = 0;
  float score = 0.0f;
};

// The `top_k` best classes of output `output` (dequantized scores) whose score is at least
// `threshold`, best first; equal scores put the higher id first (as Google's tools do).
TINYCORAL_API std::vector<Class> get_classes(
    const Interpreter& model, size_t top_k = 1,
    float threshold = -std::numeric_limits<float>::infinity(), size_t output = 0);

// A label file in either of Google's formats: "INDEX LABEL" per line, or one label per line (the
// line number is the index). Throws Error when the file cannot be read.
TINYCORAL_API std::map<int, std::string> read_labels(const std::string& path);

}  // namespace tinycoral
