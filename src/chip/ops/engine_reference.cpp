// The op engine's slow reference (engine_reference.h).
#include "chip/ops/engine_reference.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "chip/ops/engine_loops.h"
#include "chip/ops/nlu.h"
#include "chip/ops/per_channel.h"
#include "chip/ops/requantize.h"

namespace tinycoral::chip::ops {
namespace {

// A walk by its definition (isa.md 2.0a): address = base + sum_k c_k S_k over its own counters,
// the innermost counter advancing first.
class PlainWalk {
 public:
  explicit PlainWalk(const OpTtu& t) : ttu_(t), strides_(t.compute_strides()) {}
  int64_t address() const {
    int64_t a = ttu_.base;
    for (int k = 0; k < kLoops; ++k) a += int64_t{c_[k]} * strides_[k];
    return a;
  }
  void next() {
    for (int k = 0; k < kLoops; ++k) {
      if (c_[k] < ttu_.cnt[k]) {
        ++c_[k];
        return;
      }
      c_[k] = 0;
    }
  }

 private:
  const OpTtu& ttu_;
  std::array<int64_t, 8> strides_;
  std::array<uint32_t, 8> c_{};
};

// The mixed-radix index of the loops in `role` (bit k = loop k) at counters c.
uint64_t index_of(const OpInstr& op, uint8_t role, const std::array<uint32_t, 8>& c) {
  uint64_t index = 0, scale = 1;
  for (int k = 0; k < kLoops; ++k) {
    if (!in_mask(role, k)) continue;
    index += c[k] * scale;
    scale *= uint64_t{op.loops[k]} + 1;
  }
  return index;
}

}  // namespace

void run_engine_reference(const OpInstr& op, OpEnv& env, const EngineSpec& spec) {
  const uint8_t mask = op.reduce_mask | spec.extra_reduce;
  const LoopRoles roles = loop_roles(op, spec);
  uint64_t groups = 1;
  for (int k = 0; k < kLoops; ++k)
    if (in_mask(roles.group, k)) groups *= uint64_t{op.loops[k]} + 1;
  const uint32_t channels = uint32_t{op.out_ch} + 1, last_channels = uint32_t{op.out_ch_last} + 1;
  // Columns a step updates: the wider group's; the others keep their start value.
  const uint32_t active = std::max(channels, last_channels);
  const bool fifo = par_is_fifo(op);
  const PerChannel pc = per_channel_parameters(op, env, groups, channels, last_channels, fifo);
  const bool is_max = spec.combine == Combine::kMax;
  // int64 sums, wrapped to 32 bits where the chip's accumulator would (at the output: the same
  // low 32 bits). A max starts below every lane; a column no step raised reads as 0.
  const int64_t start = is_max ? std::numeric_limits<int32_t>::min() : 0;
  std::vector<std::array<int64_t, kColumns>> slots;

  uint32_t full_words = (channels + 3) / 4, last_words = (last_channels + 3) / 4, last_skip = 0;
  if (op.out_last_mode != 0) {
    last_words = op.out_last_cnt + 1;
    last_skip = op.out_last_skip;
  }
  PlainWalk in(op.in), par(op.par), out(op.out);
  uint64_t out_left = op.out.steps();

  auto emit = [&](const std::array<int64_t, kColumns>& acc, uint64_t group) {
    const bool last = group + 1 == groups;
    const uint32_t words = last ? last_words : full_words;
    if (out_left < words) env.fail_op("`out` TTU exhausted before the last output word");
    out_left -= words;
    for (uint32_t w = 0; w < words; ++w) {
      uint8_t* dst = env.narrow_write(out.address(), 4);
      out.next();
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t c = 4 * w + b;
        int64_t value = is_max && acc[c] == start ? 0 : acc[c];
        if (op.cfg4) {
          int32_t bias;
          std::memcpy(&bias, env.bias_store(kBiasStoreBase + 4 * (group * channels + c), 4), 4);
          value += bias;
        }
        value += op.offset;
        const auto acc32 = static_cast<int32_t>(static_cast<uint32_t>(value));
        OutputStage stage{op.mult, op.clamp_min, op.clamp_max, op.out_zp};
        if (pc.mults) std::memcpy(&stage.mult, pc.mults + 4 * (group * channels + c), 4);
        dst[b] = spec.output == OutputKind::kSpline
                     ? to_output_byte(evaluate_spline(env.nlu(), scale_and_clamp(acc32, stage)),
                                      op.out_zp)
                     : requantize(acc32, stage);
      }
    }
    if (last)
      for (uint32_t k = 0; k < last_skip && out_left > 0; ++k, --out_left) out.next();
  };

