// RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR kernels, bit-exact with TFLite's reference kernels:
// float32/uint8 interpolate in float32 in TFLite's term order (((v * wy) * wx), rows y0x0, y1x0,
// y0x1, y1x1) and truncate; int8 works in 1/1024 fixed point with round-half-away-from-zero. The
// quantized variants copy quantized values through unchanged, as TFLite does (same scale in and
// out).
#include "host/ops/resize_bilinear.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "host/kernel.h"
#include "host/registry.h"

namespace tinycoral::host::ops {
namespace {

float axis_scale(int32_t in, int32_t out, bool align_corners) {
  if (align_corners && out > 1) return static_cast<float>(in - 1) / static_cast<float>(out - 1);
  return static_cast<float>(in) / static_cast<float>(out);
}

// Source coordinate of output index `i` and its two neighbours (TFLite's interpolation values).
void source_position(int32_t i, float scale, bool half_pixel, int32_t in_size, float* pos,
                     int32_t* lo, int32_t* hi) {
  const float v = static_cast<float>(i);
  *pos = half_pixel ? (v + 0.5f) * scale - 0.5f : v * scale;
  *lo = std::max(static_cast<int32_t>(std::floor(*pos)), int32_t{0});
  *hi = std::min(static_cast<int32_t>(std::ceil(*pos)), in_size - 1);
}

template <typename T>
T store(float v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    // A plain C++ conversion in TFLite (truncation); clamp first so that an ulp outside the range
    // cannot be undefined behaviour. Inside the range the result is identical.
    v = std::min(std::max(v, 0.0f), 255.0f);
    return static_cast<T>(v);
  }
}

template <typename T>
void resize_float_formula(const ResizeGeometry& g, const T* in, T* out) {
  const float sy = axis_scale(g.in_h, g.out_h, g.align_corners);
  const float sx = axis_scale(g.in_w, g.out_w, g.align_corners);
  const size_t row = static_cast<size_t>(g.in_w) * g.depth;
  for (int32_t b = 0; b < g.batches; ++b) {
    const T* image = in + static_cast<size_t>(b) * g.in_h * row;
    for (int32_t y = 0; y < g.out_h; ++y) {
      float fy;
      int32_t y0, y1;
      source_position(y, sy, g.half_pixel_centers, g.in_h, &fy, &y0, &y1);
      const float dy = fy - static_cast<float>(y0);
      for (int32_t x = 0; x < g.out_w; ++x) {
        float fx;
        int32_t x0, x1;
        source_position(x, sx, g.half_pixel_centers, g.in_w, &fx, &x0, &x1);
        const float dx = fx - static_cast<float>(x0);
        const T* p00 = image + y0 * row + static_cast<size_t>(x0) * g.depth;
        const T* p10 = image + y1 * row + static_cast<size_t>(x0) * g.depth;
        const T* p01 = image + y0 * row + static_cast<size_t>(x1) * g.depth;
        const T* p11 = image + y1 * row + static_cast<size_t>(x1) * g.depth;
        for (int32_t c = 0; c < g.depth; ++c) {
          const float v = static_cast<float>(p00[c]) * (1 - dy) * (1 - dx) +
                          static_cast<float>(p10[c]) * dy * (1 - dx) +
                          static_cast<float>(p01[c]) * (1 - dy) * dx +
                          static_cast<float>(p11[c]) * dy * dx;
          *out++ = store<T>(v);
        }
      }
    }
  }
}

// int8: coordinates in units of 1/1024 pixel (TFLite's "scale_10").
int32_t axis_scale_10(int32_t in, int32_t out, bool align_corners) {
  if (align_corners && out > 1) return ((1 << 10) * (in - 1) + (out - 1) / 2) / (out - 1);
  return ((1 << 10) * in + out / 2) / out;
}

void source_position_10(int32_t i, int32_t scale_10, bool half_pixel, int32_t in_size, int32_t* pos,
                        int32_t* lo, int32_t* hi) {
  *pos = half_pixel ? i * scale_10 + scale_10 / 2 - (1 << 9) : i * scale_10;
  *lo = std::max(*pos / (1 << 10), 0);
  *hi = std::min((*pos + (1 << 10) - 1) / (1 << 10), in_size - 1);
}

}  // namespace

