// float32 AVERAGE_POOL_2D and MAX_POOL_2D as TFLite's reference kernels: the window clipped to the
// input (padding excluded from the average's count), then the fused activation clamp.
#include <algorithm>
#include <limits>

#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

template <bool kMax>
std::unique_ptr<Kernel> make_float_pool(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!all_float({&in, &out})) return nullptr;
  const auto& o = ctx.options_as<container::Pool2DOptions>();
  const Shape4 si = shape4(ctx, in), so = shape4(ctx, out);
  ctx.require(si.n == so.n && si.c == so.c, "batch or depth differ");
  const PaddedDim ph = padded_dim(o.padding, si.h, o.filter_h, o.stride_h, 1);
  const PaddedDim pw = padded_dim(o.padding, si.w, o.filter_w, o.stride_w, 1);
  ctx.require(ph.out == so.h && pw.out == so.w, "output size disagrees with the padding");
  const FloatRange act = float_activation(ctx, o.activation);
  const int fh = o.filter_h, fw = o.filter_w, sh = o.stride_h, sw = o.stride_w;
  return make_kernel([=](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    float* y = c.outputs[0].mutable_as<float>();
    for (int n = 0; n < so.n; ++n)
      for (int oy = 0; oy < so.h; ++oy)
        for (int ox = 0; ox < so.w; ++ox) {
          const int y0 = oy * sh - ph.pad, x0 = ox * sw - pw.pad;
          const int fy0 = std::max(0, -y0), fy1 = std::min(fh, si.h - y0);
          const int fx0 = std::max(0, -x0), fx1 = std::min(fw, si.w - x0);
          for (int ch = 0; ch < so.c; ++ch) {
            float acc = kMax ? std::numeric_limits<float>::lowest() : 0.0f;
            int count = 0;
            for (int fy = fy0; fy < fy1; ++fy)
              for (int fx = fx0; fx < fx1; ++fx) {
                const float v =
                    x[((static_cast<size_t>(n) * si.h + y0 + fy) * si.w + x0 + fx) * si.c + ch];
                acc = kMax ? std::max(acc, v) : acc + v;
                ++count;
              }
            if (!kMax) acc = count > 0 ? acc / static_cast<float>(count) : 0.0f;
            y[((static_cast<size_t>(n) * so.h + oy) * so.w + ox) * so.c + ch] = act.apply(acc);
          }
        }
  });
}

}  // namespace

void register_float_pool(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kAveragePool2D, &make_float_pool<false>);
  registry.add_builtin(container::BuiltinOp::kMaxPool2D, &make_float_pool<true>);
}

}  // namespace tinycoral::host
