// The Keras LSTM's per-step op classes (Google's gen2021 keras_lstm_mnist_ptq, docs/chip_ops.md
// section 7): the gates as ADD's 16-bit step followed by the non-linear unit, and the cell's
// 16-bit products and sums. They run on the plain step loop (step_loop.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "chip/field_bits.h"
#include "chip/ops/nlu.h"
#include "chip/ops/op_class_table.h"
#include "chip/ops/requantize.h"
#include "chip/ops/step_loop.h"
#include "isa/isa.h"

namespace tinycoral::chip::ops {
namespace {

// A field of the op's own instruction by its ISA-table name (the classes' rarely used fields).
uint32_t field(const OpInstr& op, const Field& f) {
  const FieldBits b{op.source->bytes, op.source->opcode()};
  return static_cast<uint32_t>(b.u(f));
}

// Bits 2095-2096 (`x2095`): 3 on the two ops whose spline is TANH's one-sided table (breakpoints
// all positive): the unit evaluates it on |x| and gives the result x's sign.
bool odd_spline(const OpInstr& op) {
  static const Field x2095(isa::kTensorOp, "x2095");
  return field(op, x2095) == 3;
}

// 16-bit values carry a zero point in steps of 4096: bits 2089-2092 (`x2089`) give the output's
// (written as round(y) + zp, the clamps being relative to it), bits 1866-1869 (`x1866`) those of
// the 16-bit `par` operand. The cell state's 32768 is the I/O layer's own (SIGNED_FIXED_POINT16,
// zp 32768); evidence in docs/chip_ops.md 7.
const Field& x2089() {
  static const Field f(isa::kTensorOp, "x2089");
  return f;
}
const Field& x1866() {
  static const Field f(isa::kTensorOp, "x1866");
  return f;
}
int32_t out_zp16(const OpInstr& op) { return static_cast<int32_t>(field(op, x2089()) << 12); }
int32_t par_zp16(const OpInstr& op) { return static_cast<int32_t>(field(op, x1866()) << 12); }

uint16_t to_u16_zp(float y, int32_t zp) {
  if (std::isnan(y)) return static_cast<uint16_t>(zp);
  const float r = round_half_even(y) + static_cast<float>(zp);
  return static_cast<uint16_t>(std::clamp(r, 0.0f, 65535.0f));
}

uint16_t u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

float spline(const OpInstr& op, OpEnv& env, float x) {
  if (!odd_spline(op)) return evaluate_spline(env.nlu(), x);
  const float y = evaluate_spline(env.nlu(), std::fabs(x));
  return x < 0 ? -y : y;
}

// ---- Gates: ADD's 16-bit step, then the spline (opcode 1, dp 2, cfg0 0x09, cfg2 0x16, NLU 1) --
// Each step reads two bytes of `in` (zero-extended) and a row of 16-bit weight pairs (the 4 rows
// at 0x6c that the mesh fills before the op build): acc[c] += x0 W0[c] + x1 W1[c]; after the two
// reduced loops (half, operand) acc = w1 a + w2 b, + offset (-(w1 z1 + w2 z2)); then f32(acc) x
// mult, the clamps, the spline loaded by the last 0x19, round half to even, + out_zp.
void run_gate(const OpInstr& op, OpEnv& env) {
  if (!env.nlu().loaded) env.fail_op("LSTM gate before any NLU table load (0x19)");
  const OutputStage stage = steps::stage_of(op);
  steps::each_halfword_mac(op, env, [&](int64_t acc, uint32_t) {
    const int32_t a = steps::saturate32(acc + op.offset);
    return to_output_byte(spline(op, env, scale_and_clamp(a, stage)), op.out_zp);
  });
}

// ---- Products (opcode 1, dp 4, cfg0 0x60; MUL step 1 with 8- or 16-bit operands) -------------
// MUL step 1 (isa.md 2.1.5): one element x of `in` times the lane (unit % 4) of the FIFO word in
// column 0, which serves every column; acc = (x - in_zp)(y - zp_y); one element per step, with
// a partial last round (step_loop.h). cfg2 6: 8-bit elements (in.hmode 1, lane bytes, zp_y =
// w_zp); cfg2 0x1e: 16-bit elements (in.hmode 2, 16-bit lanes, zp_y = x1866 << 12). With NLU bit
// 4 the 4 equal columns go out as 16-bit values (two words per step; x2089 << 12 added), else as
// bytes (one word). Words 1423 (i x g), 1489 (f x c) and 1836 (o x tanh c = h).
void run_lstm_product(const OpInstr& op, OpEnv& env) {
  const bool wide = op.cfg2 == 0x1e;
  const bool out16 = (op.nlu_mode & 4) != 0;
  const int32_t zp_y = wide ? par_zp16(op) : op.w_zp;
  const int32_t zp_out = out_zp16(op);
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  const OutputStage stage = steps::stage_of(op);
  steps::each_step(op, env, [&](bool, bool, uint64_t fill) {
    const int64_t x =
        wide ? u16(env.narrow_read(in.address(), 2)) : *env.narrow_read(in.address(), 1);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    const int64_t y = wide ? steps::lane16(row, 0, lane) : row[lane];
    const int32_t acc = steps::saturate32((x - op.in_zp) * (y - zp_y) + op.offset);
    in.next();
    par.next();
    if (out16) {
      uint16_t values[64] = {};
      const uint16_t v = to_u16_zp(scale_and_clamp(acc, stage), zp_out);
      for (uint32_t c = 0; c < columns; ++c) values[c] = v;
      steps::write_halves(env, out, values, columns);
    } else {
      const uint8_t b = requantize(acc, stage);
      for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
        std::memset(env.narrow_write(out.address(), 4), b, 4);
        out.next();
      }
    }
  });
}

// ---- Widening (opcode 1, dp 0, cfg0 0x25, NLU bits 4) -----------------------------------------
// The requantize step (one `in` word times the identity row, docs/chip_ops.md 4.6) with 16-bit
// results: the gates' bytes (mult 1, clamps [0, 255]) become 16-bit values, two words per input
// word, for the 16-bit products (words 1470: f, 1817: o).
void run_widen(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  const int32_t zp_out = out_zp16(op);
  TtuWalker in(op.in), par(op.par), out(op.out);
  std::array<int64_t, 64> acc{};
  const OutputStage stage = steps::stage_of(op);
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(0);
    const uint8_t* x = env.narrow_read(in.address(), 4);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    for (uint32_t c = 0; c < columns; ++c)
      for (uint32_t b = 0; b < 4; ++b)
        acc[c] += (int32_t{x[b]} - op.in_zp) * (int32_t{row[4 * c + b]} - op.w_zp);
    in.next();
    par.next();
    if (!last) return;
    uint16_t values[64] = {};
    for (uint32_t c = 0; c < columns; ++c)
      values[c] = to_u16_zp(scale_and_clamp(steps::saturate32(acc[c] + op.offset), stage), zp_out);
    steps::write_halves(env, out, values, columns);
  });
}

