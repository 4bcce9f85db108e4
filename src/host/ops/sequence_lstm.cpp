// UNIDIRECTIONAL_SEQUENCE_LSTM, fully integer (sequence_lstm.h): bit-exact with TFLite's 8x8_16
// integer LSTM. Per step and gate: two int8 matrix-vector products, each requantized to a Q3.12
// int16 gate value and summed with int16 saturation; sigmoid / tanh in gemmlowp's 16-bit fixed
// point; the cell update c = f*c >> 15 + i*g >> (30 + log2 cell scale), saturated and clipped;
// the hidden state h = requantize(o * tanh(c)) minus the hidden zero point. The minus is TFLite's
// (its element-wise multiply subtracts the output zero point), kept for bit-exactness.
// Supported: the Keras-converted form (no peephole, no projection, no layer normalization, CIFG
// optional); anything else is refused at load time.
#include "host/ops/sequence_lstm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "host/kernel.h"
#include "host/ops/fixed_point16.h"
#include "host/ops/sequence_lstm_edgetpu.h"
#include "host/registry.h"

namespace tinycoral::host::ops {

int16_t lstm_mul_shift(int16_t a, int16_t b, int shift) {
  return fx16::wrap(rounding_divide_by_pot(int32_t{a} * int32_t{b}, shift));
}

int8_t lstm_hidden(int16_t gate, int16_t tanh_cell, QuantizedMultiplier scale, int32_t zero_point) {
  int32_t v = multiply_by_quantized_multiplier(int32_t{gate} * int32_t{tanh_cell}, scale);
  v -= zero_point;
  return static_cast<int8_t>(std::clamp<int32_t>(v, -128, 127));
}

void IntegerLstmCell::prepare() {
  for (auto& g : gates_) g.assign(static_cast<size_t>(n_cell), 0);
  scratch_.assign(static_cast<size_t>(n_cell), 0);
}

namespace {

// gate[r] = sat16(gate[r] + requantize(bias[r] + W[r] . x)), TFLite's matrix-batch-vector
// multiply-accumulate into int16.
void accumulate(const int8_t* x, int n, const int8_t* w, const std::vector<int32_t>& bias,
                QuantizedMultiplier m, int rows, int16_t* gate) {
  for (int r = 0; r < rows; ++r) {
    int32_t acc = bias[static_cast<size_t>(r)];
    const int8_t* row = w + static_cast<size_t>(r) * n;
    for (int c = 0; c < n; ++c) acc += int32_t{x[c]} * int32_t{row[c]};
    acc = multiply_by_quantized_multiplier(acc, m) + gate[r];
    gate[r] = static_cast<int16_t>(std::clamp<int32_t>(acc, INT16_MIN, INT16_MAX));
  }
}

}  // namespace

void IntegerLstmCell::gate_preactivation(int gate, const int8_t* input, const int8_t* output_state,
                                         int16_t* out) const {
  std::fill(out, out + n_cell, int16_t{0});
  accumulate(input, n_input, input_weights[gate], input_bias[gate], input_scale[gate], n_cell, out);
  accumulate(output_state, n_output, recurrent_weights[gate], recurrent_bias[gate],
             recurrent_scale[gate], n_cell, out);
}

void IntegerLstmCell::step(const int8_t* input, int8_t* output_state, int16_t* cell) {
  int16_t* ig = gates_[kInput].data();
  int16_t* fg = gates_[kForget].data();
  int16_t* cg = gates_[kCell].data();
  int16_t* og = gates_[kOutput].data();
  const int n = n_cell;
  if (!cifg) {
    gate_preactivation(kInput, input, output_state, ig);
    for (int i = 0; i < n; ++i) ig[i] = fx16::logistic<3>(ig[i]);
  }
  gate_preactivation(kForget, input, output_state, fg);
  for (int i = 0; i < n; ++i) fg[i] = fx16::logistic<3>(fg[i]);
  gate_preactivation(kCell, input, output_state, cg);
  for (int i = 0; i < n; ++i) cg[i] = fx16::tanh<3>(cg[i]);

  // Cell update.
  const int shift = 30 + cell_scale_log2;
  for (int i = 0; i < n; ++i) {
    const int16_t kept = lstm_mul_shift(fg[i], cell[i], 15);
    const int16_t in_gate = cifg ? static_cast<int16_t>(32767 - fg[i]) : ig[i];
    const int16_t added = lstm_mul_shift(in_gate, cg[i], shift);
    int32_t c = std::clamp<int32_t>(int32_t{kept} + int32_t{added}, INT16_MIN, INT16_MAX);
    if (cell_clip > 0) c = std::clamp<int32_t>(c, -cell_clip, cell_clip);
    cell[i] = static_cast<int16_t>(c);
  }

  // The output gate sees the old output state (it is computed before the state is replaced).
  gate_preactivation(kOutput, input, output_state, og);
  for (int i = 0; i < n; ++i) og[i] = fx16::logistic<3>(og[i]);
  fx16::tanh_dynamic(15 + cell_scale_log2, cell, scratch_.data(), n);
  for (int i = 0; i < n_output; ++i)
    output_state[i] =
        lstm_hidden(og[i], scratch_[static_cast<size_t>(i)], hidden_scale, hidden_zero_point);
}

}  // namespace tinycoral::host::ops

