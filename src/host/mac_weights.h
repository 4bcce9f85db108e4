// The weights of a MAC operator (CONV_2D, FULLY_CONNECTED) packed for the qgemm.h kernels, with the
// per-column constants that fold the zero points back in (the algebra is in qgemm.h), and the
// output stage that turns rows of dot products into output bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "container/tflite_model.h"
#include "host/qgemm.h"
#include "host/quant_util.h"

namespace tinycoral::host {

TfliteRequantTable make_tflite_table(const std::vector<ChannelScale>& scales,
                                     const OutputStage& st);

// Weights of a MAC op as N rows of K, re-biased and padded, with what the output stage needs.
struct PackedWeights {
  int n = 0, k = 0, kp = 0;
  std::vector<int8_t> w;            // n * kp, W = w - ow, zero padded
  std::vector<int32_t> w_sum;       // per row: sum W
  std::vector<int32_t> aw;          // per row: zw - ow
  std::vector<int32_t> bias;        // per row (0 when the op has none)
  std::vector<ChannelScale> scale;  // per row
  std::vector<int32_t> offset;      // per row, set by set_mac_offsets
  TfliteRequantTable table;         // set by set_mac_offsets when the mode is tflite
  std::vector<int8_t> panels;       // pack_vnni_panels(w) when this CPU has AVX-512 VNNI
  // Row stride of the dot-product matrix mac_dots writes (n rounded up to 16).
  int ldc() const { return (n + 15) / 16 * 16; }
};

// dots[m * pw.ldc() + n] = sum_k A[m * lda + k] * W[n][k] for the packed weights (kp columns of A).
void mac_dots(const PackedWeights& pw, const uint8_t* a, size_t lda, int m, int32_t* dots,
              SimdLevel level);

// Per-column constant of finish_mac_rows for activation offset ax: bias + K*ax*aw - ax*sum W.
void set_mac_offsets(PackedWeights& pw, int32_t ax, const OutputStage& stage);

// `weights` is read as n rows of k (row-major; CONV_2D's OHWI and FC's [N, K] layouts both are).
PackedWeights pack_mac_weights(const OpContext& ctx, const TensorView& input,
                               const TensorView& weights, const TensorView* bias,
                               const TensorView& output, int n, int k);

// The activation offset ox for an activation type (0 for uint8, -128 for int8) and the value X that
// stands for the zero point (used for padding).
inline int32_t activation_offset(container::TensorType t) {
  return t == container::TensorType::kInt8 ? -128 : 0;
}

// Finishes rows of dot products: out[m * out_stride + n] = stage(dot + corrections + bias).
// `x_sum[m]` = sum of row m of X; ax = zx - ox.
template <typename T>
void finish_mac_rows(const PackedWeights& pw, const OutputStage& stage, const int32_t* dots,
                     size_t ldc, const int32_t* x_sum, int m, T* out, size_t out_stride) {
  // Modular int32 arithmetic: intermediate terms may wrap, the true sum fits (as in TFLite).
  if (stage.mode == Rounding::kTflite && !pw.table.mult.empty()) {
    const SimdLevel level = active_simd_level();
    for (int r = 0; r < m; ++r)
      tflite_requantize_row(
          dots + static_cast<size_t>(r) * ldc, pw.aw.data(), x_sum[r], pw.offset.data(), pw.table,
          pw.n, reinterpret_cast<uint8_t*>(out + static_cast<size_t>(r) * out_stride), level);
    return;
  }
  for (int r = 0; r < m; ++r) {
    const int32_t* d = dots + static_cast<size_t>(r) * ldc;
    T* o = out + static_cast<size_t>(r) * out_stride;
    const auto xs = static_cast<uint32_t>(x_sum[r]);
    for (int c = 0; c < pw.n; ++c) {
      const auto cc = static_cast<size_t>(c);
      const auto aw = static_cast<uint32_t>(pw.aw[cc]);
      const auto acc = static_cast<int32_t>(static_cast<uint32_t>(d[c]) - aw * xs +
                                            static_cast<uint32_t>(pw.offset[cc]));
      o[c] = static_cast<T>(stage.apply(acc, pw.scale[cc]));
    }
  }
}

}  // namespace tinycoral::host
