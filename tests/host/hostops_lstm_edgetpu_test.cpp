// The LSTM of the `edgetpu` rounding mode (the compiled program's arithmetic, docs/host_ops.md
// "The chip's LSTM"): its splines against the real functions, its constants against those
// edgetpu_compiler wrote into gen2021's Keras LSTM program, and one time step with random weights
// against a double-precision LSTM whose gate parts saturate where the program's do. (The whole
// model against the virtual Edge TPU, byte for byte: GoogleLstmOnTheChip, EveryCompiledModel.)
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "host/ops/edgetpu_spline.h"
#include "host/ops/sequence_lstm_edgetpu.h"

namespace tinycoral::host {
namespace {

using ops::IntegerLstmCell;

TEST(HostOpsLstmEdgeTpu, SplinesFollowTheRealFunctions) {
  const ops::EdgeTpuSpline logistic = ops::logistic_spline(1.0f / 256);
  const ops::EdgeTpuSpline tanh = ops::tanh_spline(1.0f);
  // The base scale itself leaves the LOGISTIC table as loaded (isa.md 2.4).
  EXPECT_EQ(std::bit_cast<uint32_t>(logistic.coefficients[0]), 0x4200549cu);
  EXPECT_EQ(std::bit_cast<uint32_t>(logistic.clamp), 0x41265904u);  // 10.396732
  double worst_logistic = 0, worst_tanh = 0;
  for (float x = -10.39f; x <= 10.39f; x += 0.001f)
    worst_logistic = std::max(
        worst_logistic, std::abs(ops::evaluate(logistic, x) - 256 / (1 + std::exp(-double{x}))));
  for (float x = -tanh.clamp; x <= tanh.clamp; x += 0.001f) {
    worst_tanh = std::max(worst_tanh, std::abs(ops::evaluate(tanh, x) - std::tanh(double{x})));
    EXPECT_EQ(ops::evaluate(tanh, -x), -ops::evaluate(tanh, x)) << x;  // odd: |x| and the sign
  }
  EXPECT_LT(worst_logistic, 0.0077);  // output steps of 1/256 (isa.md 2.4: 0.0076)
  EXPECT_LT(worst_tanh, 1e-4);
  // The LSTM's cell gate table: 127.5 tanh (zero point 128 maps [-1, 1] onto the byte).
  const ops::EdgeTpuSpline gate = ops::tanh_spline(2.0f / 255);
  EXPECT_NEAR(ops::evaluate(gate, 3.0f), 127.5 * std::tanh(3.0), 0.02);
}

// The cell for gen2021 keras_lstm_mnist_ptq's scales (its twin's tensors 8-18 and 23).
struct KerasLstmScales {
  float input = 0.003921568859368563f, hidden = 0.007781578693538904f, cell = 0.000244140625f;
  std::array<float, 4> wx{0.006644777953624725f, 0.006698517594486475f, 0.005834994371980429f,
                          0.008612209931015968f};
  std::array<float, 4> wh{0.006986548192799091f, 0.00466148229315877f, 0.004288494121283293f,
                          0.0071137878112494946f};
};

TEST(HostOpsLstmEdgeTpu, ConstantsAreThoseOfTheCompiledProgram) {
  // Every multiplier below was read from the program's instructions (docs/chip_ops.md 7); the
  // cell derives them from the twin's scales alone.
  const KerasLstmScales s;
  IntegerLstmCell ic;
  ic.n_input = 28;
  ic.n_cell = ic.n_output = 20;
  ic.cell_clip = 32767;  // TFLite's clip of 10.0 in 2^-12 steps, saturated to int16
  const auto e = ops::make_edgetpu_lstm(ic, s.input, s.hidden, s.hidden, -1, s.cell, s.wx, s.wh);
  const std::array<float, 4> input_mult{0x1.b6eac8p-9f, 0x1.ba7782p-9f, 0x1.816d64p-9f,
                                        0x1.1c6ff6p-8f};  // words 940, 1122, 1277, 1601
  const std::array<float, 4> recurrent_mult{0x1.c9ded2p-8f, 0x1.317ebp-8f, 0x1.190cfep-8f,
                                            0x1.d2358cp-8f};  // words 991, 1146, 1301, 1625
  EXPECT_EQ(e.input_mult, input_mult);
  EXPECT_EQ(e.recurrent_mult, recurrent_mult);
  EXPECT_EQ(e.gate_mult, 0x1.fdf93ap-8f);  // the gates' ADD (word 1094)
  EXPECT_EQ(e.ig_mult, 0x1.020102p-1f);    // word 1423
  EXPECT_EQ(e.fc_mult, 0x1.010102p-8f);    // word 1489
  EXPECT_EQ(e.add_weight_fc, 32767);       // word 1573's weight rows
  EXPECT_EQ(e.add_weight_ig, 8192);        //
  EXPECT_EQ(e.cell_lo, -32768.0f);         // word 1573's clamps: the int16 range, not the clip
  EXPECT_EQ(e.cell_hi, 32767.0f);
  EXPECT_EQ(e.add_mult, 0x1.0002p-15f);           // word 1573
  EXPECT_EQ(e.add_tanh_mult, 0x1.0002p-27f);      // word 1798
  EXPECT_EQ(e.hidden_mult, 0x1.020876p-15f);      // word 1836
  EXPECT_EQ(e.state_tanh.clamp, 0x1.b7fcd6p+2f);  // words 1404 and 1798: +-6.874807
  // Spline coefficients of the program's tables (the 0x19 loads before words 1094 and 1798).
  EXPECT_EQ(e.sigmoid.coefficients[0], 0x1.ff511cp+4f);
  EXPECT_EQ(e.sigmoid.coefficients[1], 0x1.b9b41ap+3f);
  EXPECT_EQ(e.cell_tanh.coefficients[1], 0x1.fdee28p+6f);
  EXPECT_EQ(e.state_tanh.coefficients[1], 0x1.ffea18p+13f);
  EXPECT_EQ(e.state_tanh.coefficients[2], 0x1.d00502p+5f);
}

// The LSTM in double precision from the same integers, each gate part clamped to the int8 range
// of the hidden state as the program clamps it.
struct DoubleStep {
  std::vector<double> h, c;
  int clamped = 0;  // gate parts beyond the range
};
DoubleStep double_lstm(const IntegerLstmCell& ic, const KerasLstmScales& s, int32_t hidden_zp,
                       const std::vector<int8_t>& x, const std::vector<int8_t>& h,
                       const std::vector<int16_t>& c) {
  const double lo = (-128 - hidden_zp) * double{s.hidden},
               hi = (127 - hidden_zp) * double{s.hidden};
  DoubleStep out;
  for (int r = 0; r < ic.n_cell; ++r) {
    double gate[4];
    for (int g = 0; g < 4; ++g) {
      double ax = ic.input_bias[g][size_t(r)], ah = ic.recurrent_bias[g][size_t(r)];
      for (int k = 0; k < ic.n_input; ++k)
        ax += x[size_t(k)] * ic.input_weights[g][r * ic.n_input + k];
      for (int k = 0; k < ic.n_output; ++k)
        ah += h[size_t(k)] * ic.recurrent_weights[g][r * ic.n_output + k];
      const double px = ax * s.input * s.wx[size_t(g)], ph = ah * s.hidden * s.wh[size_t(g)];
      out.clamped += (px < lo || px > hi) + (ph < lo || ph > hi);
      const double sum = std::clamp(px, lo, hi) + std::clamp(ph, lo, hi);
      gate[g] = g == IntegerLstmCell::kCell ? std::tanh(sum) : 1 / (1 + std::exp(-sum));
    }
    const double cell = gate[1] * c[size_t(r)] * s.cell + gate[0] * gate[2];
    out.c.push_back(cell);
    out.h.push_back(gate[3] * std::tanh(cell));
  }
  return out;
}

TEST(HostOpsLstmEdgeTpu, OneStepFollowsTheSaturatingLstm) {
  const KerasLstmScales s;
  constexpr int kInputs = 28, kCells = 20;
  constexpr int32_t kHiddenZp = -1;
  std::mt19937 rng(10);
  std::uniform_int_distribution<int> byte(-128, 127), bias(-20000, 20000), cell16(-32768, 32767);
  double worst_h = 0, worst_c = 0;
  int saturated = 0;
  for (int trial = 0; trial < 20; ++trial) {
    std::array<std::vector<int8_t>, 4> wx, wh;
    IntegerLstmCell ic;
    ic.n_input = kInputs;
    ic.n_cell = ic.n_output = kCells;
    for (int g = 0; g < 4; ++g) {
      for (int k = 0; k < kCells * kInputs; ++k) wx[g].push_back(int8_t(byte(rng)));
      for (int k = 0; k < kCells * kCells; ++k) wh[g].push_back(int8_t(byte(rng)));
      ic.input_weights[g] = wx[g].data();
      ic.recurrent_weights[g] = wh[g].data();
      for (int r = 0; r < kCells; ++r) {
        ic.input_bias[g].push_back(bias(rng));
        ic.recurrent_bias[g].push_back(0);
      }
    }
    auto e = ops::make_edgetpu_lstm(ic, s.input, s.hidden, s.hidden, kHiddenZp, s.cell, s.wx, s.wh);
    std::vector<int8_t> x, h;
    std::vector<int16_t> c;
    for (int k = 0; k < kInputs; ++k) x.push_back(int8_t(byte(rng)));
    for (int k = 0; k < kCells; ++k) h.push_back(int8_t(byte(rng)));
    for (int k = 0; k < kCells; ++k) c.push_back(int16_t(cell16(rng) / 4));  // within +-2
    const DoubleStep want = double_lstm(ic, s, kHiddenZp, x, h, c);
    saturated += want.clamped;
    std::vector<int8_t> h_out = h;
    std::vector<int16_t> c_out = c;
    e.step(ic, x.data(), h_out.data(), c_out.data());
    for (int r = 0; r < kCells; ++r) {
      worst_h = std::max(worst_h,
                         std::abs((h_out[size_t(r)] - kHiddenZp) - want.h[size_t(r)] / s.hidden));
      worst_c = std::max(worst_c, std::abs(c_out[size_t(r)] * double{s.cell} - want.c[size_t(r)]));
    }
  }
  // Parts beyond the int8 range are common (the saturation the double LSTM copies matters).
  EXPECT_GT(saturated, 100);
  // Each gate byte is within half a step of 1/255 (2/255 for g) plus the spline's error, and the
  // cell's products are rounded in 2/32767 and 2^-12: a few thousandths in the cell, about one
  // hidden step in h.
  EXPECT_LT(worst_c, 0.01) << "cell";
  EXPECT_LT(worst_h, 1.5) << "hidden steps";
  ::testing::Test::RecordProperty("worst_hidden_steps", std::to_string(worst_h));
  ::testing::Test::RecordProperty("worst_cell", std::to_string(worst_c));
  ::testing::Test::RecordProperty("saturated_parts", saturated);
}

TEST(HostOpsLstmEdgeTpu, CellSaturatesAtTheInt16RangeNotAClipBeyondIt) {
  // One cell, zero weights, biases that pin the parts to their clamps: with a hidden scale of
  // 0.05 the gate input reaches +-6.4, so f = i = 255 and g = 128 - 127. From c = -32768 the new
  // cell is -32768 - 4080 before its clamp, which is the int16 range when the clip lies beyond it
  // (TFLite's clip of 10.0 at 2^-12: 32767 steps; the program's word 1573 clamps at -32768). A
  // clip inside the range (4.0: 16384 steps) is assumed to clamp there; no program shows one.
  const int8_t zero = 0;
  IntegerLstmCell ic;
  ic.n_input = ic.n_cell = ic.n_output = 1;
  for (int g = 0; g < 4; ++g) {
    ic.input_weights[g] = ic.recurrent_weights[g] = &zero;
    ic.input_bias[g] = {g == IntegerLstmCell::kCell ? -1000000 : 1000000};
    ic.recurrent_bias[g] = {0};
  }
  const std::array<float, 4> w{0.01f, 0.01f, 0.01f, 0.01f};
  for (const int16_t clip : {int16_t{32767}, int16_t{16384}}) {
    ic.cell_clip = clip;
    auto e = ops::make_edgetpu_lstm(ic, 1.0f / 255, 0.05f, 0.05f, -1, 0.000244140625f, w, w);
    uint8_t gates[4];
    const int8_t x = 0, h = 0;
    for (int g = 0; g < 4; ++g) e.gate(ic, g, &x, &h, &gates[g]);
    EXPECT_EQ(gates[IntegerLstmCell::kForget], 255);
    EXPECT_EQ(gates[IntegerLstmCell::kCell], 1);
    int8_t state = 0;
    int16_t cell = -32768;
    e.step(ic, &x, &state, &cell);
    EXPECT_EQ(cell, clip == 32767 ? -32768 : -16384) << "clip " << clip;
  }
}

}  // namespace
}  // namespace tinycoral::host