  uint64_t steps = 1;
  for (int k = 0; k < kLoops; ++k) steps *= uint64_t{op.loops[k]} + 1;
  std::array<uint32_t, 8> c{};  // the main loop's counters, innermost first
  for (uint64_t step = 0; step < steps; ++step) {
    bool starts = true, ends = true;
    for (int k = 0; k < kLoops; ++k)
      if (in_mask(mask, k)) {
        starts &= c[k] == 0;
        ends &= c[k] == op.loops[k];
      }
    const uint64_t slot = index_of(op, roles.slot, c);
    if (slots.size() <= slot) slots.resize(slot + 1);
    auto& acc = slots[slot];
    if (starts) acc.fill(start);

    // One operand pair: `in` and `par` each advance one address per step.
    const int64_t unit = par.address();
    const uint8_t* row = fifo ? env.par_fifo_row(static_cast<uint32_t>(index_of(op, roles.fill, c)),
                                                 unit & ~int64_t{3})
                              : env.wide_read(unit & ~int64_t{3}, kWideRowBytes);
    const uint32_t lane = static_cast<uint32_t>(unit & 3);
    const int64_t x_at = in.address();
    in.next();
    par.next();
    const int64_t in_zp = op.in_zp, w_zp = pc.w_zp;
    for (uint32_t col = 0; col < active; ++col) {
      switch (spec.operand) {
        case OperandKind::kWordTimesRow: {
          const uint8_t* x = env.narrow_read(x_at, 4);
          for (uint32_t b = 0; b < 4; ++b) acc[col] += (x[b] - in_zp) * (row[4 * col + b] - w_zp);
          break;
        }
        case OperandKind::kByteTimesLane:
          acc[col] += (*env.narrow_read(x_at, 1) - in_zp) * (row[4 * col + lane] - w_zp);
          break;
        case OperandKind::kByteTimesLaneBroadcast:
          acc[col] += (*env.narrow_read(x_at, 1) - in_zp) * (row[lane] - w_zp);
          break;
        case OperandKind::kHalfwordsTimesRow16: {
          const uint8_t* x = env.narrow_read(x_at, 2);
          int16_t w0, w1;
          std::memcpy(&w0, row + 4 * col, 2);
          std::memcpy(&w1, row + 4 * col + 2, 2);
          acc[col] += int64_t{x[0]} * w0 + int64_t{x[1]} * w1;
          break;
        }
        case OperandKind::kLaneOnly: {
          const int64_t v = row[4 * col + lane] - w_zp;
          acc[col] = is_max ? std::max(acc[col], v) : acc[col] + v;
          break;
        }
      }
    }
    if (ends) emit(acc, index_of(op, roles.group, c));

    for (int k = 0; k < kLoops; ++k) {  // the next step
      if (c[k] < op.loops[k]) {
        ++c[k];
        break;
      }
      c[k] = 0;
    }
  }
  finish_per_channel(pc, env);
}

void run_avg_pool16_reference(const OpInstr& op, OpEnv& env, bool halfword_lanes) {
  if ((op.par_fifo & 0x1fffu) != 0) env.fail_op("a streamed `par` is not modelled for this class");
  if (op.cfg4) env.fail_op("a bias is not modelled for this class");
  const uint32_t channels = uint32_t{op.out_ch} + 1, last_channels = uint32_t{op.out_ch_last} + 1;
  const uint32_t active = std::max(channels, last_channels);
  if (active > kColumns) env.fail_op("more than 64 output channels");
  // The loop whose last iteration holds the last (partial) group: the outermost one not reduced
  // that iterates more than once; none = every emission is in the last group.
  int group_loop = -1;
  uint64_t steps = 1;
  for (int k = 0; k < kLoops; ++k) {
    steps *= uint64_t{op.loops[k]} + 1;
    if (!in_mask(op.reduce_mask, k) && op.loops[k] > 0) group_loop = k;
  }
  const OutputStage stage{op.mult, op.clamp_min, op.clamp_max, op.out_zp};
  PlainWalk in(op.in), par(op.par), out(op.out);
  std::array<int64_t, kColumns> acc{};
  std::array<uint32_t, 8> c{};
  for (uint64_t step = 0; step < steps; ++step) {
    bool starts = true, ends = true;
    for (int k = 0; k < kLoops; ++k)
      if (in_mask(op.reduce_mask, k)) {
        starts &= c[k] == 0;
        ends &= c[k] == op.loops[k];
      }
    if (starts) acc.fill(0);
    const int64_t x = int64_t{*env.narrow_read(in.address(), 1)} - op.in_zp;
    const int64_t unit = par.address();
    const uint8_t* row = env.wide_read(unit & ~int64_t{3}, kWideRowBytes);
    for (uint32_t col = 0; col < active; ++col) {
      int64_t lane = row[4 * col + (unit & 3)];
      if (halfword_lanes) {
        if (unit & 1) env.fail_op("a 16-bit lane at an odd unit");
        int16_t half;
        std::memcpy(&half, row + 4 * col + (unit & 2), 2);
        lane = half;
      }
      acc[col] += x * (lane - op.w_zp);
    }
    env.stats().macs += active;
    in.next();
    par.next();
    if (ends) {
      const bool last_group = group_loop < 0 || c[group_loop] == op.loops[group_loop];
      const uint32_t n = last_group ? last_channels : channels;
      const bool partial = last_group && op.out_last_mode != 0;
      const uint32_t per_word = halfword_lanes ? 4 : 2;
      const uint32_t words = partial ? op.out_last_cnt + 1u : (n + per_word - 1) / per_word;
      for (uint32_t w = 0; w < words; ++w) {
        uint8_t* dst = env.narrow_write(out.address(), 4);
        out.next();
        for (uint32_t e = 0; e < per_word; ++e) {
          // Columns past the 64th repeat the last (a partial group's extra words).
          const uint32_t col = std::min(per_word * w + e, kColumns - 1);
          const auto sum = static_cast<int32_t>(static_cast<uint32_t>(acc[col] + op.offset));
          if (halfword_lanes) {
            dst[e] = requantize(sum, stage);
            continue;
          }
          // A signed 16-bit value: rounded half to even, + out_zp, saturated.
          const float y = scale_and_clamp(sum, stage);
          const float r = std::isnan(y) ? static_cast<float>(op.out_zp)
                                        : round_half_even(y) + static_cast<float>(op.out_zp);
          const auto v = static_cast<int16_t>(std::clamp(r, -32768.0f, 32767.0f));
          std::memcpy(dst + 2 * e, &v, 2);
        }
      }
      if (partial)
        for (uint32_t k = 0; k < op.out_last_skip; ++k) out.next();
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

}  // namespace tinycoral::chip::ops