void resize_bilinear(const ResizeGeometry& g, const float* in, float* out) {
  resize_float_formula(g, in, out);
}

void resize_bilinear(const ResizeGeometry& g, const uint8_t* in, uint8_t* out) {
  resize_float_formula(g, in, out);
}

void resize_bilinear(const ResizeGeometry& g, const int8_t* in, int8_t* out) {
  const int32_t sy = axis_scale_10(g.in_h, g.out_h, g.align_corners);
  const int32_t sx = axis_scale_10(g.in_w, g.out_w, g.align_corners);
  const size_t row = static_cast<size_t>(g.in_w) * g.depth;
  constexpr int64_t kOne = 1 << 10;
  for (int32_t b = 0; b < g.batches; ++b) {
    const int8_t* image = in + static_cast<size_t>(b) * g.in_h * row;
    for (int32_t y = 0; y < g.out_h; ++y) {
      int32_t fy, y0, y1;
      source_position_10(y, sy, g.half_pixel_centers, g.in_h, &fy, &y0, &y1);
      const int64_t dy = fy - kOne * y0;
      for (int32_t x = 0; x < g.out_w; ++x) {
        int32_t fx, x0, x1;
        source_position_10(x, sx, g.half_pixel_centers, g.in_w, &fx, &x0, &x1);
        const int64_t dx = fx - kOne * x0;
        const int8_t* p00 = image + y0 * row + static_cast<size_t>(x0) * g.depth;
        const int8_t* p10 = image + y1 * row + static_cast<size_t>(x0) * g.depth;
        const int8_t* p01 = image + y0 * row + static_cast<size_t>(x1) * g.depth;
        const int8_t* p11 = image + y1 * row + static_cast<size_t>(x1) * g.depth;
        for (int32_t c = 0; c < g.depth; ++c) {
          const int64_t sum = p00[c] * (kOne - dy) * (kOne - dx) + p10[c] * dy * (kOne - dx) +
                              p01[c] * (kOne - dy) * dx + p11[c] * dy * dx;
          const int64_t half = sum > 0 ? (1 << 19) : -(1 << 19);
          const int64_t v = (sum + half) / (1 << 20);
          *out++ = static_cast<int8_t>(std::clamp<int64_t>(v, -128, 127));
        }
      }
    }
  }
}

void resize_nearest(const ResizeGeometry& g, const uint8_t* in, uint8_t* out, int element_bytes) {
  // TFLite reference: index = min(align_corners ? round(pos) : floor(pos), size - 1) with
  // pos = (i + 0.5 if half-pixel) * scale, in float32.
  auto index = [&](int32_t i, int32_t in_size, int32_t out_size) {
    const float scale = axis_scale(in_size, out_size, g.align_corners);
    const float offset = g.half_pixel_centers ? 0.5f : 0.0f;
    const float pos = (static_cast<float>(i) + offset) * scale;
    int32_t v = g.align_corners ? static_cast<int32_t>(std::round(pos))
                                : static_cast<int32_t>(std::floor(pos));
    v = std::min(v, in_size - 1);
    return std::max(v, int32_t{0});
  };
  const size_t pixel = static_cast<size_t>(g.depth) * element_bytes;
  const size_t row = pixel * g.in_w;
  for (int32_t b = 0; b < g.batches; ++b) {
    const uint8_t* image = in + static_cast<size_t>(b) * g.in_h * row;
    for (int32_t y = 0; y < g.out_h; ++y) {
      const int32_t sy = index(y, g.in_h, g.out_h);
      for (int32_t x = 0; x < g.out_w; ++x) {
        const int32_t sx = index(x, g.in_w, g.out_w);
        std::memcpy(out, image + sy * row + sx * pixel, pixel);
        out += pixel;
      }
    }
  }
}

}  // namespace tinycoral::host::ops

