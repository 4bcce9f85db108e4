// The LSTM cell of the compiled Edge TPU program (sequence_lstm_edgetpu.h). Per step and cell:
//   part_x = round(f32(bias + W_x.(x - zp_x)) * m_x) in [-127, 128] hidden steps (the int8 range)
//   part_h = round(f32(W_h.(h - zp_h)) * m_h), the same
//   gate   = round(spline(clamp(f32(part_x + part_h) * s_h))) + zp: i, f, o = 255 sigma (zp 0),
//            g = 127.5 tanh (zp 128)
//   ig     = round(f32(i (g - 128)) * m_ig), fc = round(f32(f c) * m_fc)
//   c'     = round(f32(32767 fc + w ig) / 32767): the 16-bit ADD, w = 32767 s_ig / s_c
//   t      = round(16383.5 tanh(clamp(f32(32767 fc + w ig) * s_c / 32767)))
//   h      = round(f32(o t) * m_h) + zp_h
// with round = half to even and every multiplier float32 (docs/chip_ops.md 7).
#include "host/ops/sequence_lstm_edgetpu.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "host/quant_util.h"

namespace tinycoral::host::ops {
namespace {

using container::Activation;
using container::TensorType;

// Scales the compiler gives the values between the ops: sigmoid bytes 1/255 (zp 0), tanh bytes
// 2/255 (zp 128), 16-bit products and tanh(c') 2/32767 (zp 16384).
constexpr float kSigmoidScale = 1.0f / 255.0f;
constexpr float kTanhScale = 2.0f / 255.0f;
constexpr float kWideScale = 2.0f / 32767.0f;
constexpr int32_t kTanhZeroPoint = 128;
constexpr int32_t kWideLo = -16384, kWideHi = 49151;  // 16-bit storage minus the zero point 16384
constexpr int32_t kAddUnit = 32767;                   // the 16-bit ADD's larger weight

float rne(float y) { return edgetpu::round_half_even(y); }

// A rounded spline or product value as an integer; NaN (only from degenerate scales) gives the
// zero point, as on the chip, and the bounds keep the conversion defined.
int32_t to_int(float r) {
  if (std::isnan(r)) return 0;
  return static_cast<int32_t>(std::clamp(r, -2147483520.0f, 2147483520.0f));
}

uint8_t gate_byte(const EdgeTpuSpline& spline, float x, int32_t zero_point) {
  x = std::clamp(x, -spline.clamp, spline.clamp);
  const int32_t r = to_int(rne(evaluate(spline, x))) + zero_point;
  return static_cast<uint8_t>(std::clamp(r, 0, 255));
}

int64_t dot(const int8_t* x, const int8_t* row, int n) {
  int64_t acc = 0;
  for (int c = 0; c < n; ++c) acc += int32_t{x[c]} * int32_t{row[c]};
  return acc;
}

}  // namespace

int32_t edgetpu_round(int64_t acc, float mult, float lo, float hi) {
  const auto a = static_cast<int32_t>(std::clamp<int64_t>(acc, std::numeric_limits<int32_t>::min(),
                                                          std::numeric_limits<int32_t>::max()));
  return to_int(rne(std::clamp(static_cast<float>(a) * mult, lo, hi)));
}

void EdgeTpuLstmCell::prepare(const IntegerLstmCell& ic) {
  for (auto& g : gates_) g.assign(static_cast<size_t>(ic.n_cell), 0);
}

void EdgeTpuLstmCell::gate(const IntegerLstmCell& ic, int g, const int8_t* input,
                           const int8_t* output_state, uint8_t* out) const {
  const EdgeTpuSpline& spline = g == IntegerLstmCell::kCell ? cell_tanh : sigmoid;
  const int32_t zero_point = g == IntegerLstmCell::kCell ? kTanhZeroPoint : 0;
  for (int r = 0; r < ic.n_cell; ++r) {
    const auto row = static_cast<size_t>(r);
    const int64_t ax =
        ic.input_bias[g][row] +
        dot(input, ic.input_weights[g] + row * static_cast<size_t>(ic.n_input), ic.n_input);
    const int64_t ah =
        ic.recurrent_bias[g][row] +
        dot(output_state, ic.recurrent_weights[g] + row * static_cast<size_t>(ic.n_output),
            ic.n_output);
    const int32_t sum = edgetpu_round(ax, input_mult[g], part_lo, part_hi) +
                        edgetpu_round(ah, recurrent_mult[g], part_lo, part_hi);
    out[r] = gate_byte(spline, static_cast<float>(sum) * gate_mult, zero_point);
  }
}

void EdgeTpuLstmCell::step(const IntegerLstmCell& ic, const int8_t* input, int8_t* output_state,
                           int16_t* cell) {
  for (int g = 0; g < 4; ++g) gate(ic, g, input, output_state, gates_[g].data());
  const auto& ig = gates_[IntegerLstmCell::kInput];
  const auto& fg = gates_[IntegerLstmCell::kForget];
  const auto& cg = gates_[IntegerLstmCell::kCell];
  const auto& og = gates_[IntegerLstmCell::kOutput];
  // Every gate has read the old state; now both states are replaced cell by cell.
  for (size_t i = 0; i < ig.size(); ++i) {
    const int32_t in_x_g = edgetpu_round(int64_t{ig[i]} * (int32_t{cg[i]} - kTanhZeroPoint),
                                         ig_mult, float{kWideLo}, float{kWideHi});
    const int32_t f_x_c = edgetpu_round(int64_t{fg[i]} * cell[i], fc_mult, -32768.0f, 32767.0f);
    const int64_t sum = int64_t{add_weight_fc} * f_x_c + int64_t{add_weight_ig} * in_x_g;
    cell[i] = static_cast<int16_t>(edgetpu_round(sum, add_mult, cell_lo, cell_hi));
    const float x = static_cast<float>(sum) * add_tanh_mult;  // |sum| < 2^31: no saturation
    const float tanh_c = evaluate(state_tanh, std::clamp(x, -state_tanh.clamp, state_tanh.clamp));
    const int32_t t = std::clamp(to_int(rne(tanh_c)), kWideLo, kWideHi);
    const int32_t h =
        edgetpu_round(int64_t{og[i]} * t, hidden_mult, hidden_lo, hidden_hi) + hidden_zero_point;
    output_state[i] = static_cast<int8_t>(std::clamp<int32_t>(h, -128, 127));
  }
}

EdgeTpuLstmCell make_edgetpu_lstm(const IntegerLstmCell& cell, float input_scale, float state_scale,
                                  float hidden_scale, int32_t hidden_zero_point, float cell_scale,
                                  const std::array<float, 4>& input_weight_scales,
                                  const std::array<float, 4>& recurrent_weight_scales) {
  EdgeTpuLstmCell e;
  for (int g = 0; g < 4; ++g) {
    e.input_mult[g] = edgetpu::product_scale(input_scale, input_weight_scales[g], hidden_scale);
    e.recurrent_mult[g] =
        edgetpu::product_scale(state_scale, recurrent_weight_scales[g], hidden_scale);
  }
  const edgetpu::Clamps parts =
      edgetpu_clamps(Activation::kNone, hidden_scale, hidden_zero_point, TensorType::kInt8);
  e.part_lo = parts.lo;
  e.part_hi = parts.hi;
  e.hidden_lo = parts.lo;
  e.hidden_hi = parts.hi;
  e.hidden_zero_point = hidden_zero_point;
  e.gate_mult = hidden_scale;
  e.sigmoid = logistic_spline(kSigmoidScale);
  e.cell_tanh = tanh_spline(kTanhScale);
  e.state_tanh = tanh_spline(kWideScale);
  e.ig_mult = edgetpu::product_scale(kSigmoidScale, kTanhScale, kWideScale);
  e.fc_mult = edgetpu::product_scale(kSigmoidScale, cell_scale, cell_scale);
  e.hidden_mult = edgetpu::product_scale(kSigmoidScale, kWideScale, hidden_scale);
  // The 16-bit ADD: the operand of the larger scale weighs 32767, the other its share of it.
  const double big = std::max(double{cell_scale}, double{kWideScale});
  const auto share = [&](float s) {
    return static_cast<int32_t>(std::lround(kAddUnit * (double{s} / big)));
  };
  e.add_weight_fc = share(cell_scale);
  e.add_weight_ig = share(kWideScale);
  e.add_mult = static_cast<float>(big / kAddUnit / double{cell_scale});
  e.add_tanh_mult = static_cast<float>(big / kAddUnit);
  // The program clamps c' to the int16 range ([-32768, 32767] with the Keras model's clip of 10,
  // 40960 steps: the clip does not appear). A clip inside that range is assumed to clamp there.
  if (cell.cell_clip > 0 && cell.cell_clip < 32767) {
    e.cell_lo = std::max(e.cell_lo, -static_cast<float>(cell.cell_clip));
    e.cell_hi = std::min(e.cell_hi, static_cast<float>(cell.cell_clip));
  }
  e.prepare(cell);
  return e;
}

}  // namespace tinycoral::host::ops
