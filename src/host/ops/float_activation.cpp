// float32 SOFTMAX (beta, over the last dimension: exp((x - max) * beta) / sum), LOGISTIC
// (1 / (1 + exp(-x))) and TANH, as TFLite's reference kernels.
#include <algorithm>
#include <cmath>

#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

std::unique_ptr<Kernel> make_float_softmax(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!all_float({&in, &out})) return nullptr;
  ctx.require(in.rank() >= 1 && in.shape() == out.shape(), "input and output shapes differ");
  const int depth = in.dim(-1);
  ctx.require(depth > 0, "empty last dimension");
  const int64_t rows = in.elements() / depth;
  const float beta = ctx.options_or<container::SoftmaxOptions>().beta;
  return make_kernel([=](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    float* y = c.outputs[0].mutable_as<float>();
    for (int64_t r = 0; r < rows; ++r) {
      const float* xr = x + r * depth;
      float* yr = y + r * depth;
      const float max = *std::max_element(xr, xr + depth);
      float sum = 0.0f;
      for (int i = 0; i < depth; ++i) sum += std::exp((xr[i] - max) * beta);
      for (int i = 0; i < depth; ++i) yr[i] = std::exp((xr[i] - max) * beta) / sum;
    }
  });
}

template <typename F>
std::unique_ptr<Kernel> make_float_unary(const OpContext& ctx, F f) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!all_float({&in, &out})) return nullptr;
  ctx.require(in.elements() == out.elements(), "input and output sizes differ");
  return make_kernel([=](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    float* y = c.outputs[0].mutable_as<float>();
    const int64_t n = c.inputs[0].elements();
    for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
  });
}

}  // namespace

void register_float_activation(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kSoftmax, &make_float_softmax);
  registry.add_builtin(container::BuiltinOp::kLogistic, [](const OpContext& ctx) {
    return make_float_unary(ctx, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  });
  registry.add_builtin(container::BuiltinOp::kTanh, [](const OpContext& ctx) {
    return make_float_unary(ctx, [](float v) { return std::tanh(v); });
  });
  registry.add_builtin(container::BuiltinOp::kRelu, [](const OpContext& ctx) {
    return make_float_unary(ctx, [](float v) { return std::max(v, 0.0f); });
  });
  registry.add_builtin(container::BuiltinOp::kRelu6, [](const OpContext& ctx) {
    return make_float_unary(ctx, [](float v) { return std::min(std::max(v, 0.0f), 6.0f); });
  });
}

}  // namespace tinycoral::host