namespace tinycoral::host {
namespace {

using container::TensorType;

// Input slots of the LSTM operator (TFLite's full-LSTM layout).
enum Slot {
  kInputTensor = 0,
  kInputWeights = 1,      // input, forget, cell, output: 1..4
  kRecurrentWeights = 5,  // 5..8
  kPeephole = 9,          // 9..11
  kBias = 12,             // 12..15
  kProjectionWeights = 16,
  kProjectionBias = 17,
  kOutputState = 18,
  kCellState = 19,
  kLayerNorm = 20,  // 20..23
};

// TFLite's CheckedLog2: the power of two a scale is (within 1e-3 of a whole exponent).
bool checked_log2(float x, int* out) {
  const float l = std::log(x) * (1.0f / std::log(2.0f));
  const float r = std::round(l);
  *out = static_cast<int>(r);
  return std::abs(l - r) < 1e-3f;
}

class LstmKernel final : public Kernel {
 public:
  LstmKernel(ops::IntegerLstmCell cell, std::optional<ops::EdgeTpuLstmCell> edgetpu, int batches,
             int steps, bool time_major)
      : cell_(std::move(cell)),
        edgetpu_(std::move(edgetpu)),
        batches_(batches),
        steps_(steps),
        time_major_(time_major) {
    cell_.prepare();
  }
  void eval(OpContext& ctx) override {
    const int8_t* in = ctx.inputs[kInputTensor].as<int8_t>();
    int8_t* state = ctx.inputs[kOutputState].mutable_as<int8_t>();
    int16_t* cell = ctx.inputs[kCellState].mutable_as<int16_t>();
    int8_t* out = ctx.outputs[0].mutable_as<int8_t>();
    const int ni = cell_.n_input, no = cell_.n_output, nc = cell_.n_cell;
    for (int b = 0; b < batches_; ++b) {
      for (int t = 0; t < steps_; ++t) {
        const size_t row = time_major_ ? static_cast<size_t>(t) * batches_ + b
                                       : static_cast<size_t>(b) * steps_ + t;
        int8_t* s = state + static_cast<size_t>(b) * no;
        int16_t* c = cell + static_cast<size_t>(b) * nc;
        if (edgetpu_)
          edgetpu_->step(cell_, in + row * ni, s, c);
        else
          cell_.step(in + row * ni, s, c);
        std::memcpy(out + row * no, s, static_cast<size_t>(no));
      }
    }
  }