namespace tinycoral::host {
namespace {

using container::TensorType;

// Shared validation of both resize operators: NHWC in/out of the same type, size tensor consistent.
ops::ResizeGeometry resize_geometry(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& size = ctx.input(1);
  const TensorView& out = ctx.output(0);
  ctx.require(in.rank() == 4 && out.rank() == 4, "input and output must be 4-D (NHWC)");
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(in.dim(0) == out.dim(0) && in.dim(3) == out.dim(3),
              "batch and depth of input and output differ");
  ctx.require(size.type() == TensorType::kInt32 && size.elements() == 2,
              "size must be an int32 tensor of 2 elements");
  if (size.constant && size.data != nullptr) {
    const int32_t* s = size.as<int32_t>();
    ctx.require(s[0] == out.dim(1) && s[1] == out.dim(2),
                cat("size tensor (", s[0], "x", s[1], ") disagrees with the output shape"));
  }
  ops::ResizeGeometry g;
  g.batches = in.dim(0);
  g.in_h = in.dim(1);
  g.in_w = in.dim(2);
  g.depth = in.dim(3);
  g.out_h = out.dim(1);
  g.out_w = out.dim(2);
  ctx.require(g.in_h > 0 && g.in_w > 0 && g.out_h > 0 && g.out_w > 0 && g.depth > 0,
              "empty input or output");
  const auto options = ctx.options_or<container::ResizeOptions>();
  g.align_corners = options.align_corners;
  g.half_pixel_centers = options.half_pixel_centers;
  ctx.require(!(g.align_corners && g.half_pixel_centers),
              "align_corners and half_pixel_centers cannot both be set");
  return g;
}

std::unique_ptr<Kernel> make_resize_bilinear(const OpContext& ctx) {
  const ops::ResizeGeometry g = resize_geometry(ctx);
  switch (ctx.input(0).type()) {
    case TensorType::kFloat32:
      return make_kernel([g](OpContext& c) {
        ops::resize_bilinear(g, c.inputs[0].as<float>(), c.outputs[0].mutable_as<float>());
      });
    case TensorType::kUInt8:
      return make_kernel([g](OpContext& c) {
        ops::resize_bilinear(g, c.inputs[0].as<uint8_t>(), c.outputs[0].mutable_as<uint8_t>());
      });
    case TensorType::kInt8:
      return make_kernel([g](OpContext& c) {
        ops::resize_bilinear(g, c.inputs[0].as<int8_t>(), c.outputs[0].mutable_as<int8_t>());
      });
    default:
      fail(ctx.op_name, ": unsupported tensor type ",
           container::tensor_type_name(ctx.input(0).type()));
  }
}

std::unique_ptr<Kernel> make_resize_nearest(const OpContext& ctx) {
  const ops::ResizeGeometry g = resize_geometry(ctx);
  const TensorType t = ctx.input(0).type();
  ctx.require(t == TensorType::kFloat32 || t == TensorType::kUInt8 || t == TensorType::kInt8 ||
                  t == TensorType::kInt16 || t == TensorType::kInt32,
              cat("unsupported tensor type ", container::tensor_type_name(t)));
  const int bytes = static_cast<int>(container::tensor_type_size(t));
  return make_kernel([g, bytes](OpContext& c) {
    ops::resize_nearest(g, c.inputs[0].data, c.outputs[0].data, bytes);
  });
}

}  // namespace

void register_resize_bilinear(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kResizeBilinear, &make_resize_bilinear);
  registry.add_builtin(container::BuiltinOp::kResizeNearestNeighbor, &make_resize_nearest);
}

}  // namespace tinycoral::host
