// The on-tile softmax of edgetpu_compiler 16.0 and Google's gen2021 programs (docs/chip_ops.md
// sections 6.1, 6.2): the maximum, then a chain of small ops in 16-bit arithmetic -- shift by the
// maximum, exponentials from the non-linear unit, their sum and its reciprocal square root, the
// reciprocal, and the scaled probabilities. These ops are a few hundred steps
// each, so they run on one plain step loop (no batching): every class states what one step reads
// and what an emitted group writes, and the evidence.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "chip/ops/mac_engine.h"
#include "chip/ops/nlu.h"
#include "chip/ops/op_class_table.h"
#include "chip/ops/requantize.h"
#include "chip/ops/step_loop.h"

namespace tinycoral::chip::ops {
namespace {

// ---- The shift constant (opcode 1, dp 0, cfg0 0, cfg2 0x12, cfg3 6) -------------------------
// One byte x of `in` (the broadcast maximum m, in.hmode 1) times the lane of a zero row with w_zp
// 1: acc[c] = (x - in_zp)(0 - 1) = -m in every column. The group goes out twice: as int32 partial
// sums into the `psum` row (psum.sel 1), which the next wideToNarrow (a bias load, tail bit 867)
// turns into the bias of the subtraction, and requantized through `out`.
void run_shift_constant(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out), psum(op.psum);
  std::array<int64_t, 64> acc{};
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(0);
    const int32_t x = *env.narrow_read(in.address(), 1);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    for (uint32_t c = 0; c < columns; ++c) acc[c] += (x - op.in_zp) * (row[4 * c + lane] - op.w_zp);
    in.next();
    par.next();
    if (!last) return;
    uint8_t* sums = env.wide_write(psum.address() & ~int64_t{3}, kWideRowBytes);
    for (uint32_t c = 0; c < columns; ++c) {
      const int32_t v = steps::saturate32(acc[c]);
      std::memcpy(sums + 4 * c, &v, 4);
    }
    psum.next();
    const OutputStage stage = steps::stage_of(op);
    for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
      uint8_t* dst = env.narrow_write(out.address(), 4);
      for (uint32_t b = 0; b < 4; ++b)
        dst[b] = requantize(steps::saturate32(acc[4 * w + b]), stage);
      out.next();
    }
  });
}

// ---- The subtraction (opcode 1, dp 1, cfg0 0x07, cfg2 0x16, reduce 1) -----------------------
// ADD's 16-bit step (add.cpp) with the weight zero point applied: each step reads two bytes of
// `in` (zero-extended, in.hmode 2) and a row of 16-bit weight pairs; acc[c] += x0 (W0[c] - w_zp)
// + x1 (W1[c] - w_zp). Then bias (-m from the shift constant) and the output stage.
void run_halfword_mac(const OpInstr& op, OpEnv& env) {
  const OutputStage stage = steps::stage_of(op);
  steps::each_halfword_mac(op, env, [&](int64_t acc, uint32_t col) {
    int64_t value = acc + op.offset;
    if (op.cfg4) {
      int32_t bias;
      std::memcpy(&bias, env.bias_store(kBiasStoreBase + 4 * col, 4), 4);
      value += bias;
    }
    return requantize(steps::saturate32(value), stage);
  });
}

// ---- Exponentials (opcode 1, dp 0, cfg0 0x25, NLU mode 5) ------------------------------------
// The requantize step (one input word times the identity row: acc[c] = x[c] - in_zp), scaled and
// clamped as usual, then the spline loaded by the last 0x19 (65535 e^x on [-13.04, 0]); the
// result is rounded half to even and written as an unsigned 16-bit value, so 4 columns take two
// output words.
void run_exponential(const OpInstr& op, OpEnv& env) {
  if (!env.nlu().loaded) env.fail_op("exponential op before any NLU table load (0x19)");
  const uint32_t columns = uint32_t{op.out_ch} + 1;
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
    for (uint32_t c = 0; c < columns; ++c) {
      float v = round_half_even(
          evaluate_spline(env.nlu(), scale_and_clamp(steps::saturate32(acc[c]), stage)));
      v = std::clamp(v, 0.0f, 65535.0f);
      values[c] = static_cast<uint16_t>(v);
    }
    for (uint32_t w = 0; w < (columns + 1) / 2; ++w) {
      std::memcpy(env.narrow_write(out.address(), 4), values + 2 * w, 4);
      out.next();
    }
  });
}

