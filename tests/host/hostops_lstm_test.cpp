// The integer LSTM's arithmetic: gemmlowp-style int16 sigmoid/tanh against the real functions, the
// rounding ties of the cell update, TFLite's subtraction of the hidden zero point, and one cell
// step with hand-derived gates. (The whole Keras LSTM model is checked by google_expectations_test
// G020.)
#include <gtest/gtest.h>

#include <cmath>

#include "host/ops/fixed_point16.h"
#include "host/ops/sequence_lstm.h"

namespace tinycoral::host {
namespace {

TEST(HostOpsLstmFixedPoint, LogisticAndTanhFollowTheRealFunctions) {
  double worst_sig = 0, worst_tanh = 0;
  for (int v = -32768; v <= 32767; v += 7) {
    const double x = v / 4096.0;  // Q3.12
    const double s = fx16::logistic<3>(static_cast<int16_t>(v)) / 32768.0;
    const double t = fx16::tanh<3>(static_cast<int16_t>(v)) / 32768.0;
    worst_sig = std::max(worst_sig, std::abs(s - 1.0 / (1.0 + std::exp(-x))));
    worst_tanh = std::max(worst_tanh, std::abs(t - std::tanh(x)));
  }
  EXPECT_LT(worst_sig, 5e-4);  // int16 gemmlowp accuracy: a dozen Q0.15 steps at worst
  EXPECT_LT(worst_tanh, 5e-4);
  EXPECT_EQ(fx16::logistic<3>(0), 16384);  // exactly one half
  EXPECT_EQ(fx16::tanh<3>(0), 0);
  // Odd symmetry of tanh and 1 - sigmoid(x) = sigmoid(-x), as the fixed-point code builds them.
  EXPECT_EQ(fx16::tanh<3>(-4096), -fx16::tanh<3>(4096));
  EXPECT_EQ(fx16::logistic<3>(-4096), 32767 - fx16::logistic<3>(4096));
  // Other integer-bit counts (the cell state's tanh uses 15 + log2 of its scale).
  for (int ib = 0; ib <= 6; ++ib) {
    const int16_t in = static_cast<int16_t>(1 << (14 - ib));  // 0.5
    int16_t out = 0;
    ASSERT_TRUE(fx16::tanh_dynamic(ib, &in, &out, 1));
    EXPECT_NEAR(out / 32768.0, std::tanh(0.5), 5e-4) << "integer bits " << ib;
  }
  int16_t dummy = 0;
  EXPECT_FALSE(fx16::tanh_dynamic(7, &dummy, &dummy, 1));
}

TEST(HostOpsLstmFixedPoint, SaturatingPrimitives) {
  EXPECT_EQ(fx16::mul(INT16_MIN, INT16_MIN), INT16_MAX);
  EXPECT_EQ(fx16::mul(16384, 16384), 8192);  // 0.5 * 0.5
  EXPECT_EQ(fx16::saturating_add(30000, 30000), INT16_MAX);
  EXPECT_EQ(fx16::saturating_add(-30000, -30000), INT16_MIN);
  EXPECT_EQ(fx16::rounding_divide_by_pot(3, 1), 2);    // 1.5 -> 2
  EXPECT_EQ(fx16::rounding_divide_by_pot(-3, 1), -2);  // -1.5 -> -2
  EXPECT_EQ((fx16::mul_by_pot<2>(10000)), INT16_MAX);
  EXPECT_EQ((fx16::mul_by_pot<2>(-10000)), INT16_MIN);
}

TEST(HostOpsLstmCell, CellUpdateTiesRoundAwayFromZero) {
  EXPECT_EQ(ops::lstm_mul_shift(16384, 1001, 15), 501);    // 500.5 -> 501
  EXPECT_EQ(ops::lstm_mul_shift(16384, -1001, 15), -501);  // -500.5 -> -501
  EXPECT_EQ(ops::lstm_mul_shift(16384, 1000, 15), 500);
}

TEST(HostOpsLstmCell, HiddenStateSubtractsTheZeroPointAsTflite) {
  // 0.5 * 0.5 * 2^30 * 2^-23 = 32; TFLite then subtracts the hidden zero point (-1): 33.
  const auto m = quantize_multiplier(std::ldexp(1.0, -23));
  EXPECT_EQ(ops::lstm_hidden(16384, 16384, m, -1), 33);
  EXPECT_EQ(ops::lstm_hidden(16384, 16384, m, 0), 32);
  EXPECT_EQ(ops::lstm_hidden(32767, 32767, m, 0), 127);    // 128 saturates
  EXPECT_EQ(ops::lstm_hidden(-32768, 32767, m, 0), -128);  // -128 stays
}

TEST(HostOpsLstmCell, OneStepWithZeroWeights) {
  // One cell, one input, zero weights: every gate's pre-activation is its requantized bias.
  // Biases 0 give i = f = o = sigmoid(0) = 1/2 and g = tanh(0) = 0, so c' = c / 2 and
  // h = requantize(o * tanh(c')).
  ops::IntegerLstmCell cell;
  cell.n_input = cell.n_output = cell.n_cell = 1;
  const int8_t zero_w = 0;
  for (int g = 0; g < 4; ++g) {
    cell.input_weights[g] = &zero_w;
    cell.recurrent_weights[g] = &zero_w;
    cell.input_bias[g] = {0};
    cell.recurrent_bias[g] = {0};
    cell.input_scale[g] = quantize_multiplier(0.5);
    cell.recurrent_scale[g] = quantize_multiplier(0.5);
  }
  cell.cell_scale_log2 = -12;
  cell.hidden_scale = quantize_multiplier(std::ldexp(1.0, -23));
  cell.prepare();
  int16_t c = 1001;
  int8_t h = 0;
  const int8_t x = 5;
  cell.step(&x, &h, &c);
  EXPECT_EQ(c, 501);
  const int16_t t = fx16::tanh<3>(501);
  EXPECT_EQ(h, ops::lstm_hidden(16384, t, cell.hidden_scale, 0));
  // A bias of 4096 on the forget gate (1.0 in Q3.12 after the x0.5 scale of 8192) keeps more.
  cell.input_bias[ops::IntegerLstmCell::kForget] = {8192};
  int16_t out[1];
  cell.gate_preactivation(ops::IntegerLstmCell::kForget, &x, &h, out);
  EXPECT_EQ(out[0], 4096);
}

}  // namespace
}  // namespace tinycoral::host