// ---- 16-bit ADD (opcode 1, dp 2, cfg0 0x09, cfg2 0x1e, reduce 0b11) -----------------------------
// ADD on 16-bit operands: each step reads one 16-bit value x of `in` (in.hmode 2) and the 16-bit
// lane (unit % 4: bytes 0-1 or 2-3) of every column of a `par` row: acc[c] += x W[c][lane]. The
// program's rows (mesh fills 1536-1560, narrowToWide 1566) hold (32767, 8192) in column r of row r
// and 0 elsewhere, and `par` reads lane 0 for operand 1 (f c, zp 32768) and lane 2 for operand 2
// (i g, zp 16384, scale 2/32767 = 8192/32767 of the cell's): offset -(32767 32768 + 8192 16384)
// = -1207926784, mult 1/32767, so y = f c + i g in cell steps. NLU bit 0 adds the spline (word
// 1798: tanh of the new cell, odd, 16383.5 tanh); the result is a 16-bit value + x2089 << 12, two
// words per 4 columns.
void run_add16(const OpInstr& op, OpEnv& env) {
  const bool spline_on = (op.nlu_mode & 1) != 0;
  if (spline_on && !env.nlu().loaded) env.fail_op("16-bit ADD with a spline before any NLU load");
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  const int32_t zp_out = out_zp16(op);
  TtuWalker in(op.in), par(op.par), out(op.out);
  std::array<int64_t, 64> acc{};
  const OutputStage stage = steps::stage_of(op);
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(0);
    const int64_t x = u16(env.narrow_read(in.address(), 2));
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    for (uint32_t c = 0; c < columns; ++c)
      acc[c] += x * int64_t{steps::half(row + 4 * c + (lane & 2))};
    in.next();
    par.next();
    if (!last) return;
    uint16_t values[64] = {};
    for (uint32_t c = 0; c < columns; ++c) {
      float y = scale_and_clamp(steps::saturate32(acc[c] + op.offset), stage);
      if (spline_on) y = spline(op, env, y);
      values[c] = to_u16_zp(y, zp_out);
    }
    steps::write_halves(env, out, values, columns);
  });
}

bool gate_fields(const OpInstr& op) { return op.cfg2 == 0x16; }
bool add16_fields(const OpInstr& op) { return op.cfg2 == 0x1e; }
bool product8_fields(const OpInstr& op) { return op.cfg2 == 6 && op.cfg3 == 7; }
// 16-bit products with a zero point on either side (the softmax's have none: softmax.cpp).
bool product16_fields(const OpInstr& op) {
  return op.cfg2 == 0x1e && (field(op, x1866()) != 0 || field(op, x2089()) != 0);
}

}  // namespace

const ClassEntry kLstmGate{1, 2, {0x09}, 1, 0b11, 1, gate_fields, {"LSTM gate", run_gate, nullptr}};
const ClassEntry kLstmAdd16{1,    2, {0x09},       1,
                            0b11, 4, add16_fields, {"16-bit ADD", run_add16, nullptr}};
const ClassEntry kLstmAdd16Spline{
    1, 2, {0x09}, 1, 0b11, 5, add16_fields, {"16-bit ADD, spline", run_add16, nullptr}};
const ClassEntry kLstmProduct8{
    1,
    4,
    {0x60},
    1,
    0,
    4,
    product8_fields,
    {"byte product, 16-bit out", run_lstm_product, steps::fills_outside_loop0}};
const ClassEntry kLstmProduct16{
    1,
    4,
    {0x60},
    1,
    0,
    4,
    product16_fields,
    {"16-bit product (zero points)", run_lstm_product, steps::fills_outside_loop0}};
const ClassEntry kLstmProduct16To8{
    1, 4, {0x60},       1,
    0, 0, add16_fields, {"16-bit product, byte out", run_lstm_product, steps::fills_outside_loop0}};
const ClassEntry kLstmWiden{1, 0, {0x25},  1,
                            0, 4, nullptr, {"widening requantize", run_widen, nullptr}};

}  // namespace tinycoral::chip::ops
