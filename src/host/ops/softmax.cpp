// SOFTMAX over the last dimension, quantized uint8/int8 in, uint8/int8 out. Follows TFLite's
// default (optimized) kernel, which is what TFLite's interpreter runs for 8-bit softmax: a float32
// table exp(-s_in * beta * d) for the 256 possible distances d to the row maximum, a float32 sum in
// index order, p = e * f32(1 / (sum * s_out)), then round (uint8: trunc(p + 0.5); int8: half away
// from zero) plus z_out, saturated. The chip does not run softmax; both rounding modes give this
// result.
#include <cmath>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

struct SoftmaxPlan {
  std::vector<float> table;  // 256 entries: table[255 - d] = exp(-s*beta*d)
  int64_t rows = 0;
  int depth = 0;
  float out_scale = 1.0f;
  int32_t zo = 0;
};

template <typename In, typename Out>
void run_softmax(const SoftmaxPlan& p, OpContext& ctx) {
  const In* in = ctx.input(0).as<In>();
  Out* out = ctx.outputs[0].mutable_as<Out>();
  const int32_t lo = std::numeric_limits<Out>::min(), hi = std::numeric_limits<Out>::max();
  for (int64_t r = 0; r < p.rows; ++r, in += p.depth, out += p.depth) {
    int32_t max_val = std::numeric_limits<In>::min();
    for (int j = 0; j < p.depth; ++j) max_val = std::max(max_val, int32_t{in[j]});
    const float* row_table = p.table.data() + (255 - max_val);  // index in[j] in [max-255, max]
    float sum = 0.0f;
    for (int j = 0; j < p.depth; ++j) sum += row_table[in[j]];
    const float inv = 1.0f / (sum * p.out_scale);
    for (int j = 0; j < p.depth; ++j) {
      const float prob = row_table[in[j]] * inv;
      int32_t q;
      if constexpr (std::is_same_v<Out, uint8_t>)
        q = static_cast<int32_t>(prob + 0.5f) + p.zo;
      else
        q = static_cast<int32_t>(std::round(prob)) + p.zo;
      out[j] = static_cast<Out>(std::clamp(q, lo, hi));
    }
  }
}

std::unique_ptr<Kernel> make_softmax(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  if (!is_q8(in.type())) return nullptr;
  require_same_q8(ctx, {&in, &out});
  ctx.require(same_shape(in, out), "input and output shapes differ");
  ctx.require(in.rank() >= 1 && in.dim(-1) > 0, "input needs a non-empty last dimension");
  const auto o = ctx.options_or<container::SoftmaxOptions>();
  SoftmaxPlan p;
  p.depth = in.dim(-1);
  p.rows = in.elements() / p.depth;
  p.out_scale = out.scale();
  p.zo = out.zero_point();
  p.table.resize(256);
  const float s = -in.scale() * o.beta;
  for (int32_t d = 0; d <= 255; ++d)
    p.table[static_cast<size_t>(255 - d)] = std::exp(s * static_cast<float>(d));
  if (in.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { run_softmax<uint8_t, uint8_t>(p, c); });
  return make_kernel([p](OpContext& c) { run_softmax<int8_t, int8_t>(p, c); });
}

}  // namespace

void register_softmax(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kSoftmax, make_softmax);
}

}  // namespace tinycoral::host
