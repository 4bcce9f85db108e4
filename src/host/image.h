// Image input for the interpreter and the CLI: decoding (BMP as Google's C++ test helpers read it,
// PNG and JPEG through stb), resizing exactly as Google's suites prepare images, and normalization
// (reference: google_expectations.md section 1; docs/host.md).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::host {

// Interleaved 8-bit pixels, row-major, top row first; channels 1 (grey), 3 (RGB) or 4 (RGBA).
struct Image {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Google's BMP reading (section 1.1): header fields at fixed offsets, uncompressed only,
// 8/24/32-bit, rows padded to 4 bytes, 8-bit pixels the stored indices when the colour table is the
// identity grey ramp (every file Google's suites use) and its RGB colours otherwise,
// bottom-up unless the height is negative, BGR(A) swapped to RGB(A). Throws Error naming what is
// wrong.
Image decode_bmp(std::span<const uint8_t> bytes);
// BMP (by its "BM" signature) as above; PNG, JPEG and PPM/PGM through stb with
// their own channel count (grey, grey+alpha -> grey, RGB, RGBA).
Image decode_image(std::span<const uint8_t> bytes);
Image read_image(const std::filesystem::path& path);

enum class ResizeMode {
  kBilinear,        // TFLite float RESIZE_BILINEAR, half-pixel centres (libcoral), truncated
  kBilinearLegacy,  // the same without half-pixel centres (edgetpu 2019/2020 suites)
  kNearest,         // Pillow NEAREST (pycoral): running-sum source positions
  kNone,            // no resizing: the image must already have the input size
};
ResizeMode parse_resize_mode(const std::string& name);  // "bilinear", ...; throws for others
const char* resize_mode_name(ResizeMode mode);

// Changes the channel count: RGB(A) -> grey as (R + G + B) / 3 (integer division, section 1.1);
// RGBA -> RGB drops alpha; grey -> RGB repeats the value.
Image convert_channels(const Image& image, int channels);

// Resizes to width x height (channels unchanged). An image that already has the size is returned
// unchanged in every mode (section 1.2).
Image resize_image(const Image& image, int width, int height, ResizeMode mode);

// Section 1.5: v' = trunc(saturate_0_255((v - mean) / scale)) in float32.
struct Normalization {
  float scale = 1.0f, mean = 0.0f;
  bool identity() const { return scale == 1.0f && mean == 0.0f; }
};
Normalization parse_normalization(const std::string& text);  // "SCALE,MEAN"

// The bytes of an image input tensor of shape [1, H, W, C] or [1, H, W] (C = 1), uint8 or int8:
// channels converted, resized, normalized; int8 tensors receive v ^ 0x80 (= v - 128, the same real
// value when the int8 zero point is the uint8 one minus 128).
std::vector<uint8_t> image_to_input(const Image& image, const std::vector<int32_t>& shape,
                                    container::TensorType type, ResizeMode mode,
                                    const Normalization& norm);

}  // namespace tinycoral::host
