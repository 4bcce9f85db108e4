// float32 FULLY_CONNECTED as TFLite's reference kernel: each output is the dot product over the
// input's last dimension (summed in order) plus the bias, then the fused activation clamp.
#include "host/op_util.h"
#include "host/ops/float_util.h"
#include "host/registry.h"

namespace tinycoral::host {
namespace {

std::unique_ptr<Kernel> make_float_fc(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& w = ctx.input(1);
  const TensorView& out = ctx.output(0);
  const TensorView* bias = ctx.has_input(2) ? &ctx.inputs[2] : nullptr;
  if (!all_float({&in, &w, &out}) || (bias && !all_float({bias}))) return nullptr;
  const auto o = ctx.options_or<container::FullyConnectedOptions>();
  ctx.require(o.weights_format == 0, "only the default weights format is supported");
  ctx.require(w.rank() == 2, "weights must be 2-D [units, depth]");
  const int units = w.dim(0), depth = w.dim(1);
  ctx.require(depth > 0 && in.elements() % depth == 0, "input size is not a multiple of the depth");
  const int64_t batches = in.elements() / depth;
  ctx.require(out.elements() == batches * units, "output size is not batches x units");
  ctx.require(!bias || bias->elements() == units, "bias size differs from the units");
  const FloatRange act = float_activation(ctx, o.activation);
  return make_kernel([=](OpContext& c) {
    const float* x = c.inputs[0].as<float>();
    const float* k = c.inputs[1].as<float>();
    const float* b = c.has_input(2) ? c.inputs[2].as<float>() : nullptr;
    float* y = c.outputs[0].mutable_as<float>();
    for (int64_t n = 0; n < batches; ++n)
      for (int u = 0; u < units; ++u) {
        float total = 0.0f;
        const float* xr = x + n * depth;
        const float* kr = k + static_cast<size_t>(u) * depth;
        for (int d = 0; d < depth; ++d) total += xr[d] * kr[d];
        y[n * units + u] = act.apply(total + (b ? b[u] : 0.0f));
      }
  });
}

}  // namespace

void register_float_fully_connected(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kFullyConnected, &make_float_fc);
}

}  // namespace tinycoral::host
