// Average pooling over more positions than one pass can sum into a byte-sized result, in two
// stages with 16-bit partial sums between them (gen2020 DeepLab's image pooling, the mean of a
// 33 x 33 x 160 map; docs/chip_ops.md "Average pooling in two 16-bit stages"):
//  - row sums (opcode 1, dp 4, cfg0 0x127, cfg2 0xE, cfg3 6, reduce 0b11, NLU bits 4): the
//    average pool's lane step, acc[c] += (x - in_zp)(lane[c] - w_zp) with `in` a word of ones the
//    program fills, and an output stage that writes signed 16-bit values (mult 1, clamps +-inf,
//    out_zp 227: each row's sum + 227), two channels per output word;
//  - sum of the row sums (same opcode, dp and cfg0, cfg2 0x1E, NLU bits 0): the same step on the
//    16-bit lanes (`par.hmode` 2, lane = unit % 4 in {0, 2}: bytes 0-1 or 2-3 of every column) of
//    the rows a 16-bit transposing narrowToWide (bit 800) wrote, minus w_zp (227), then the usual
//    output stage to bytes (mult 1/1089, out_zp 131).
// Their loop nests put the channel-group loop outside the position loops, so the partial last
// group (out_ch_last, out_last_*) is every emission in the last iteration of the outermost loop
// that is not reduced, not only the very last one. Both run on a plain step loop (a few thousand
// steps per op); `par` must be resident and there is no bias (refused otherwise).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"
#include "chip/ops/requantize.h"

