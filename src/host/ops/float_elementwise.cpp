// float32 ADD, SUB and MUL with NumPy-style broadcasting (TFLite's up-to-6-D broadcast), then the
// fused activation clamp.
#include <array>

#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

constexpr int kMaxFloatBroadcastRank = 6;

struct FloatBroadcast {
  std::array<int64_t, kMaxFloatBroadcastRank> out_dims{}, a_strides{}, b_strides{};
};

// Right-aligns both shapes to the output's; a dimension of 1 gets stride 0.
FloatBroadcast make_float_broadcast(const OpContext& ctx, const TensorView& a, const TensorView& b,
                                    const TensorView& out) {
  ctx.require(
      out.rank() <= kMaxFloatBroadcastRank && a.rank() <= out.rank() && b.rank() <= out.rank(),
      "ranks above 6 or above the output's are not supported");
  FloatBroadcast br;
  auto strides = [&](const TensorView& t, std::array<int64_t, kMaxFloatBroadcastRank>& s) {
    int64_t stride = 1;
    for (int d = kMaxFloatBroadcastRank - 1; d >= 0; --d) {
      const int k = d - (kMaxFloatBroadcastRank - t.rank());
      const int64_t dim = k >= 0 ? t.dim(k) : 1;
      const int64_t od = br.out_dims[static_cast<size_t>(d)];
      ctx.require(dim == od || dim == 1,
                  cat("tensor '", t.name(), "' does not broadcast to the output shape"));
      s[static_cast<size_t>(d)] = dim == 1 ? 0 : stride;
      stride *= dim;
    }
  };
  for (int d = 0; d < kMaxFloatBroadcastRank; ++d) {
    const int k = d - (kMaxFloatBroadcastRank - out.rank());
    br.out_dims[static_cast<size_t>(d)] = k >= 0 ? out.dim(k) : 1;
  }
  strides(a, br.a_strides);
  strides(b, br.b_strides);
  return br;
}

template <typename F>
std::unique_ptr<Kernel> make_float_binary(const OpContext& ctx, F f) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& a = ctx.input(0);
  const TensorView& b = ctx.input(1);
  const TensorView& out = ctx.output(0);
  if (!all_float({&a, &b, &out})) return nullptr;
  const FloatBroadcast br = make_float_broadcast(ctx, a, b, out);
  const FloatRange act =
      float_activation(ctx, ctx.options_or<container::ActivationOptions>().activation);
  return make_kernel([=](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    const float* y = c.inputs[1].as<float>();
    float* z = c.outputs[0].mutable_as<float>();
    std::array<int64_t, kMaxFloatBroadcastRank> idx{};
    const int64_t total = c.outputs[0].elements();
    for (int64_t i = 0; i < total; ++i) {
      int64_t ia = 0, ib = 0;
      for (int d = 0; d < kMaxFloatBroadcastRank; ++d) {
        ia += idx[static_cast<size_t>(d)] * br.a_strides[static_cast<size_t>(d)];
        ib += idx[static_cast<size_t>(d)] * br.b_strides[static_cast<size_t>(d)];
      }
      z[i] = act.apply(f(x[ia], y[ib]));
      for (int d = kMaxFloatBroadcastRank - 1; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < br.out_dims[static_cast<size_t>(d)]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
  });
}

}  // namespace

void register_float_elementwise(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kAdd, [](const OpContext& ctx) {
    return make_float_binary(ctx, [](float a, float b) { return a + b; });
  });
  registry.add_builtin(container::BuiltinOp::kSub, [](const OpContext& ctx) {
    return make_float_binary(ctx, [](float a, float b) { return a - b; });
  });
  registry.add_builtin(container::BuiltinOp::kMul, [](const OpContext& ctx) {
    return make_float_binary(ctx, [](float a, float b) { return a * b; });
  });
}

}  // namespace tinycoral::host