// ---- Sum of exponentials and its reciprocal square root (opcode 3, dp 1, cfg0 0x60, NLU 7) ----
// `par` walks the 4-row FIFO a narrowToWide filled one word (two 16-bit exponentials) per fill;
// like MUL's operand b (isa.md 2.1.5) the word in column 0 serves every column. A step adds both
// 16-bit halves, so acc = S, the sum of all exponentials. Then v = f32(S) x mult (2^-16) and the
// non-linear unit's reciprocal square root with range reduction: v = m 4^e, m in [1, 4), r =
// spline(m) 2^-e, rounded half to even, saturated to 16 bits; each column's r is a 16-bit output.
float rsqrt_spline(const NluTable& table, float v) {
  if (!(v > 0.0f)) return 65535.0f;
  if (std::isinf(v)) return 0.0f;
  int e = 0;
  float m = v;
  while (m >= 4.0f) m *= 0.25f, ++e;
  while (m < 1.0f) m *= 4.0f, --e;
  return std::ldexp(evaluate_spline(table, m), -e);
}

void run_sum_rsqrt(const OpInstr& op, OpEnv& env) {
  if (!env.nlu().loaded) env.fail_op("reciprocal square root before any NLU table load (0x19)");
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker par(op.par), out(op.out);
  int64_t sum = 0;
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) sum = 0;
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    sum += steps::lane16(row, 0, 0) + steps::lane16(row, 0, 2);
    par.next();
    if (!last) return;
    const int32_t acc = static_cast<int32_t>(sum);
    const float v = static_cast<float>(acc) * op.mult;
    uint16_t values[64] = {};
    for (uint32_t c = 0; c < columns; ++c) values[c] = steps::to_u16(rsqrt_spline(env.nlu(), v));
    steps::write_halves(env, out, values, columns);
  });
}

// ---- 16-bit products (opcode 1, dp 4, cfg0 0x60, cfg2 0x1e, NLU bits 4) ---------------------
// MUL step 1 (isa.md 2.1.5) on 16-bit values: `in` gives one 16-bit value (in.hmode 2), `par` the
// 16-bit lane (unit % 4: 0 = bytes 0-1, 2 = bytes 2-3) of the FIFO word in column 0, which serves
// every column; acc = (x - in_zp)(y - w_zp), then the output stage to 16 bits: each step writes
// its 4 columns as two 16-bit words. The softmax squares r: r^2 2^-16 clamped to [0, 32768].
void run_product16(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  const OutputStage stage = steps::stage_of(op);
  int64_t acc = 0;
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc = 0;
    uint16_t x;
    std::memcpy(&x, env.narrow_read(in.address(), 2), 2);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    acc += (int64_t{x} - op.in_zp) * (int64_t{steps::lane16(row, 0, lane)} - op.w_zp);
    in.next();
    par.next();
    if (!last) return;
    uint16_t values[64] = {};
    const int32_t a32 = static_cast<int32_t>(static_cast<uint32_t>(acc));
    for (uint32_t c = 0; c < columns; ++c) values[c] = steps::to_u16(scale_and_clamp(a32, stage));
    steps::write_halves(env, out, values, columns);
  });
}

// ---- 16-bit lane-select pack (opcode 1, dp 2, cfg0 0, cfg2 0xe, cfg3 6, NLU bits 4) ----------
// MUL step 2 (isa.md 2.1.5) on 16-bit values: step i of a pass of loop0 reads one word of `in`
// and lane i of the identity row, so column c takes the low 16 bits of the word of step c; each
// pass of loop0 is one group, written as 16-bit values through the output stage (mult 1, clamps
// inf). The softmax's word 693 is one pass (loops (4)); the Keras LSTM's 1448 packs its 20
// products as 5 passes of 4 (docs/chip_ops.md 7).
void run_pack16(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  const OutputStage stage = steps::stage_of(op);
  std::array<int64_t, 64> acc{};
  const uint64_t per_group = uint64_t{op.loops[0]} + 1;
  uint64_t step = 0;
  steps::each_step(op, env, [&](bool, bool, uint64_t fill) {
    uint16_t x;
    std::memcpy(&x, env.narrow_read(in.address(), 2), 2);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    for (uint32_t c = 0; c < columns; ++c)
      acc[c] += (int32_t{x} - op.in_zp) * (int32_t{row[4 * c + lane]} - op.w_zp);
    in.next();
    par.next();
    if (++step % per_group != 0) return;
    uint16_t values[64] = {};
    for (uint32_t c = 0; c < columns; ++c)
      values[c] = steps::to_u16(scale_and_clamp(steps::saturate32(acc[c]), stage));
    steps::write_halves(env, out, values, columns);
    acc.fill(0);
  });
}

