// RESIZE_BILINEAR as TFLite's reference kernel computes it, as plain functions over NHWC arrays
// (the registered kernel in resize_bilinear.cpp wraps them; tests call them directly). float32 and
// uint8 share TFLite's float formula (uint8 results truncated); int8 uses TFLite's 10-bit
// fixed-point path.
#pragma once

#include <cstdint>

namespace tinycoral::host::ops {

struct ResizeGeometry {
  int32_t batches = 1, in_h = 1, in_w = 1, depth = 1, out_h = 1, out_w = 1;
  bool align_corners = false;
  bool half_pixel_centers = false;
};

void resize_bilinear(const ResizeGeometry& g, const float* in, float* out);
void resize_bilinear(const ResizeGeometry& g, const uint8_t* in, uint8_t* out);
void resize_bilinear(const ResizeGeometry& g, const int8_t* in, int8_t* out);

// RESIZE_NEAREST_NEIGHBOR (TFLite reference): any element type of `element_bytes` bytes.
void resize_nearest(const ResizeGeometry& g, const uint8_t* in, uint8_t* out, int element_bytes);

}  // namespace tinycoral::host::ops