 private:
  ops::IntegerLstmCell cell_;
  std::optional<ops::EdgeTpuLstmCell> edgetpu_;  // `edgetpu` rounding: the chip's program
  int batches_, steps_;
  bool time_major_;
};

std::unique_ptr<Kernel> make_sequence_lstm(const OpContext& ctx) {
  ctx.require(ctx.num_inputs() == 24 || ctx.num_inputs() == 20,
              cat("expects 20 or 24 inputs, has ", ctx.num_inputs()));
  ctx.require_outputs(1);
  const TensorView& input = ctx.input(kInputTensor);
  if (input.type() != TensorType::kInt8) return nullptr;  // float/hybrid LSTMs: another factory
  const auto options = ctx.options_or<container::SequenceLstmOptions>();
  for (int s = kLayerNorm; s < static_cast<int>(ctx.num_inputs()); ++s)
    ctx.require(!ctx.has_input(static_cast<size_t>(s)), "layer-normalized LSTMs are not supported");
  for (int s = kPeephole; s < kPeephole + 3; ++s)
    ctx.require(!ctx.has_input(static_cast<size_t>(s)), "peephole LSTMs are not supported");
  ctx.require(!ctx.has_input(kProjectionWeights) && !ctx.has_input(kProjectionBias),
              "LSTMs with a projection are not supported");
  ctx.require(options.activation == container::Activation::kTanh,
              "only the tanh cell activation is supported");

  ctx.require(input.rank() == 3, "input must be 3-D");
  const bool time_major = options.time_major;
  const int steps = time_major ? input.dim(0) : input.dim(1);
  const int batches = time_major ? input.dim(1) : input.dim(0);
  ops::IntegerLstmCell cell;
  cell.n_input = input.dim(2);
  const TensorView& w_out = ctx.input(kInputWeights + 3);
  const TensorView& r_out = ctx.input(kRecurrentWeights + 3);
  ctx.require(w_out.rank() == 2 && r_out.rank() == 2, "weights must be 2-D");
  cell.n_cell = w_out.dim(0);
  cell.n_output = r_out.dim(1);
  cell.cifg = !ctx.has_input(kInputWeights);
  ctx.require(cell.cifg == !ctx.has_input(kRecurrentWeights) && cell.cifg == !ctx.has_input(kBias),
              "input gate weights, recurrent weights and bias must be all present or all absent");

  const TensorView& state = ctx.input(kOutputState);
  const TensorView& cstate = ctx.input(kCellState);
  const TensorView& out = ctx.output(0);
  ctx.require(state.type() == TensorType::kInt8 && cstate.type() == TensorType::kInt16,
              "the integer LSTM needs an int8 output state and an int16 cell state");
  ctx.require(out.type() == TensorType::kInt8, "output must be int8");
  ctx.require(state.elements() == int64_t{batches} * cell.n_output &&
                  cstate.elements() == int64_t{batches} * cell.n_cell,
              "state sizes do not match batch x units");
  ctx.require(out.elements() == int64_t{batches} * steps * cell.n_output,
              "output size does not match batch x time x units");
  ctx.require(cell.n_input > 0 && cell.n_cell > 0 && cell.n_output > 0 && steps > 0 && batches > 0,
              "empty dimensions");
  ctx.require(cell.n_output == cell.n_cell, "without a projection, units must equal cells");
  ctx.require(!state.constant && !cstate.constant, "the states must be variable tensors");

  int cell_log2 = 0;
  ctx.require(checked_log2(cstate.scale(), &cell_log2) && cell_log2 <= -9,
              "cell state scale must be a power of two <= 2^-9");
  cell.cell_scale_log2 = cell_log2;
  ctx.require(15 + cell_log2 >= 0 && 15 + cell_log2 <= 6, "cell state scale out of range");

  // The hidden state's quantization comes from intermediate 4 (TFLite's
  // "effective_hidden_scale_intermediate"); the tensors live in the same array as the inputs.
  float hidden_scale = state.scale();
  int32_t hidden_zp = state.zero_point();
  if (ctx.op->intermediates.size() >= 5) {
    const int32_t idx = ctx.op->intermediates[4];
    ctx.require(idx >= 0, "intermediate 4 is missing");
    const container::Tensor* base = input.tensor - input.index;
    const container::Tensor& hidden = base[idx];
    ctx.require(!hidden.quantization.scale.empty() && !hidden.quantization.zero_point.empty(),
                "intermediate 4 (hidden state) has no quantization");
    hidden_scale = hidden.quantization.scale[0];
    hidden_zp = static_cast<int32_t>(hidden.quantization.zero_point[0]);
  }
  cell.hidden_zero_point = hidden_zp;
  // 2^-15 / s_hidden * 2^-15, formed in double and stored as float32 (as TFLite).
  cell.hidden_scale = quantize_multiplier(static_cast<double>(
      static_cast<float>(std::pow(2.0, -15) / hidden_scale * std::pow(2.0, -15))));

  if (options.cell_clip > 0.0f)
    cell.cell_clip = static_cast<int16_t>(
        std::min(std::max(options.cell_clip / cstate.scale(), -32768.0f), 32767.0f));

  const float gate_scale = static_cast<float>(std::pow(2.0, -12));  // Q3.12 gate inputs
  const float in_scale = input.scale();
  const float state_scale = state.scale();
  const int32_t in_zp = input.zero_point();
  const int32_t state_zp = state.zero_point();
  std::array<float, 4> input_weight_scales{}, recurrent_weight_scales{};
  for (int g = 0; g < 4; ++g) {
    if (cell.cifg && g == ops::IntegerLstmCell::kInput) continue;
    const TensorView& w = ctx.input(static_cast<size_t>(kInputWeights + g));
    const TensorView& r = ctx.input(static_cast<size_t>(kRecurrentWeights + g));
    const TensorView& b = ctx.input(static_cast<size_t>(kBias + g));
    ctx.require(w.type() == TensorType::kInt8 && r.type() == TensorType::kInt8 &&
                    b.type() == TensorType::kInt32,
                "weights must be int8 and biases int32");
    ctx.require(w.constant && r.constant && b.constant && w.data && r.data && b.data,
                "weights and biases must be constant");
    ctx.require(w.rank() == 2 && w.dim(0) == cell.n_cell && w.dim(1) == cell.n_input,
                "input weights must be [cells, inputs]");
    ctx.require(r.rank() == 2 && r.dim(0) == cell.n_cell && r.dim(1) == cell.n_output,
                "recurrent weights must be [cells, units]");
    ctx.require(b.elements() == cell.n_cell, "biases must have one value per cell");
    ctx.require(!w.per_channel() && !r.per_channel(), "per-channel LSTM weights are not supported");
    cell.input_weights[g] = w.as<int8_t>();
    cell.recurrent_weights[g] = r.as<int8_t>();
    // Effective biases: bias + (-zp) * row sum, so the products can use raw int8 values.
    auto& ib = cell.input_bias[g];
    auto& rb = cell.recurrent_bias[g];
    ib.assign(b.as<int32_t>(), b.as<int32_t>() + cell.n_cell);
    rb.assign(static_cast<size_t>(cell.n_cell), 0);
    for (int row = 0; row < cell.n_cell; ++row) {
      int32_t sw = 0, sr = 0;
      for (int c = 0; c < cell.n_input; ++c) sw += w.as<int8_t>()[row * cell.n_input + c];
      for (int c = 0; c < cell.n_output; ++c) sr += r.as<int8_t>()[row * cell.n_output + c];
      ib[static_cast<size_t>(row)] += sw * -in_zp;
      rb[static_cast<size_t>(row)] += sr * -state_zp;
    }
    // Effective scales in float32, in TFLite's operation order.
    const float s_in = w.scale() * in_scale / gate_scale;
    const float s_rec = r.scale() * state_scale / gate_scale;
    cell.input_scale[g] = quantize_multiplier(static_cast<double>(s_in));
    cell.recurrent_scale[g] = quantize_multiplier(static_cast<double>(s_rec));
    input_weight_scales[g] = w.scale();
    recurrent_weight_scales[g] = r.scale();
  }
  // The chip's arithmetic (docs/host_ops.md "The chip's LSTM"). A CIFG LSTM keeps TFLite's: no
  // compiled program of one has been seen, so its input gate's form on the chip is unknown.
  std::optional<ops::EdgeTpuLstmCell> edgetpu;
  if (ctx.rounding == Rounding::kEdgeTpu && !cell.cifg)
    edgetpu = ops::make_edgetpu_lstm(cell, in_scale, state_scale, hidden_scale, hidden_zp,
                                     cstate.scale(), input_weight_scales, recurrent_weight_scales);
  return std::make_unique<LstmKernel>(std::move(cell), std::move(edgetpu), batches, steps,
                                      time_major);
}

}  // namespace

void register_sequence_lstm(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kUnidirectionalSequenceLstm, &make_sequence_lstm);
}

}  // namespace tinycoral::host
