// The integer matrix engine behind CONV_2D and FULLY_CONNECTED. Activations and weights are
// re-biased so that every dot product is unsigned-8 x signed-8 with exact int32 accumulation (the
// shape AVX-512 VNNI's vpdpbusd and AVX2's vpmaddwd handle without saturation); zero points are
// folded back with per-row and per-column sums, so every SIMD level gives identical results:
//   x = X + ox (X uint8; ox = 0 for uint8, -128 for int8), w = W + ow (W int8; ow = 128 for uint8)
//   sum (x - zx)(w - zw) = sum X*W - aw*sum X - ax*sum W + K*ax*aw,  ax = zx - ox, aw = zw - ow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "container/tflite_model.h"
#include "host/quant_util.h"

namespace tinycoral::host {

enum class SimdLevel { kPortable = 0, kAvx2 = 1, kAvx512Vnni = 2 };
const char* simd_level_name(SimdLevel level);
SimdLevel detected_simd_level();
// The level the kernels use: the detected one unless overridden (tests, bench); clamped to
// detected.
SimdLevel active_simd_level();
void set_simd_level_override(SimdLevel level);
void clear_simd_level_override();

constexpr int kGemmKAlign = 64;  // K of the packed operands is padded with zeros to a multiple
inline int gemm_padded_k(int k) { return (k + kGemmKAlign - 1) / kGemmKAlign * kGemmKAlign; }

// C[m * ldc + n] = sum_{k < kp} A[m * lda + k] * B[n * kp + k]  (kp a multiple of kGemmKAlign).
void gemm_u8s8(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp, SimdLevel level);

// Weights of a MAC op as N rows of K, re-biased and padded, with what the output stage needs.
struct PackedWeights {
  int n = 0, k = 0, kp = 0;
  std::vector<int8_t> w;            // n * kp, W = w - ow, zero padded
  std::vector<int32_t> w_sum;       // per row: sum W
  std::vector<int32_t> aw;          // per row: zw - ow
  std::vector<int32_t> bias;        // per row (0 when the op has none)
  std::vector<ChannelScale> scale;  // per row
};

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
                     size_t ldc, const int32_t* x_sum, int32_t ax, int m, T* out,
                     size_t out_stride) {
  for (int r = 0; r < m; ++r) {
    const int32_t* d = dots + static_cast<size_t>(r) * ldc;
    T* o = out + static_cast<size_t>(r) * out_stride;
    for (int c = 0; c < pw.n; ++c) {
      const size_t cc = static_cast<size_t>(c);
      // int64 then wrap: intermediate terms may exceed int32 when the true sum does not.
      const int64_t wide = int64_t{d[c]} - int64_t{pw.aw[cc]} * x_sum[r] -
                           int64_t{ax} * pw.w_sum[cc] + int64_t{pw.k} * ax * pw.aw[cc] +
                           pw.bias[cc];
      const auto acc = static_cast<int32_t>(static_cast<uint32_t>(wide));
      o[c] = static_cast<T>(stage.apply(acc, pw.scale[cc]));
    }
  }
}

}  // namespace tinycoral::host
