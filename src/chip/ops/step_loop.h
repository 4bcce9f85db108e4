// The plain step loop of the small 16-bit op classes (the on-tile softmax, softmax.cpp; the
// LSTM's gates and cell, lstm.cpp): ops of a few hundred steps that run without the engine's
// batching, one main-loop step at a time, with the helpers they share.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "chip/ops/requantize.h"
#include "chip/tile.h"

namespace tinycoral::chip::ops::steps {

// The main loop nest walked step by step: f(first, last, fill) per step, where `first` / `last`
// say whether every reduced loop is at its first / last iteration and `fill` is the mixed-radix
// index of the loops outside loop0 (the FIFO fill the step reads, as for the softmax maximum).
// A partial last round (`loop_last`, bits 174-190: enable bit 14, count - 1 in bits 0-13) runs
// loop0 only that far once every outer loop is at its last iteration: gen2021 MobileNet's 1001
// classes are 251 words over 4 FIFO rows x 63 rounds (word 3262, loop_last 0x4002), their 501
// exponential words 4 x 126 (word 9970, 0x4000).
template <typename F>
inline void each_step(const OpInstr& op, OpEnv& env, F f) {
  std::array<uint32_t, kLoops> c{};
  uint64_t steps = 1;
  for (int k = 0; k < kLoops; ++k) steps *= uint64_t{op.loops[k]} + 1;
  if (steps > (uint64_t{1} << 22))
    env.fail_op(cat("main loop of ", steps, " steps exceeds the softmax ops' step bound"));
  const bool partial = (op.rsv174 >> 14) & 1u;
  const uint32_t last_round = partial ? std::min(op.rsv174 & 0x3fffu, op.loops[0]) : op.loops[0];
  for (uint64_t s = 0; s < steps; ++s) {
    bool outer_last = true;
    for (int k = 1; k < kLoops; ++k) outer_last &= c[k] == op.loops[k];
    const uint32_t loop0_last = outer_last ? last_round : op.loops[0];
    if (c[0] <= loop0_last) {
      bool first = true, last = true;
      uint64_t fill = 0, scale = 1;
      for (int k = 0; k < kLoops; ++k) {
        if ((op.reduce_mask >> k) & 1u) {
          first &= c[k] == 0;
          last &= c[k] == (k == 0 ? loop0_last : op.loops[k]);
        }
        if (k > 0) {
          fill += c[k] * scale;
          scale *= uint64_t{op.loops[k]} + 1;
        }
      }
      f(first, last, fill);
    }
    for (int k = 0; k < kLoops; ++k) {
      if (c[k] < op.loops[k]) {
        ++c[k];
        break;
      }
      c[k] = 0;
    }
  }
}

// The `par` row of a step and its lane (unit % 4): resident wide memory, or fill `fill` of a FIFO.
inline const uint8_t* par_row(const OpInstr& op, OpEnv& env, int64_t unit, uint64_t fill) {
  const int64_t row = unit & ~int64_t{3};
  if ((op.par_fifo & 0x1fffu) != 0) return env.par_fifo_row(static_cast<uint32_t>(fill), row);
  return env.wide_read(row, kWideRowBytes);
}

inline int16_t half(const uint8_t* p) {
  int16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// ADD's 16-bit step with the weight zero point (the softmax's subtraction, the LSTM's gates): each
// step reads two bytes of `in` (zero-extended) and a row of 16-bit weight pairs; acc[c] +=
// x0 (W0[c] - w_zp) + x1 (W1[c] - w_zp). At the end of a reduced round each column's byte is
// `out_byte(acc[c], c)`, written four to an output word.
template <typename OutByte>
inline void each_halfword_mac(const OpInstr& op, OpEnv& env, OutByte out_byte) {
  const uint32_t columns = uint32_t{op.out_ch} + 1;
  TtuWalker in(op.in), par(op.par), out(op.out);
  std::array<int64_t, 64> acc{};
  each_step(op, env, [&](bool first, bool last, uint64_t fill) {
    if (first) acc.fill(0);
    const uint8_t* x = env.narrow_read(in.address(), 2);
    const uint8_t* row = par_row(op, env, par.address(), fill);
    for (uint32_t c = 0; c < columns; ++c)
      acc[c] += int32_t{x[0]} * (half(row + 4 * c) - op.w_zp) +
                int32_t{x[1]} * (half(row + 4 * c + 2) - op.w_zp);
    in.next();
    par.next();
    if (!last) return;
    for (uint32_t w = 0; w < (columns + 3) / 4; ++w) {
      uint8_t* dst = env.narrow_write(out.address(), 4);
      for (uint32_t b = 0; b < 4; ++b) dst[b] = out_byte(acc[4 * w + b], 4 * w + b);
      out.next();
    }
  });
}

// Accumulator plus bias and offset, saturated to int32: gen2021 MobileNet's per-word biases push
// the padding classes down with -2^31 (word 2647), which must leave them at the minimum; a
// wrapping add would make them the largest values of the maximum and the sum.
inline int32_t saturate32(int64_t v) {
  return static_cast<int32_t>(std::clamp<int64_t>(v, std::numeric_limits<int32_t>::min(),
                                                  std::numeric_limits<int32_t>::max()));
}

inline OutputStage stage_of(const OpInstr& op) {
  return {op.mult, op.clamp_min, op.clamp_max, op.out_zp};
}

inline uint16_t to_u16(float v) {
  if (std::isnan(v)) return 0;
  return static_cast<uint16_t>(std::clamp(round_half_even(v), 0.0f, 65535.0f));
}

inline void write_halves(OpEnv& env, TtuWalker& out, const uint16_t* values, uint32_t columns) {
  for (uint32_t w = 0; w < (columns + 1) / 2; ++w) {
    std::memcpy(env.narrow_write(out.address(), 4), values + 2 * w, 4);
    out.next();
  }
}

inline uint16_t lane16(const uint8_t* row, uint32_t column, int lane) {
  uint16_t v;
  std::memcpy(&v, row + 4 * column + (lane & 2), 2);
  return v;
}

// FIFO fills an op on this loop consumes (OpClass::par_fifo_fills): one per step of the loops
// outside loop0.
inline uint32_t fills_outside_loop0(const OpInstr& op) {
  if ((op.par_fifo & 0x1fffu) == 0) return 0;
  uint32_t n = 1;
  for (int k = 1; k < kLoops; ++k) n *= op.loops[k] + 1;
  return n;
}

}  // namespace tinycoral::chip::ops::steps
