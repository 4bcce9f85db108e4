// AVERAGE_POOL_2D and MAX_POOL_2D, quantized uint8/int8. tflite mode follows TFLite's reference:
// the average is the rounded integer mean of the in-bounds taps (uint8: (sum + n/2) / n; int8: half
// away from zero), the maximum is exact; both are clamped to the fused activation. edgetpu mode
// requantizes sum(x - zx) by f32(f32(s_in * inv(s_out)) / n) (the chip's SUM/MEAN class, isa.md
// 2.1.4, applied by analogy to pools) with float clamps and ties to even; the max pool is the same
// in both modes (its chip multiplier 1.0 or 0.99999994 cannot move an integer by half a step).
#include <algorithm>
#include <limits>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

struct PoolPlan {
  Shape4 in, out;
  int fh = 1, fw = 1, sh = 1, sw = 1, pad_h = 0, pad_w = 0;
  bool average = true;
  Rounding mode = Rounding::kTflite;
  QRange act;
  OutputStage stage;
  float in_ratio = 1.0f;  // f32(s_in * inv(s_out))
  int32_t zx = 0;
};

template <typename T>
void run_pool(const PoolPlan& p, OpContext& ctx) {
  const T* in = ctx.input(0).as<T>();
  T* out = ctx.outputs[0].mutable_as<T>();
  const size_t ch = static_cast<size_t>(p.in.c);
  for (int b = 0; b < p.out.n; ++b)
    for (int oy = 0; oy < p.out.h; ++oy)
      for (int ox = 0; ox < p.out.w; ++ox) {
        const int y0 = oy * p.sh - p.pad_h, x0 = ox * p.sw - p.pad_w;
        const int fy0 = std::max(0, -y0), fy1 = std::min(p.fh, p.in.h - y0);
        const int fx0 = std::max(0, -x0), fx1 = std::min(p.fw, p.in.w - x0);
        T* o = out + ((static_cast<size_t>(b) * p.out.h + oy) * p.out.w + ox) * ch;
        const int count = std::max(0, fy1 - fy0) * std::max(0, fx1 - fx0);
        for (size_t c = 0; c < ch; ++c) {
          int32_t acc = p.average ? 0 : std::numeric_limits<T>::min();
          for (int fy = fy0; fy < fy1; ++fy)
            for (int fx = fx0; fx < fx1; ++fx) {
              const int32_t v =
                  in[((static_cast<size_t>(b) * p.in.h + (y0 + fy)) * p.in.w + (x0 + fx)) * ch + c];
              acc = p.average ? acc + v : std::max(acc, v);
            }
          int32_t r;
          if (!p.average) {
            r = std::clamp(acc, p.act.min, p.act.max);
          } else if (count == 0) {
            r = p.stage.zero_point;  // no tap in bounds (only with absurd padding)
          } else if (p.mode == Rounding::kTflite) {
            if (acc >= 0)
              r = (acc + count / 2) / count;
            else
              r = (acc - count / 2) / count;
            r = std::clamp(r, p.act.min, p.act.max);
          } else {
            const int32_t centred = acc - count * p.zx;
            const float mult = p.in_ratio / static_cast<float>(count);
            r = std::clamp(edgetpu::requantize(centred, mult, p.stage.clamps, p.stage.zero_point),
                           p.stage.storage.min, p.stage.storage.max);
          }
          o[c] = static_cast<T>(r);
        }
      }
}

std::unique_ptr<Kernel> make_pool(const OpContext& ctx, bool average) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& input = ctx.input(0);
  const TensorView& output = ctx.output(0);
  if (!is_q8(input.type())) return nullptr;
  require_same_q8(ctx, {&input, &output});
  const auto& o = ctx.options_as<container::Pool2DOptions>();
  PoolPlan p;
  p.average = average;
  p.mode = ctx.rounding;
  p.in = shape4(ctx, input);
  p.out = shape4(ctx, output);
  ctx.require(p.in.n == p.out.n && p.in.c == p.out.c, "output batch/depth differ from the input");
  p.fh = o.filter_h;
  p.fw = o.filter_w;
  p.sh = o.stride_h;
  p.sw = o.stride_w;
  ctx.require(p.fh > 0 && p.fw > 0 && p.sh > 0 && p.sw > 0, "filter and stride must be > 0");
  const PaddedDim ph = padded_dim(o.padding, p.in.h, p.fh, p.sh, 1);
  const PaddedDim pw = padded_dim(o.padding, p.in.w, p.fw, p.sw, 1);
  ctx.require(
      ph.out == p.out.h && pw.out == p.out.w,
      cat("output is ", p.out.h, "x", p.out.w, " but the options give ", ph.out, "x", pw.out));
  p.pad_h = ph.pad;
  p.pad_w = pw.pad;
  if (p.mode == Rounding::kTflite || !average)
    ctx.require(input.scale() == output.scale() && input.zero_point() == output.zero_point(),
                "input and output quantization must be equal (TFLite pools do not rescale)");
  p.act = activation_range(o.activation, output.scale(), output.zero_point(), output.type());
  p.stage = make_output_stage(ctx.rounding, output, o.activation);
  p.in_ratio = edgetpu::ratio_scale(input.scale(), output.scale());
  p.zx = input.zero_point();
  if (input.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { run_pool<uint8_t>(p, c); });
  return make_kernel([p](OpContext& c) { run_pool<int8_t>(p, c); });
}

}  // namespace

void register_pool_2d(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kAveragePool2D,
                       [](const OpContext& ctx) { return make_pool(ctx, true); });
  registry.add_builtin(container::BuiltinOp::kMaxPool2D,
                       [](const OpContext& ctx) { return make_pool(ctx, false); });
}

}  // namespace tinycoral::host
