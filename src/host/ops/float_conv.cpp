// float32 CONV_2D and DEPTHWISE_CONV_2D as TFLite's reference kernels: per output, the products
// summed in filter-row, filter-column, input-channel order, then the bias added, then the fused
// activation clamp. Quantized tensors are left to conv_2d.cpp / depthwise_conv_2d.cpp.
#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

struct FloatConvGeometry {
  Shape4 in, out;
  int fh = 1, fw = 1, sh = 1, sw = 1, dh = 1, dw = 1, pad_h = 0, pad_w = 0, multiplier = 1;
  FloatRange act;
};

std::unique_ptr<Kernel> make_float_conv(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const TensorView& out = ctx.output(0);
  const TensorView* bias = ctx.has_input(2) ? &ctx.inputs[2] : nullptr;
  if (!all_float({&in, &w, &out}) || (bias && !all_float({bias}))) return nullptr;
  const auto& o = ctx.options_as<container::Conv2DOptions>();
  FloatConvGeometry g;
  g.in = shape4(ctx, in);
  g.out = shape4(ctx, out);
  const Shape4 f = shape4(ctx, w);  // [out_c, fh, fw, in_c]
  ctx.require(f.c == g.in.c, "filter depth differs from the input depth");
  ctx.require(f.n == g.out.c, "filter count differs from the output depth");
  ctx.require(g.in.n == g.out.n, "batch sizes differ");
  ctx.require(!bias || bias->elements() == g.out.c, "bias size differs from the output depth");
  g.fh = f.h;
  g.fw = f.w;
  g.sh = o.stride_h;
  g.sw = o.stride_w;
  g.dh = o.dilation_h;
  g.dw = o.dilation_w;
  const PaddedDim ph = padded_dim(o.padding, g.in.h, g.fh, g.sh, g.dh);
  const PaddedDim pw = padded_dim(o.padding, g.in.w, g.fw, g.sw, g.dw);
  ctx.require(ph.out == g.out.h && pw.out == g.out.w, "output size disagrees with the padding");
  g.pad_h = ph.pad;
  g.pad_w = pw.pad;
  g.act = float_activation(ctx, o.activation);
  return make_kernel([g](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    const float* k = c.inputs[1].as<float>();
    const float* b = c.has_input(2) ? c.inputs[2].as<float>() : nullptr;
    float* y = c.outputs[0].mutable_as<float>();
    for (int n = 0; n < g.out.n; ++n)
      for (int oy = 0; oy < g.out.h; ++oy)
        for (int ox = 0; ox < g.out.w; ++ox)
          for (int oc = 0; oc < g.out.c; ++oc) {
            float total = 0.0f;
            for (int fy = 0; fy < g.fh; ++fy) {
              const int iy = oy * g.sh - g.pad_h + fy * g.dh;
              if (iy < 0 || iy >= g.in.h) continue;
              for (int fx = 0; fx < g.fw; ++fx) {
                const int ix = ox * g.sw - g.pad_w + fx * g.dw;
                if (ix < 0 || ix >= g.in.w) continue;
                const float* xp =
                    x + ((static_cast<size_t>(n) * g.in.h + iy) * g.in.w + ix) * g.in.c;
                const float* kp = k + ((static_cast<size_t>(oc) * g.fh + fy) * g.fw + fx) * g.in.c;
                for (int ic = 0; ic < g.in.c; ++ic) total += xp[ic] * kp[ic];
              }
            }
            const float v = total + (b ? b[oc] : 0.0f);
            y[((static_cast<size_t>(n) * g.out.h + oy) * g.out.w + ox) * g.out.c + oc] =
                g.act.apply(v);
          }
  });
}

std::unique_ptr<Kernel> make_float_depthwise(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const TensorView& out = ctx.output(0);
  const TensorView* bias = ctx.has_input(2) ? &ctx.inputs[2] : nullptr;
  if (!all_float({&in, &w, &out}) || (bias && !all_float({bias}))) return nullptr;
  const auto& o = ctx.options_as<container::DepthwiseConv2DOptions>();
  FloatConvGeometry g;
  g.in = shape4(ctx, in);
  g.out = shape4(ctx, out);
  const Shape4 f = shape4(ctx, w);  // [1, fh, fw, out_c]
  ctx.require(f.n == 1 && f.c == g.out.c, "filter must be [1, fh, fw, output depth]");
  ctx.require(o.depth_multiplier > 0 && g.in.c * o.depth_multiplier == g.out.c,
              "output depth is not input depth x depth multiplier");
  ctx.require(g.in.n == g.out.n, "batch sizes differ");
  ctx.require(!bias || bias->elements() == g.out.c, "bias size differs from the output depth");
  g.fh = f.h;
  g.fw = f.w;
  g.sh = o.stride_h;
  g.sw = o.stride_w;
  g.dh = o.dilation_h;
  g.dw = o.dilation_w;
  g.multiplier = o.depth_multiplier;
  const PaddedDim ph = padded_dim(o.padding, g.in.h, g.fh, g.sh, g.dh);
  const PaddedDim pw = padded_dim(o.padding, g.in.w, g.fw, g.sw, g.dw);
  ctx.require(ph.out == g.out.h && pw.out == g.out.w, "output size disagrees with the padding");
  g.pad_h = ph.pad;
  g.pad_w = pw.pad;
  g.act = float_activation(ctx, o.activation);
  return make_kernel([g](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    const float* k = c.inputs[1].as<float>();
    const float* b = c.has_input(2) ? c.inputs[2].as<float>() : nullptr;
    float* y = c.outputs[0].mutable_as<float>();
    for (int n = 0; n < g.out.n; ++n)
      for (int oy = 0; oy < g.out.h; ++oy)
        for (int ox = 0; ox < g.out.w; ++ox)
          for (int ic = 0; ic < g.in.c; ++ic)
            for (int m = 0; m < g.multiplier; ++m) {
              const int oc = ic * g.multiplier + m;
              float total = 0.0f;
              for (int fy = 0; fy < g.fh; ++fy) {
                const int iy = oy * g.sh - g.pad_h + fy * g.dh;
                if (iy < 0 || iy >= g.in.h) continue;
                for (int fx = 0; fx < g.fw; ++fx) {
                  const int ix = ox * g.sw - g.pad_w + fx * g.dw;
                  if (ix < 0 || ix >= g.in.w) continue;
                  total += x[((static_cast<size_t>(n) * g.in.h + iy) * g.in.w + ix) * g.in.c + ic] *
                           k[(static_cast<size_t>(fy) * g.fw + fx) * g.out.c + oc];
                }
              }
              const float v = total + (b ? b[oc] : 0.0f);
              y[((static_cast<size_t>(n) * g.out.h + oy) * g.out.w + ox) * g.out.c + oc] =
                  g.act.apply(v);
            }
  });
}

}  // namespace

void register_float_conv(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kConv2D, &make_float_conv);
  registry.add_builtin(container::BuiltinOp::kDepthwiseConv2D, &make_float_depthwise);
}

}  // namespace tinycoral::host