// ---- Probabilities (opcode 1, dp 1, cfg0 0x60, cfg2 0x1e, NLU bits 0) ------------------------
// `in` gives a word holding the 16-bit reciprocal in both halves, `par` a 16-bit lane of a FIFO
// row whose columns hold 16-bit exponentials (the 16-bit transposing narrowToWide): column c
// gives acc = (x - in_zp)(e_c - w_zp) with x the in half of the lane; then the usual output stage
// (mult 2^-23, clamps [0, 255]) to bytes, one output word per step.
void run_scale16(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  const OutputStage stage = steps::stage_of(op);
  steps::each_step(op, env, [&](bool, bool, uint64_t fill) {
    const uint8_t* x = env.narrow_read(in.address(), 4);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    uint16_t xv;
    std::memcpy(&xv, x + (lane & 2), 2);
    uint8_t bytes[64] = {};
    for (uint32_t c = 0; c < columns; ++c) {
      const int64_t a = (int64_t{xv} - op.in_zp) * (int64_t{steps::lane16(row, c, lane)} - op.w_zp);
      bytes[c] = requantize(static_cast<int32_t>(static_cast<uint32_t>(a)), stage);
    }
    in.next();
    par.next();
    for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
      std::memcpy(env.narrow_write(out.address(), 4), bytes + 4 * w, 4);
      out.next();
    }
  });
}

// ---- Per-word constants (opcode 1, dp 2, cfg0 0x67, reduce 0; NLU bits 0 or 5) --------------
// gen2021 MobileNet's softmax over 1001 classes padded to 64 per tile (words 2647, 3818, 3882):
// the requantize step (one word of `in` times the identity row) where every output word has
// its own bias (cfg4) and, with pc_mult, its own multipliers: word w's column c at bias-store
// byte 0x100 + 16 w + 4 c (and the multiplier plane at kMultStoreBase). Loop 1 re-reads the
// same word (in stride 0) and rewrites the same output. With NLU 5 the result is the
// exponential as 16-bit values (two words), as in run_exponential.
void run_per_word(const OpInstr& op, OpEnv& env) {
  const bool spline = op.nlu_mode == 5;
  if (spline && !env.nlu().loaded) env.fail_op("exponential op before any NLU table load (0x19)");
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  const auto in_strides = op.in.strides();
  std::array<uint32_t, kLoops> c{};
  steps::each_step(op, env, [&](bool, bool, uint64_t fill) {
    uint64_t group = 0, scale = 1;
    for (int k = 0; k < kLoops; ++k)
      if (in_strides[k] != 0) group += c[k] * scale, scale *= uint64_t{op.loops[k]} + 1;
    for (int k = 0; k < kLoops; ++k) {
      if (c[k] < op.loops[k]) {
        ++c[k];
        break;
      }
      c[k] = 0;
    }
    const uint8_t* x = env.narrow_read(in.address(), 4);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    uint16_t values[64] = {};
    uint8_t bytes[64] = {};
    for (uint32_t col = 0; col < columns; ++col) {
      int64_t sum = 0;
      for (uint32_t b = 0; b < 4; ++b)
        sum += (int32_t{x[b]} - op.in_zp) * (int32_t{row[4 * col + b]} - op.w_zp);
      const uint64_t at = 4 * (group * columns + col);
      if (op.cfg4) {
        int32_t bias;
        std::memcpy(&bias, env.bias_store(kBiasStoreBase + static_cast<int64_t>(at), 4), 4);
        sum += bias;
      }
      const int32_t acc = steps::saturate32(sum + op.offset);
      OutputStage stage = steps::stage_of(op);
      if (op.pc_mult)
        std::memcpy(&stage.mult, env.bias_store(kMultStoreBase + static_cast<int64_t>(at), 4), 4);
      if (spline)
        values[col] = steps::to_u16(evaluate_spline(env.nlu(), scale_and_clamp(acc, stage)));
      else
        bytes[col] = requantize(acc, stage);
    }
    in.next();
    par.next();
    if (spline) {
      steps::write_halves(env, out, values, columns);
    } else {
      for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
        std::memcpy(env.narrow_write(out.address(), 4), bytes + 4 * w, 4);
        out.next();
      }
    }
  });
}

// ---- The softmax maximum (opcode 2, dp 1, cfg0 0x60, reduce 0b11; docs/chip_ops.md 6.1) -------
// Per column, the maximum of the lane bytes (lane = unit % 4 of the `par` row or FIFO fill) over
// every step; then + offset and the output stage. As MAX_POOL_2D (isa.md 2.2) the maximum runs on
// the bytes themselves: gen2021 MobileNet's (word 3262: w_zp 96, offset -96, out_zp 96) must give
// the largest logit back.
void run_maximum(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker par(op.par), out(op.out);
  std::array<int64_t, 64> acc{};
  const OutputStage stage = steps::stage_of(op);
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(-1);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    const int lane = static_cast<int>(par.address() & 3);
    for (uint32_t c = 0; c < columns; ++c) acc[c] = std::max<int64_t>(acc[c], row[4 * c + lane]);
    par.next();
    if (!last) return;
    for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
      uint8_t* dst = env.narrow_write(out.address(), 4);
      for (uint32_t b = 0; b < 4; ++b)
        dst[b] = requantize(steps::saturate32(int64_t{acc[4 * w + b]} + op.offset), stage);
      out.next();
    }
  });
}