namespace tinycoral::chip::ops {
namespace {

// Walks the main loop nest step by step: f(first, last, last_group), where `first` / `last` say
// whether every reduced loop is at its first / last iteration and `last_group` whether the
// outermost loop that is not reduced (and has more than one iteration) is at its last one.
template <typename F>
void each_pooling_step(const OpInstr& op, OpEnv& env, F f) {
  uint64_t steps = 1;
  int outer = -1;
  for (int k = 0; k < kLoops; ++k) {
    steps *= uint64_t{op.loops[k]} + 1;
    if (!((op.reduce_mask >> k) & 1u) && op.loops[k] > 0) outer = k;
  }
  if (steps > (uint64_t{1} << 22))
    env.fail_op(cat("main loop of ", steps, " steps exceeds the step bound"));
  std::array<uint32_t, kLoops> c{};
  for (uint64_t s = 0; s < steps; ++s) {
    bool first = true, last = true;
    for (int k = 0; k < kLoops; ++k)
      if ((op.reduce_mask >> k) & 1u) {
        first &= c[k] == 0;
        last &= c[k] == op.loops[k];
      }
    f(first, last, outer < 0 || c[outer] == op.loops[outer]);
    for (int k = 0; k < kLoops; ++k) {
      if (c[k] < op.loops[k]) {
        ++c[k];
        break;
      }
      c[k] = 0;
    }
  }
}

// The sums of one op: acc[c] = sum over the reduced loops of (x - in_zp)(lane value - w_zp), each
// emission handed to `emit(acc, channels, words, skip)`.
template <typename Lane, typename Emit>
void run_lane_sums(const OpInstr& op, OpEnv& env, Lane lane_value, Emit emit) {
  if ((op.par_fifo & 0x1fffu) != 0) env.fail_op("a streamed `par` is not modelled for this class");
  if (op.cfg4) env.fail_op("a bias is not modelled for this class");
  const uint32_t channels = uint32_t{op.out_ch} + 1, last_channels = uint32_t{op.out_ch_last} + 1;
  const uint32_t active = std::max(channels, last_channels);
  if (active > kColumns) env.fail_op("more than 64 output channels");
  TtuWalker in(op.in), par(op.par), out(op.out);
  std::array<int32_t, kColumns> acc{};
  each_pooling_step(op, env, [&](bool first, bool last, bool last_group) {
    if (first) acc.fill(0);
    const int32_t x = int32_t{*env.narrow_read(in.address(), 1)} - op.in_zp;
    const int64_t unit = par.address();
    const uint8_t* row = env.wide_read(unit & ~int64_t{3}, kWideRowBytes);
    for (uint32_t c = 0; c < active; ++c)
      acc[c] =
          static_cast<int32_t>(static_cast<uint32_t>(acc[c]) +
                               static_cast<uint32_t>(x * (lane_value(row, c, unit) - op.w_zp)));
    in.next();
    par.next();
    env.stats().macs += active;
    if (!last) return;
    const bool partial = last_group && op.out_last_mode != 0;
    emit(acc.data(), last_group ? last_channels : channels, out, partial ? op.out_last_cnt + 1 : 0,
         partial ? op.out_last_skip : 0);
  });
}

int32_t byte_lane(const uint8_t* row, uint32_t c, int64_t unit) { return row[4 * c + (unit & 3)]; }

// The output stage to a signed 16-bit value: rounded half to even, + out_zp, saturated.
int16_t to_int16(int32_t acc, const OutputStage& stage, uint8_t out_zp) {
  const float y = scale_and_clamp(acc, stage);
  if (std::isnan(y)) return out_zp;
  const float r = round_half_even(y) + static_cast<float>(out_zp);
  return static_cast<int16_t>(std::clamp(r, -32768.0f, 32767.0f));
}

void run_row_sums16(const OpInstr& op, OpEnv& env) {
  const OutputStage stage{op.mult, op.clamp_min, op.clamp_max, op.out_zp};
  run_lane_sums(
      op, env, byte_lane,
      [&](const int32_t* acc, uint32_t channels, TtuWalker& out, uint32_t words, uint32_t skip) {
        if (words == 0) words = (channels + 1) / 2;
        for (uint32_t w = 0; w < words; ++w) {
          int16_t pair[2];
          for (uint32_t h = 0; h < 2; ++h)
            pair[h] =
                to_int16(acc[std::min(2 * w + h, kColumns - 1)] + op.offset, stage, op.out_zp);
          std::memcpy(env.narrow_write(out.address(), 4), pair, 4);
          out.next();
        }
        for (uint32_t k = 0; k < skip; ++k) out.next();
      });
}

void run_sums_of_halfwords(const OpInstr& op, OpEnv& env) {
  const OutputStage stage{op.mult, op.clamp_min, op.clamp_max, op.out_zp};
  auto halfword_lane = [&](const uint8_t* row, uint32_t c, int64_t unit) {
    if (unit & 1) env.fail_op("a 16-bit lane at an odd unit");
    int16_t v;
    std::memcpy(&v, row + 4 * c + (unit & 2), 2);
    return int32_t{v};
  };
  run_lane_sums(
      op, env, halfword_lane,
      [&](const int32_t* acc, uint32_t channels, TtuWalker& out, uint32_t words, uint32_t skip) {
        if (words == 0) words = (channels + 3) / 4;
        for (uint32_t w = 0; w < words; ++w) {
          uint8_t bytes[4];
          for (uint32_t b = 0; b < 4; ++b)
            bytes[b] = requantize(acc[std::min(4 * w + b, kColumns - 1)] + op.offset, stage);
          std::memcpy(env.narrow_write(out.address(), 4), bytes, 4);
          out.next();
        }
        for (uint32_t k = 0; k < skip; ++k) out.next();
      });
}

bool row_sum_fields(const OpInstr& op) { return op.cfg2 == 0xE && op.cfg3 == 6; }
bool halfword_fields(const OpInstr& op) { return op.cfg2 == 0x1E; }

}  // namespace

const ClassEntry kAvgPoolRowSums16{
    1,    4, {0x127},        1,
    0b11, 4, row_sum_fields, {"AVERAGE_POOL_2D, 16-bit partial sums", run_row_sums16, nullptr}};
const ClassEntry kAvgPoolOfHalfwords{
    1,
    4,
    {0x127},
    1,
    0b11,
    0,
    halfword_fields,
    {"AVERAGE_POOL_2D of 16-bit partial sums", run_sums_of_halfwords, nullptr}};

}  // namespace tinycoral::chip::ops
