// FULLY_CONNECTED, quantized uint8/int8: input rows of K (the input flattened to [batch, K]) times
// the packed [N, K] weights through the exact integer GEMM, then the output stage of the rounding
// mode. Shuffled weight formats are refused.
#include <algorithm>
#include <cstring>

#include "host/mac_weights.h"
#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

constexpr int kFcRowsPerTile = 16;

struct FcPlan {
  PackedWeights pw;
  OutputStage stage;
  int batch = 0;
  int32_t ax = 0;
  uint8_t x_flip = 0;
};

template <typename T>
void run_fc(const FcPlan& p, OpContext& ctx) {
  const auto* in = ctx.input(0).as<uint8_t>();
  T* out = ctx.outputs[0].mutable_as<T>();
  const size_t kp = static_cast<size_t>(p.pw.kp);
  const size_t k = static_cast<size_t>(p.pw.k);
  uint8_t* rows = ctx.scratch.data();
  auto* dots = reinterpret_cast<int32_t*>(rows + kFcRowsPerTile * kp);
  const auto ldc = static_cast<size_t>(p.pw.ldc());
  int32_t* x_sum = dots + static_cast<size_t>(kFcRowsPerTile) * ldc;
  const SimdLevel level = active_simd_level();
  for (int base = 0; base < p.batch; base += kFcRowsPerTile) {
    const int m = std::min(kFcRowsPerTile, p.batch - base);
    for (int r = 0; r < m; ++r) {
      const uint8_t* src = in + static_cast<size_t>(base + r) * k;
      uint8_t* row = rows + static_cast<size_t>(r) * kp;
      x_sum[r] = copy_flip_sum(row, src, k, p.x_flip, level);
      std::memset(row + k, 0, kp - k);
    }
    mac_dots(p.pw, rows, kp, m, dots, level);
    finish_mac_rows<T>(p.pw, p.stage, dots, ldc, x_sum, m,
                       out + static_cast<size_t>(base) * static_cast<size_t>(p.pw.n),
                       static_cast<size_t>(p.pw.n));
  }
}

std::unique_ptr<Kernel> make_fully_connected(const OpContext& ctx) {
  ctx.require_inputs(2, 3);
  ctx.require_outputs(1);
  const TensorView& input = ctx.input(0);
  const TensorView& weights = ctx.input(1);
  const TensorView& output = ctx.output(0);
  if (!is_q8(input.type())) return nullptr;
  require_same_q8(ctx, {&input, &output});
  const auto o = ctx.options_or<container::FullyConnectedOptions>();
  ctx.require(o.weights_format == 0, "shuffled weight formats are not supported");
  ctx.require(weights.rank() == 2, "weights must have rank 2");
  const int n = weights.dim(0), k = weights.dim(1);
  ctx.require(k > 0 && input.elements() % k == 0,
              cat("input of ", input.elements(), " values is not a multiple of K = ", k));
  FcPlan p;
  p.batch = static_cast<int>(input.elements() / k);
  ctx.require(output.elements() == int64_t{p.batch} * n,
              cat("output has ", output.elements(), " values, expected ", p.batch, " x ", n));
  const TensorView* bias = ctx.has_input(2) ? &ctx.inputs[2] : nullptr;
  p.pw = pack_mac_weights(ctx, input, weights, bias, output, n, k);
  p.stage = make_output_stage(ctx.rounding, output, o.activation);
  p.ax = input.zero_point() - activation_offset(input.type());
  ctx.require(p.ax >= 0 && p.ax <= 255, "input zero point outside its type's range");
  set_mac_offsets(p.pw, p.ax, p.stage);
  p.x_flip = input.type() == container::TensorType::kInt8 ? 0x80 : 0;
  const size_t scratch = kFcRowsPerTile * static_cast<size_t>(p.pw.kp) +
                         sizeof(int32_t) * kFcRowsPerTile * (static_cast<size_t>(p.pw.ldc()) + 1);
  if (input.type() == container::TensorType::kUInt8)
    return make_kernel([p](OpContext& c) { run_fc<uint8_t>(p, c); }, scratch);
  return make_kernel([p](OpContext& c) { run_fc<int8_t>(p, c); }, scratch);
}

}  // namespace

void register_fully_connected(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kFullyConnected, make_fully_connected);
}

}  // namespace tinycoral::host