// ---- 16-bit word times row (opcode 1, dp 1, cfg0 0x65, cfg2 0xe, NLU bits 4) -----------------
// gen2021 MobileNet word 9537: the word holding the last class's exponential and the first
// padding one (relayed from tile 15) times the identity row, with per-column multipliers (1, 0)
// from the bias load before it: acc[c] = sum_h x16[h] W16[c][h], then the output stage to 16 bits,
// so the padding half becomes 0. Columns (out_ch + 1) go out as 16-bit values.
void run_word16_times_row(const OpInstr& op, OpEnv& env) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  std::array<int64_t, 64> acc{};
  uint64_t group = 0;
  steps::each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(0);
    const uint8_t* x = env.narrow_read(in.address(), 4);
    const uint8_t* row = steps::par_row(op, env, par.address(), fill);
    for (uint32_t c = 0; c < columns; ++c)
      for (uint32_t h = 0; h < 2; ++h)
        acc[c] += (int64_t{steps::lane16(x, 0, 2 * static_cast<int>(h))} - op.in_zp) *
                  (int64_t{steps::lane16(row, c, 2 * static_cast<int>(h))} - op.w_zp);
    in.next();
    par.next();
    if (!last) return;
    uint16_t values[64] = {};
    for (uint32_t c = 0; c < columns; ++c) {
      const uint64_t at = 4 * (group * columns + c);
      int64_t a = acc[c] + int64_t{op.offset};
      if (op.cfg4) {
        int32_t bias;
        std::memcpy(&bias, env.bias_store(kBiasStoreBase + static_cast<int64_t>(at), 4), 4);
        a += bias;
      }
      OutputStage stage = steps::stage_of(op);
      if (op.pc_mult)
        std::memcpy(&stage.mult, env.bias_store(kMultStoreBase + static_cast<int64_t>(at), 4), 4);
      values[c] = steps::to_u16(scale_and_clamp(steps::saturate32(a), stage));
    }
    steps::write_halves(env, out, values, columns);
    ++group;
  });
}

bool cfg2_1e(const OpInstr& op) { return op.cfg2 == 0x1e; }
bool cfg2_0e(const OpInstr& op) { return op.cfg2 == 0xe; }
bool pack16_fields(const OpInstr& op) { return op.cfg2 == 0xe && op.cfg3 == 6; }

bool shift_fields(const OpInstr& op) { return op.cfg2 == 0x12 && op.cfg3 == 6; }
bool subtract_fields(const OpInstr& op) { return op.cfg2 == 0x16; }

}  // namespace

const ClassEntry kSoftmaxShiftConstant{
    1, 0, {0x00}, 1, 0, 0, shift_fields, {"softmax shift constant", run_shift_constant, nullptr}};
const ClassEntry kSoftmaxSubtract{
    1, 1, {0x07},          1,
    1, 0, subtract_fields, {"softmax subtraction (16-bit)", run_halfword_mac, nullptr}};
const ClassEntry kSoftmaxExponential{
    1, 0, {0x25}, 1, 0, 5, nullptr, {"softmax exponential", run_exponential, nullptr}};
const ClassEntry kMaxPoolDp1{
    2, 1, {0x60}, 1, 0b11, 0, nullptr, {"softmax MAX", run_maximum, steps::fills_outside_loop0}};
const ClassEntry kSoftmaxWord16{
    1, 1, {0x65}, 1, 0, 4, cfg2_0e, {"16-bit word times row", run_word16_times_row, nullptr}};
const ClassEntry kSoftmaxPerWord{
    1, 2, {0x67}, 1, 0, 0, nullptr, {"per-word constants (gen2021)", run_per_word, nullptr}};
const ClassEntry kSoftmaxPerWordExponential{
    1, 2, {0x67}, 1, 0, 5, nullptr, {"per-word exponential (gen2021)", run_per_word, nullptr}};
const ClassEntry kSoftmaxSumRsqrt{
    3,
    1,
    {0x60},
    1,
    0b11,
    7,
    subtract_fields,
    {"softmax sum, reciprocal square root", run_sum_rsqrt, steps::fills_outside_loop0}};
const ClassEntry kSoftmaxProduct16{
    1, 4, {0x60}, 1, 0, 4, cfg2_1e, {"16-bit product", run_product16, steps::fills_outside_loop0}};
const ClassEntry kSoftmaxPack16{
    1, 2, {0x00}, 1, 0, 4, pack16_fields, {"16-bit lane-select pack", run_pack16, nullptr}};
const ClassEntry kSoftmaxScale16{
    1,       1,
    {0x60},  1,
    0,       0,
    cfg2_1e, {"softmax probabilities (16-bit scale)", run_scale16, steps::fills_outside_loop0}};

}  // namespace tinycoral::chip::ops
