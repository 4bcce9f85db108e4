// CONV_2D, quantized uint8/int8 (per-tensor or per-channel weights, int32 bias): im2col rows of the
// input (padding = the input zero point, i.e. TFLite's "skip out-of-bounds taps") times the packed
// weights through the exact integer GEMM, then the output stage of the rounding mode.
#include <algorithm>
#include <cstring>

#include "host/mac_weights.h"
#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

constexpr int kConvRowsPerTile = 32;

struct ConvGeometry {
  Shape4 in, out;
  int fh = 0, fw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_h = 0, pad_w = 0;
};

struct ConvPlan {
  ConvGeometry g;
  PackedWeights pw;
  OutputStage stage;
  int32_t ax = 0;      // zx - ox: the X value of the zero point (padding)
  uint8_t x_flip = 0;  // 0x80 for int8 (X = x + 128), 0 for uint8
};

template <typename T>
void run_conv(const ConvPlan& p, OpContext& ctx) {
  const ConvGeometry& g = p.g;
  const auto* in = ctx.input(0).as<uint8_t>();
  T* out = ctx.outputs[0].mutable_as<T>();
  const size_t kp = static_cast<size_t>(p.pw.kp);
  uint8_t* rows = ctx.scratch.data();
  auto* dots = reinterpret_cast<int32_t*>(rows + kConvRowsPerTile * kp);
  const auto ldc = static_cast<size_t>(p.pw.ldc());
  int32_t* x_sum = dots + static_cast<size_t>(kConvRowsPerTile) * ldc;
  const int pixels = g.out.n * g.out.h * g.out.w;
  const size_t chunk = static_cast<size_t>(g.in.c);
  const SimdLevel level = active_simd_level();
  for (int base = 0; base < pixels; base += kConvRowsPerTile) {
    const int m = std::min(kConvRowsPerTile, pixels - base);
    for (int r = 0; r < m; ++r) {
      const int pix = base + r;
      const int b = pix / (g.out.h * g.out.w);
      const int oy = (pix / g.out.w) % g.out.h;
      const int ox = pix % g.out.w;
      uint8_t* row = rows + static_cast<size_t>(r) * kp;
      uint8_t* dst = row;
      int32_t sum = 0;
      for (int fy = 0; fy < g.fh; ++fy) {
        const int iy = oy * g.sh - g.pad_h + fy * g.dh;
        for (int fx = 0; fx < g.fw; ++fx, dst += chunk) {
          const int ix = ox * g.sw - g.pad_w + fx * g.dw;
          if (iy < 0 || iy >= g.in.h || ix < 0 || ix >= g.in.w) {
            std::memset(dst, p.ax, chunk);
            sum += p.ax * g.in.c;
            continue;
          }
          const uint8_t* src = in + ((static_cast<size_t>(b) * g.in.h + iy) * g.in.w + ix) * chunk;
          sum += copy_flip_sum(dst, src, chunk, p.x_flip, level);
        }
      }
      std::memset(dst, 0, kp - static_cast<size_t>(dst - row));
      x_sum[r] = sum;
    }
    mac_dots(p.pw, rows, kp, m, dots, level);
    finish_mac_rows<T>(p.pw, p.stage, dots, ldc, x_sum, m,
                       out + static_cast<size_t>(base) * static_cast<size_t>(p.pw.n),
                       static_cast<size_t>(p.pw.n));
  }
}

std::unique_ptr<Kernel> make_conv_2d(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& input = ctx.input(0);
  const TensorView& filter = ctx.input(1);
  const TensorView& output = ctx.output(0);
  if (!is_q8(input.type())) return nullptr;  // float kernels live elsewhere
  require_same_q8(ctx, {&input, &output});
  const auto& o = ctx.options_as<container::Conv2DOptions>();
  ConvPlan p;
  ConvGeometry& g = p.g;
  g.in = shape4(ctx, input);
  g.out = shape4(ctx, output);
  const Shape4 f = shape4(ctx, filter);
  ctx.require(f.c == g.in.c, cat("filter depth ", f.c, " != input depth ", g.in.c));
  ctx.require(f.n == g.out.c, cat("filter count ", f.n, " != output depth ", g.out.c));
  ctx.require(g.out.n == g.in.n, "batch of output differs from input");
  g.fh = f.h;
  g.fw = f.w;
  g.sh = o.stride_h;
  g.sw = o.stride_w;
  g.dh = o.dilation_h;
  g.dw = o.dilation_w;
  ctx.require(g.sh > 0 && g.sw > 0 && g.dh > 0 && g.dw > 0, "strides and dilations must be > 0");
  const PaddedDim ph = padded_dim(o.padding, g.in.h, g.fh, g.sh, g.dh);
  const PaddedDim pw = padded_dim(o.padding, g.in.w, g.fw, g.sw, g.dw);
  ctx.require(
      ph.out == g.out.h && pw.out == g.out.w,
      cat("output is ", g.out.h, "x", g.out.w, " but the options give ", ph.out, "x", pw.out));
  g.pad_h = ph.pad;
  g.pad_w = pw.pad;
  const TensorView* bias = ctx.has_input(2) ? &ctx.inputs[2] : nullptr;
  p.pw = pack_mac_weights(ctx, input, filter, bias, output, f.n, f.h * f.w * f.c);
  p.stage = make_output_stage(ctx.rounding, output, o.activation);
  const int32_t ox = activation_offset(input.type());
  p.ax = input.zero_point() - ox;
  ctx.require(p.ax >= 0 && p.ax <= 255, "input zero point outside its type's range");
  set_mac_offsets(p.pw, p.ax, p.stage);
  p.x_flip = input.type() == container::TensorType::kInt8 ? 0x80 : 0;
  const size_t scratch = kConvRowsPerTile * static_cast<size_t>(p.pw.kp) +
                         sizeof(int32_t) * kConvRowsPerTile * (static_cast<size_t>(p.pw.ldc()) + 1);
  if (input.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { run_conv<uint8_t>(p, c); }, scratch);
  return make_kernel([p](OpContext& c) { run_conv<int8_t>(p, c); }, scratch);
}

}  // namespace

void register_conv_2d(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kConv2D, make_conv_2d);
}

}  // namespace tinycoral::host
