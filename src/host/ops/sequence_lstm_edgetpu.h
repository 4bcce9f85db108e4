// The integer LSTM cell as edgetpu_compiler's program computes it (the `edgetpu` rounding mode of
// UNIDIRECTIONAL_SEQUENCE_LSTM; docs/host_ops.md "The chip's LSTM", docs/chip_ops.md section 7).
// Not TFLite's kernel: each gate's input part (with the bias) and recurrent part are requantized
// to the hidden state's scale and clamped to its int8 range before they are added, the gates go
// through the non-linear unit's splines into bytes (sigmoids in 1/255, the cell gate in 2/255),
// and the cell update and the hidden state are float32 requantizations of 16-bit products whose
// intermediate scale is 2/32767. Every constant comes from the twin's scales (make_edgetpu_lstm).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "host/ops/edgetpu_spline.h"
#include "host/ops/sequence_lstm.h"

namespace tinycoral::host::ops {

struct EdgeTpuLstmCell {
  std::array<float, 4> input_mult{}, recurrent_mult{};  // each part to the hidden scale
  float part_lo = 0, part_hi = 0;    // the parts' clamps, relative to the hidden zero point
  float gate_mult = 0;               // the sum of the two parts (hidden steps) to real units
  EdgeTpuSpline sigmoid, cell_tanh;  // gate splines: 255 sigma(x) and 127.5 tanh(x)
  float ig_mult = 0;                 // i (1/255) x g (2/255) -> 2/32767
  float fc_mult = 0;                 // f (1/255) x c (cell scale) -> cell scale
  int32_t add_weight_fc = 0, add_weight_ig = 0;  // the 16-bit ADD c' = f c + i g
  float add_mult = 0;                            // -> cell steps
  float add_tanh_mult = 0;                       // -> real units, for tanh(c')
  EdgeTpuSpline state_tanh;                      // tanh(c') in 2/32767: 16383.5 tanh(x)
  float cell_lo = -32768, cell_hi = 32767;       // c' clamps (int16, the cell clip)
  float hidden_mult = 0;                         // o (1/255) x tanh (2/32767) -> hidden scale
  float hidden_lo = 0, hidden_hi = 0;            // relative to the hidden zero point
  int32_t hidden_zero_point = 0;

  // The integer cell `ic` gives the sizes, weights and effective biases (bias - zp * row sum):
  // the chip's accumulators are the same integers.
  void prepare(const IntegerLstmCell& ic);
  // One time step for one batch row, as IntegerLstmCell::step.
  void step(const IntegerLstmCell& ic, const int8_t* input, int8_t* output_state, int16_t* cell);

  // The pieces, for tests: one gate's bytes (the spline's output, rounded, + its zero point).
  void gate(const IntegerLstmCell& ic, int gate, const int8_t* input, const int8_t* output_state,
            uint8_t* out) const;

 private:
  std::array<std::vector<uint8_t>, 4> gates_;
};

// The chip's float32 output stage: f32(acc) * mult, clamped, rounded half to even (no zero point).
int32_t edgetpu_round(int64_t acc, float mult, float lo, float hi);

// The constants for the twin's scales: input, output state (the recurrent input), hidden state
// (the output), cell state, per gate the weight scales; the cell clip is `cell`'s. Prepared.
EdgeTpuLstmCell make_edgetpu_lstm(const IntegerLstmCell& cell, float input_scale, float state_scale,
                                  float hidden_scale, int32_t hidden_zero_point, float cell_scale,
                                  const std::array<float, 4>& input_weight_scales,
                                  const std::array<float, 4>& recurrent_weight_scales);

}  // namespace tinycoral::host::ops
