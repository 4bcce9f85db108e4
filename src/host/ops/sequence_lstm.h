// The fully integer LSTM cell of TFLite (int8 activations and weights, int16 cell state, 16-bit
// gates: TFLite's "8x8_16" kernel), as a plain struct so tests can drive single steps. The
// UNIDIRECTIONAL_SEQUENCE_LSTM operator (sequence_lstm.cpp) runs it over the time axis.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "host/rounding.h"

namespace tinycoral::host::ops {

struct IntegerLstmCell {
  enum Gate { kInput = 0, kForget = 1, kCell = 2, kOutput = 3 };

  int n_input = 0, n_cell = 0, n_output = 0;
  bool cifg = false;  // coupled input/forget gate: no input gate, it is 1 - forget
  // Weights per gate: [n_cell, n_input] and [n_cell, n_output]; nullptr for the CIFG input gate.
  std::array<const int8_t*, 4> input_weights{};
  std::array<const int8_t*, 4> recurrent_weights{};
  // Biases with the zero-point products folded in (TFLite's "effective biases"), [n_cell] each.
  std::array<std::vector<int32_t>, 4> input_bias, recurrent_bias;
  std::array<QuantizedMultiplier, 4> input_scale{}, recurrent_scale{};
  QuantizedMultiplier hidden_scale{};
  int32_t hidden_zero_point = 0;
  int cell_scale_log2 = -15;  // the int16 cell state's scale is 2^cell_scale_log2
  int16_t cell_clip = 0;      // 0 = none

  // Reserves the scratch rows; call once after the sizes are set.
  void prepare();

  // One time step for one batch row: reads `input` [n_input] and the state, updates `cell`
  // [n_cell] and `output_state` [n_output]. No allocation.
  void step(const int8_t* input, int8_t* output_state, int16_t* cell);

  // The pieces, exposed for tests: one gate's pre-activation (saturating int16 sums of the two
  // requantized matrix products).
  void gate_preactivation(int gate, const int8_t* input, const int8_t* output_state,
                          int16_t* out) const;

 private:
  std::array<std::vector<int16_t>, 4> gates_;
  std::vector<int16_t> scratch_;
};

// Element-wise helpers with TFLite's exact rounding (tests use them directly).
int16_t lstm_mul_shift(int16_t a, int16_t b, int shift);  // round(a*b / 2^shift), wrapped
int8_t lstm_hidden(int16_t gate, int16_t tanh_cell, QuantizedMultiplier scale, int32_t zero_point);

}  // namespace tinycoral::host::ops
