// MEAN as TFLite's reference kernels. float32: over any set of axes, sums accumulated in float in
// input order, divided by the element count. Quantized uint8/int8: the spatial mean of a 4-D NHWC
// tensor (axes 1 and 2, the global-average-pool form converters emit): integer sum, one
// requantization by in_scale / (count * out_scale), plus the zero-point bias TFLite rounds in
// float32. Other quantized reductions are refused at load time.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <set>

#include "host/op_util.h"
#include "host/registry.h"
#include "host/rounding.h"

namespace tinycoral::host {
namespace {

std::vector<int> read_axes(const OpContext& ctx, const TensorView& axes, int rank) {
  ctx.require(axes.constant && axes.data != nullptr, "axes must be constant");
  ctx.require(axes.type() == container::TensorType::kInt32, "axes must be int32");
  std::set<int> unique;
  for (int64_t i = 0; i < axes.elements(); ++i) {
    int a = axes.as<int32_t>()[i];
    if (a < 0) a += rank;
    ctx.require(a >= 0 && a < rank, cat("axis ", axes.as<int32_t>()[i], " out of range"));
    unique.insert(a);
  }
  return {unique.begin(), unique.end()};
}

std::unique_ptr<Kernel> make_mean(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(in.rank() >= 1 && in.rank() <= 8, "unsupported rank");
  const std::vector<int> axes = read_axes(ctx, ctx.input(1), in.rank());
  int64_t count = 1, out_count = 1;
  std::vector<bool> reduced(static_cast<size_t>(in.rank()), false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  for (int d = 0; d < in.rank(); ++d)
    (reduced[static_cast<size_t>(d)] ? count : out_count) *= in.dim(d);
  ctx.require(out.elements() == out_count, "output size does not match the reduced input");
  ctx.require(count > 0, "empty reduction");

  if (in.type() == container::TensorType::kFloat32) {
    // Output index of every input element: the input's row-major walk with reduced axes dropped.
    std::vector<int32_t> dims(in.shape());
    return make_kernel([=](OpContext& c) {
      const float* x = c.inputs[0].as<float>();
      float* y = c.outputs[0].mutable_as<float>();
      std::fill(y, y + out_count, 0.0f);
      std::array<int32_t, 8> idx{};  // rank <= 8, checked at load time
      const int64_t total = c.inputs[0].elements();
      for (int64_t i = 0; i < total; ++i) {
        int64_t o = 0;
        for (size_t d = 0; d < dims.size(); ++d)
          if (!reduced[d]) o = o * dims[d] + idx[d];
        y[o] += x[i];
        for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
          if (++idx[static_cast<size_t>(d)] < dims[static_cast<size_t>(d)]) break;
          idx[static_cast<size_t>(d)] = 0;
        }
      }
      for (int64_t o = 0; o < out_count; ++o) y[o] /= static_cast<float>(count);
    });
  }

  ctx.require(is_q8(in.type()), "unsupported tensor type");
  ctx.require(in.rank() == 4 && axes == std::vector<int>{1, 2},
              "quantized MEAN is supported over the height and width of a 4-D tensor only");
  const Shape4 s = shape4(ctx, in);
  const float in_scale = in.scale(), out_scale = out.scale();
  const int32_t in_zp = in.zero_point(), out_zp = out.zero_point();
  float temp = static_cast<float>(in_zp) * in_scale / out_scale;
  temp = temp > 0 ? temp + 0.5f : temp - 0.5f;
  const int32_t bias = out_zp - static_cast<int32_t>(temp);
  const float n = static_cast<float>(s.h * s.w);
  const QuantizedMultiplier m =
      quantize_multiplier(static_cast<double>(in_scale / (n * out_scale)));
  const bool u8 = in.type() == container::TensorType::kUInt8;
  const QRange range = storage_range(in.type());
  return make_kernel([=](OpContext& c) {
    for (int b = 0; b < s.n; ++b)
      for (int ch = 0; ch < s.c; ++ch) {
        int32_t acc = 0;
        for (int p = 0; p < s.h * s.w; ++p) {
          const size_t i = (static_cast<size_t>(b) * s.h * s.w + p) * s.c + ch;
          acc += u8 ? int32_t{c.inputs[0].as<uint8_t>()[i]} : int32_t{c.inputs[0].as<int8_t>()[i]};
        }
        const int32_t v =
            std::clamp(multiply_by_quantized_multiplier(acc, m) + bias, range.min, range.max);
        c.outputs[0].data[static_cast<size_t>(b) * s.c + ch] = static_cast<uint8_t>(v);
      }
  });
}

}  // namespace

void register_mean(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kMean, &make_mean);
}

}  // namespace tinycoral::host
