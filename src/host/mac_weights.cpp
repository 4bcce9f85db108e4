// Packing of MAC weights and the zero-point constants (mac_weights.h).
#include "host/mac_weights.h"

namespace tinycoral::host {

TfliteRequantTable make_tflite_table(const std::vector<ChannelScale>& scales,
                                     const OutputStage& st) {
  TfliteRequantTable t;
  for (const auto& s : scales) {
    t.mult.push_back(s.q.multiplier);
    t.left.push_back(s.q.shift > 0 ? s.q.shift : 0);
    t.right.push_back(s.q.shift > 0 ? 0 : -s.q.shift);
  }
  t.zero_point = st.zero_point;
  t.lo = st.act.min;
  t.hi = st.act.max;
  return t;
}

void set_mac_offsets(PackedWeights& pw, int32_t ax, const OutputStage& stage) {
  if (stage.mode == Rounding::kTflite) pw.table = make_tflite_table(pw.scale, stage);
  pw.offset.resize(static_cast<size_t>(pw.n));
  for (size_t c = 0; c < pw.offset.size(); ++c) {
    const int64_t v =
        int64_t{pw.bias[c]} + int64_t{pw.k} * ax * pw.aw[c] - int64_t{ax} * pw.w_sum[c];
    pw.offset[c] = static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint64_t>(v)));
  }
}

void mac_dots(const PackedWeights& pw, const uint8_t* a, size_t lda, int m, int32_t* dots,
              SimdLevel level) {
  const auto ldc = static_cast<size_t>(pw.ldc());
  if (!pw.panels.empty() &&
      gemm_u8s8_panels(pw.panels.data(), pw.n, pw.kp, a, lda, m, dots, ldc, level))
    return;
  gemm_u8s8(a, lda, pw.w.data(), dots, ldc, m, pw.n, pw.kp, level);
}

PackedWeights pack_mac_weights(const OpContext& ctx, const TensorView& input,
                               const TensorView& weights, const TensorView* bias,
                               const TensorView& output, int n, int k) {
  ctx.require(weights.constant, cat("weights '", weights.name(), "' must be constant"));
  ctx.require(
      weights.type() == input.type(),
      cat("weights '", weights.name(), "' are ", container::tensor_type_name(weights.type()),
          " but the input is ", container::tensor_type_name(input.type())));
  ctx.require(weights.elements() == int64_t{n} * k, "weights do not match the operator's shape");
  ctx.require(k > 0 && k <= (1 << 20), cat("reduction size ", k, " out of range"));
  PackedWeights pw;
  pw.n = n;
  pw.k = k;
  pw.kp = gemm_padded_k(k);
  pw.scale = mac_channel_scales(ctx, input, weights, output, n);
  const auto& zps = weights.quant().zero_point;
  ctx.require(zps.size() <= 1 || zps.size() == static_cast<size_t>(n),
              "weight zero points do not match the output channels");
  const bool u8 = weights.type() == container::TensorType::kUInt8;
  const int32_t ow = u8 ? 128 : 0;
  pw.w.assign(static_cast<size_t>(n) * static_cast<size_t>(pw.kp), 0);
  pw.w_sum.assign(static_cast<size_t>(n), 0);
  pw.aw.assign(static_cast<size_t>(n), 0);
  pw.bias.assign(static_cast<size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const size_t rr = static_cast<size_t>(r);
    const int64_t zw = zps.empty() ? 0 : (zps.size() == 1 ? zps[0] : zps[rr]);
    pw.aw[rr] = static_cast<int32_t>(zw) - ow;
    int32_t sum = 0;
    for (int q = 0; q < k; ++q) {
      const size_t src = rr * static_cast<size_t>(k) + static_cast<size_t>(q);
      const int32_t w = u8 ? int32_t{weights.data[src]} : int32_t{weights.as<int8_t>()[src]};
      const auto biased = static_cast<int8_t>(w - ow);
      pw.w[rr * static_cast<size_t>(pw.kp) + static_cast<size_t>(q)] = biased;
      sum += biased;
    }
    pw.w_sum[rr] = sum;
  }
  if (bias && bias->present()) {
    ctx.require(bias->constant, "bias must be constant");
    ctx.require(bias->type() == container::TensorType::kInt32,
                cat("bias '", bias->name(), "' must be int32, is ",
                    container::tensor_type_name(bias->type())));
    ctx.require(bias->elements() == n,
                cat("bias has ", bias->elements(), " values for ", n, " output channels"));
    for (int r = 0; r < n; ++r) pw.bias[static_cast<size_t>(r)] = bias->as<int32_t>()[r];
  }
  if (detected_simd_level() == SimdLevel::kAvx512Vnni)
    pw.panels = pack_vnni_panels(pw.w.data(), n, pw.kp);
  return pw;
}

}  // namespace tinycoral::host
