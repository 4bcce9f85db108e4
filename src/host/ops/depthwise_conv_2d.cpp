// DEPTHWISE_CONV_2D, quantized uint8/int8 with any depth multiplier (output channel
// oc = ic * multiplier + m), per-tensor or per-channel weights. Exact int32 accumulation of
// (x - zx)(w - zw) over the in-bounds taps plus bias (TFLite skips out-of-bounds taps), then the
// output stage of the rounding mode. The channel loop is qgemm.h's depthwise_tap (SIMD levels with
// identical results).
#include <algorithm>
#include <cstring>

#include "host/mac_weights.h"
#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

struct DwPlan {
  Shape4 in, out;
  int fh = 0, fw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_h = 0, pad_w = 0, mult = 1;
  std::vector<int32_t> w;     // [fh][fw][out_c]: w - zw
  std::vector<int32_t> bias;  // [out_c]
  std::vector<ChannelScale> scale;
  OutputStage stage;
  TfliteRequantTable table;  // tflite mode
  int32_t zx = 0;
};

template <typename T>
void run_dw(const DwPlan& p, OpContext& ctx) {
  const T* in = ctx.input(0).as<T>();
  T* out = ctx.outputs[0].mutable_as<T>();
  auto* acc = reinterpret_cast<int32_t*>(ctx.scratch.data());
  const int oc_n = p.out.c;
  const size_t soc = static_cast<size_t>(oc_n);
  const SimdLevel level = active_simd_level();
  for (int b = 0; b < p.out.n; ++b)
    for (int oy = 0; oy < p.out.h; ++oy)
      for (int ox = 0; ox < p.out.w; ++ox) {
        std::memcpy(acc, p.bias.data(), soc * sizeof(int32_t));
        for (int fy = 0; fy < p.fh; ++fy) {
          const int iy = oy * p.sh - p.pad_h + fy * p.dh;
          if (iy < 0 || iy >= p.in.h) continue;
          for (int fx = 0; fx < p.fw; ++fx) {
            const int ix = ox * p.sw - p.pad_w + fx * p.dw;
            if (ix < 0 || ix >= p.in.w) continue;
            const T* x = in + ((static_cast<size_t>(b) * p.in.h + iy) * p.in.w + ix) *
                                  static_cast<size_t>(p.in.c);
            const int32_t* w = p.w.data() + (static_cast<size_t>(fy) * p.fw + fx) * soc;
            if (p.mult == 1) {
              depthwise_tap(acc, x, w, p.zx, oc_n, level);
            } else {
              for (int ic = 0; ic < p.in.c; ++ic) {
                const int32_t xv = int32_t{x[ic]} - p.zx;
                for (int m = 0; m < p.mult; ++m) {
                  const int oc = ic * p.mult + m;
                  acc[oc] += xv * w[oc];
                }
              }
            }
          }
        }
        T* o = out + ((static_cast<size_t>(b) * p.out.h + oy) * p.out.w + ox) * soc;
        if (p.stage.mode == Rounding::kTflite) {
          tflite_requantize_row(acc, nullptr, 0, nullptr, p.table, oc_n,
                                reinterpret_cast<uint8_t*>(o), level);
        } else {
          for (int c = 0; c < oc_n; ++c)
            o[c] = static_cast<T>(p.stage.apply(acc[c], p.scale[static_cast<size_t>(c)]));
        }
      }
}

std::unique_ptr<Kernel> make_depthwise_conv_2d(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& input = ctx.input(0);
  const TensorView& filter = ctx.input(1);
  const TensorView& output = ctx.output(0);
  if (!is_q8(input.type())) return nullptr;
  require_same_q8(ctx, {&input, &output});
  ctx.require(filter.type() == input.type(), "filter type differs from the input type");
  ctx.require(filter.constant, "filter must be constant");
  const auto& o = ctx.options_as<container::DepthwiseConv2DOptions>();
  DwPlan p;
  p.in = shape4(ctx, input);
  p.out = shape4(ctx, output);
  const Shape4 f = shape4(ctx, filter);
  ctx.require(f.n == 1, "filter must have shape [1, H, W, C]");
  ctx.require(f.c == p.out.c, cat("filter channels ", f.c, " != output channels ", p.out.c));
  ctx.require(p.in.c > 0 && p.out.c % p.in.c == 0,
              cat("output channels ", p.out.c, " not a multiple of input channels ", p.in.c));
  p.mult = p.out.c / p.in.c;
  ctx.require(o.depth_multiplier <= 0 || o.depth_multiplier == p.mult,
              cat("depth_multiplier ", o.depth_multiplier, " does not match the shapes"));
  ctx.require(p.out.n == p.in.n, "batch of output differs from input");
  p.fh = f.h;
  p.fw = f.w;
  p.sh = o.stride_h;
  p.sw = o.stride_w;
  p.dh = o.dilation_h;
  p.dw = o.dilation_w;
  ctx.require(p.sh > 0 && p.sw > 0 && p.dh > 0 && p.dw > 0, "strides and dilations must be > 0");
  const PaddedDim ph = padded_dim(o.padding, p.in.h, p.fh, p.sh, p.dh);
  const PaddedDim pw = padded_dim(o.padding, p.in.w, p.fw, p.sw, p.dw);
  ctx.require(
      ph.out == p.out.h && pw.out == p.out.w,
      cat("output is ", p.out.h, "x", p.out.w, " but the options give ", ph.out, "x", pw.out));
  p.pad_h = ph.pad;
  p.pad_w = pw.pad;
  p.scale = mac_channel_scales(ctx, input, filter, output, p.out.c);
  const auto& zps = filter.quant().zero_point;
  ctx.require(zps.size() <= 1 || zps.size() == static_cast<size_t>(p.out.c),
              "filter zero points do not match the channels");
  const size_t taps = static_cast<size_t>(p.fh) * static_cast<size_t>(p.fw);
  const size_t oc = static_cast<size_t>(p.out.c);
  p.w.resize(taps * oc);
  const bool u8 = input.type() == container::TensorType::kUInt8;
  for (size_t t = 0; t < taps; ++t)
    for (size_t c = 0; c < oc; ++c) {
      const int64_t zw = zps.empty() ? 0 : (zps.size() == 1 ? zps[0] : zps[c]);
      const size_t i = t * oc + c;
      const int32_t w = u8 ? int32_t{filter.data[i]} : int32_t{filter.as<int8_t>()[i]};
      p.w[i] = w - static_cast<int32_t>(zw);
    }
  p.bias.assign(oc, 0);
  if (ctx.has_input(2)) {
    const TensorView& bias = ctx.input(2);
    ctx.require(
        bias.constant && bias.type() == container::TensorType::kInt32 && bias.elements() == p.out.c,
        "bias must be a constant int32 vector with one value per output channel");
    std::memcpy(p.bias.data(), bias.data, oc * sizeof(int32_t));
  }
  p.stage = make_output_stage(ctx.rounding, output, o.activation);
  p.table = make_tflite_table(p.scale, p.stage);
  p.zx = input.zero_point();
  const size_t scratch = oc * sizeof(int32_t);
  if (u8) return make_kernel([p](OpContext& c) { run_dw<uint8_t>(p, c); }, scratch);
  return make_kernel([p](OpContext& c) { run_dw<int8_t>(p, c); }, scratch);
}

}  // namespace

void register_depthwise_conv_2d(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kDepthwiseConv2D, make_depthwise_conv_2d);
}

}  // namespace tinycoral::host
