// PAD: constant padding, any element type up to rank 6. Quantized tensors pad with the output zero
// point (the real value 0), others with zero bytes, as TFLite's PAD does.
#include <array>
#include <cstring>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

constexpr int kMaxPadRank = 6;

struct PadPlan {
  std::array<int64_t, kMaxPadRank> in_dims{}, before{}, out_dims{};
  size_t elem = 1;
  uint8_t fill = 0;
};

void run_pad(const PadPlan& p, OpContext& ctx) {
  const uint8_t* src = ctx.input(0).data;
  uint8_t* dst = ctx.outputs[0].data;
  std::memset(dst, p.fill, ctx.outputs[0].bytes);
  // Copy each innermost row of the input to its place in the output.
  std::array<int64_t, kMaxPadRank> out_stride{};
  int64_t s = 1;
  for (int d = kMaxPadRank - 1; d >= 0; --d) {
    out_stride[static_cast<size_t>(d)] = s;
    s *= p.out_dims[static_cast<size_t>(d)];
  }
  const size_t row = static_cast<size_t>(p.in_dims[kMaxPadRank - 1]) * p.elem;
  int64_t rows = 1;
  for (int d = 0; d < kMaxPadRank - 1; ++d) rows *= p.in_dims[static_cast<size_t>(d)];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t rem = r, off = p.before[kMaxPadRank - 1];
    for (int d = kMaxPadRank - 2; d >= 0; --d) {
      const int64_t dim = p.in_dims[static_cast<size_t>(d)];
      off += (rem % dim + p.before[static_cast<size_t>(d)]) * out_stride[static_cast<size_t>(d)];
      rem /= dim;
    }
    std::memcpy(dst + static_cast<size_t>(off) * p.elem, src + static_cast<size_t>(r) * row, row);
  }
}

std::unique_ptr<Kernel> make_pad(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& pads = ctx.input(1);
  const TensorView& out = ctx.output(0);
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(in.rank() <= kMaxPadRank, cat("rank above ", kMaxPadRank, " is not supported"));
  ctx.require(pads.constant, "paddings must be constant");
  ctx.require(
      pads.type() == container::TensorType::kInt32 || pads.type() == container::TensorType::kInt64,
      "paddings must be int32 or int64");
  ctx.require(pads.elements() == 2 * int64_t{in.rank()}, "paddings must have shape [rank, 2]");
  ctx.require(out.rank() == in.rank(), "output rank differs from the input");
  if (in.quantized() && out.quantized())
    ctx.require(in.scale() == out.scale() && in.zero_point() == out.zero_point(),
                "input and output quantization differ");
  PadPlan p;
  p.elem = container::tensor_type_size(in.type());
  const int shift = kMaxPadRank - in.rank();
  for (int d = 0; d < kMaxPadRank; ++d) {
    p.in_dims[static_cast<size_t>(d)] = 1;
    p.out_dims[static_cast<size_t>(d)] = 1;
  }
  for (int d = 0; d < in.rank(); ++d) {
    const auto i = static_cast<size_t>(2 * d);
    const int64_t b = pads.type() == container::TensorType::kInt32 ? pads.as<int32_t>()[i]
                                                                   : pads.as<int64_t>()[i];
    const int64_t a = pads.type() == container::TensorType::kInt32 ? pads.as<int32_t>()[i + 1]
                                                                   : pads.as<int64_t>()[i + 1];
    ctx.require(b >= 0 && a >= 0, "negative paddings are not supported");
    ctx.require(in.dim(d) + b + a == out.dim(d), cat("dimension ", d, ": ", in.dim(d), " + ", b,
                                                     " + ", a, " != output ", out.dim(d)));
    const auto k = static_cast<size_t>(d + shift);
    p.in_dims[k] = in.dim(d);
    p.out_dims[k] = out.dim(d);
    p.before[k] = b;
  }
  if (is_q8(out.type()) && out.quantized()) p.fill = static_cast<uint8_t>(out.zero_point());
  return make_kernel([p](OpContext& c) {
    if (c.input(0).bytes == 0) {
      std::memset(c.outputs[0].data, p.fill, c.outputs[0].bytes);
      return;
    }
    run_pad(p, c);
  });
}

}  // namespace

void register_pad(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kPad, make_pad);
}

}  // namespace tinycoral::host
