// The op engine's fast path (run_engine: runs, batches, operand gathers, SIMD kernels and output
// stages, the FIFO row cache), and the 16-bit average pooling's classes, against their slow
// reference (run_engine_reference: docs/chip_ops.md section 2 as plain loops, one step at a time)
// on random ops of every step kind the op classes use, with resident and streamed parameters: both
// must write the same bytes, or both refuse.
#include "chip/ops/engine_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>

#include "chip/ops/mac_engine.h"
#include "chip/ops/nlu.h"
#include "chip/ops/op_class_table.h"
#include "chip/tile.h"
#include "common/error.h"
#include "ops_test_util.h"

namespace tinycoral::chip {
namespace {

using ops::Combine;
using ops::EngineSpec;
using ops::OperandKind;
using ops::OutputKind;

struct Kind {
  const char* name;
  EngineSpec spec;
};

// The specs the op classes in src/chip/ops run the engine with.
const Kind kKinds[] = {
    {"word x row (FC, conv, depthwise, requantize, copies)", {OperandKind::kWordTimesRow}},
    {"word x row without a position loop (gen2021 FC, conv)",
     {OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kRequantize, 0, false}},
    {"word x row, spline (LOGISTIC)",
     {OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kSpline}},
    {"byte x lane (narrow copy, MUL step 2)", {OperandKind::kByteTimesLane}},
    {"byte x lane with extra reduced loop (MUL step 2)",
     {OperandKind::kByteTimesLane, Combine::kSum, OutputKind::kRequantize, 0b1}},
    {"byte x lane, broadcast (MUL step 1)", {OperandKind::kByteTimesLaneBroadcast}},
    {"halfwords x row16 (ADD)", {OperandKind::kHalfwordsTimesRow16}},
    {"lane only, sum (average pool)", {OperandKind::kLaneOnly}},
    {"lane only, max (max pool)", {OperandKind::kLaneOnly, Combine::kMax}},
};

// A random op whose walks follow its main loop level by level and stay inside the tile: inputs
// in narrow bytes [0, 8 KiB), parameters in wide units [0, 2048), outputs from narrow byte 64 KiB
// (no overlap, so the order of reads and writes cannot matter).
OpInstr random_op(std::mt19937& rng, const EngineSpec& spec) {
  auto pick = [&](uint32_t lo, uint32_t hi) {
    return std::uniform_int_distribution<uint32_t>(lo, hi)(rng);
  };
  OpInstr op = ops_test::unit_op(1, 3, 0xA5, 0);
  const int levels = static_cast<int>(pick(1, 4));
  uint64_t steps = 1, reduced = 1;
  for (int k = 0; k < levels; ++k) {
    op.loops[k] = pick(0, 1) ? pick(0, 3) : pick(0, 9);
    steps *= op.loops[k] + 1;
    if (pick(0, 1)) {
      op.reduce_mask |= static_cast<uint8_t>(1u << k);
      reduced *= op.loops[k] + 1;
    }
  }
  if (spec.extra_reduce & 1u && !(op.reduce_mask & 1u)) reduced *= op.loops[0] + 1;
  // The same levels in every walk: a stride per loop (in bytes for `in`, units for `par`).
  const int64_t in_strides[] = {0, 1, 2, 4, 8, 36};
  const int64_t par_strides[] = {0, 0, 1, 4, 8};
  std::array<int64_t, 8> in_s{}, par_s{};
  for (int k = 0; k < levels; ++k) {
    in_s[k] = in_strides[pick(0, 5)];
    par_s[k] = par_strides[pick(0, 4)];
  }
  auto walk = [&](int64_t base, const std::array<int64_t, 8>& strides) {
    OpTtu t;
    t.base = base;
    for (int k = 0; k < 8; ++k) {
      t.cnt[k] = op.loops[k];
      int64_t inc = strides[k];
      for (int e = 0; e < k; ++e) inc -= int64_t{t.cnt[e]} * strides[e];
      t.inc[k] = inc;
    }
    return t;
  };
  op.in = walk(pick(0, 2000), in_s);
  op.par = walk(pick(0, 1000), par_s);
  const uint64_t emissions = steps / reduced;
  const uint64_t out_words = std::min<uint64_t>(16 * emissions + 8, (kNarrowBytes - 65536) / 4);
  op.out = ops_test::ttu(65536, {{4, static_cast<uint32_t>(out_words)}});
  op.out_ch = static_cast<uint8_t>(pick(0, 1) ? pick(0, 63) : 4 * pick(0, 15) + 3);
  op.out_ch_last = pick(0, 2) ? op.out_ch : static_cast<uint8_t>(pick(0, 63));
  if (pick(0, 3) == 0) {
    op.out_last_mode = 2;
    op.out_last_cnt = pick(0, 15);
    op.out_last_skip = pick(0, 3);
  }
  op.cfg4 = pick(0, 1);
  op.in_zp = static_cast<uint8_t>(pick(0, 255));
  op.w_zp = static_cast<uint8_t>(pick(0, 255));
  op.out_zp = static_cast<uint8_t>(pick(0, 255));
  op.offset = static_cast<int32_t>(pick(0, 2000)) - 1000;
  op.mult = std::uniform_real_distribution<float>(1e-5f, 0.05f)(rng);
  if (pick(0, 1)) {
    op.clamp_min = -static_cast<float>(pick(0, 200));
    op.clamp_max = static_cast<float>(pick(0, 200));
  }
  return op;
}

OpInstr with_fifo(OpInstr op) {
  op.par_fifo = 1;
  return op;
}

void fill_random(ZeroedBytes& bytes, size_t n, std::mt19937& rng) {
  for (size_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(rng());
}

// `tile` made equal to `from` in place, every member. A tile copied anew for each op took fresh
// pages for its 1.3 MB of memory every time: 2,700 copies cost 23 s under AddressSanitizer (whose
// allocator maps large blocks anew), the copies into the same two tiles well under a second.
void copy_into(Tile& tile, const Tile& from) {
  std::memcpy(tile.narrow.data(), from.narrow.data(), kNarrowBytes);
  std::memcpy(tile.wide.data(), from.wide.data(), kWideBytes);
  std::memcpy(tile.bias_store.data(), from.bias_store.data(), kBiasStoreBytes);
  tile.index = from.index;
  tile.nlu = from.nlu;
  tile.counters = from.counters;
  tile.stats = from.stats;
  tile.fifo_rows = from.fifo_rows;
  tile.staging = from.staging;
}

TEST(EngineReference, FastPathEqualsThePlainLoopsOnRandomOps) {
  std::mt19937 rng(20261204);
  // One random tile that every op starts from.
  auto start = std::make_unique<Tile>();
  fill_random(start->narrow, 8192, rng);
  fill_random(start->wide, 2048 * kWideUnitBytes, rng);
  fill_random(start->bias_store, kBiasStoreBytes, rng);
  start->nlu = ops::logistic_table();
  auto fast = std::make_unique<Tile>(), slow = std::make_unique<Tile>();
  for (const Kind& kind : kKinds) {
    SCOPED_TRACE(kind.name);
    int ran = 0, refused = 0, ran_streamed = 0;
    for (int n = 0; n < 150; ++n) {
      OpInstr op = random_op(rng, kind.spec);
      copy_into(*fast, *start);
      // Every third op streams its parameters through FIFO rows (each fill its own random row),
      // when that takes a modest number of fills.
      const uint32_t fills = ops::fifo_fill_count(with_fifo(op), kind.spec);
      const int64_t first_row = op.par.min_address() / 4, last_row = op.par.max_address() / 4;
      const bool streamed =
          n % 3 == 0 && uint64_t{fills} * static_cast<uint64_t>(last_row - first_row + 1) <= 4096;
      if (streamed) {
        op = with_fifo(op);
        for (int64_t row = first_row; row <= last_row; ++row)
          for (uint32_t f = 0; f < fills; ++f)
            fast->fifo_rows[static_cast<uint32_t>(row)].fills.push_back(
                start->wide.data() + kWideRowBytes * (rng() % 512));
      }
      copy_into(*slow, *fast);
      std::string fast_error, slow_error;
      try {
        OpEnv env(*fast, op);
        ops::run_engine(op, env, kind.spec);
      } catch (const Error& e) {
        fast_error = e.what();
      }
      try {
        OpEnv env(*slow, op);
        ops::run_engine_reference(op, env, kind.spec);
      } catch (const Error& e) {
        slow_error = e.what();
      }
      ASSERT_EQ(fast_error.empty(), slow_error.empty())
          << "op " << n << ": fast '" << fast_error << "', reference '" << slow_error << "'";
      if (!fast_error.empty()) {
        ++refused;
        continue;
      }
      ++ran;
      ran_streamed += streamed;
      ASSERT_EQ(std::memcmp(fast->narrow.data(), slow->narrow.data(), kNarrowBytes), 0)
          << "op " << n << " (" << describe_op_class(op) << "): narrow memory differs";
    }
    // Most random ops are valid: the comparison is not vacuous.
    EXPECT_GT(ran, 100) << refused << " refused";
    EXPECT_GT(ran_streamed, 20);
  }
}

// The 16-bit average pooling's two classes (pooling16.cpp) against their plain loops
// (run_avg_pool16_reference) on random ops: random loop nests, walks, channel counts, partial last
// groups and output stages; the halfword stage with even units (its 16-bit lanes), with some odd
// ones left in so that both refuse them alike.
TEST(EngineReference, AveragePool16ClassesEqualThePlainLoopsOnRandomOps) {
  std::mt19937 rng(20261205);
  auto start = std::make_unique<Tile>();
  fill_random(start->narrow, 8192, rng);
  fill_random(start->wide, 4096 * kWideUnitBytes, rng);
  auto fast = std::make_unique<Tile>(), slow = std::make_unique<Tile>();
  for (const bool halfwords : {false, true}) {
    SCOPED_TRACE(halfwords ? "sum of 16-bit row sums" : "16-bit row sums");
    const ops::ClassEntry& entry = halfwords ? ops::kAvgPoolOfHalfwords : ops::kAvgPoolRowSums16;
    int ran = 0, refused = 0, partial = 0;
    for (int n = 0; n < 80; ++n) {
      OpInstr op = random_op(rng, {OperandKind::kLaneOnly});
      op.cfg4 = 0;
      // An `out` walk long enough for every word (up to 32 per emission, and a partial group's
      // words and skips): what a walk does past its end is not what this compares.
      uint64_t emissions = 1;
      for (int k = 0; k < 8; ++k)
        if (!((op.reduce_mask >> k) & 1u)) emissions *= uint64_t{op.loops[k]} + 1;
      const uint64_t words = 40 * emissions, room = (kNarrowBytes - 65536) / 4;
      if (words > room) {
        --n;
        continue;
      }
      op.out = ops_test::ttu(65536, {{4, static_cast<uint32_t>(words)}});
      if (halfwords && n % 10 != 0) {  // 16-bit lanes: even units
        op.par.base *= 2;
        for (auto& inc : op.par.inc) inc *= 2;
      }
      copy_into(*fast, *start);
      copy_into(*slow, *start);
      std::string fast_error, slow_error;
      try {
        OpEnv env(*fast, op);
        entry.op_class.run(op, env);
      } catch (const Error& e) {
        fast_error = e.what();
      }
      try {
        OpEnv env(*slow, op);
        ops::run_avg_pool16_reference(op, env, halfwords);
      } catch (const Error& e) {
        slow_error = e.what();
      }
      ASSERT_EQ(fast_error.empty(), slow_error.empty())
          << "op " << n << ": class '" << fast_error << "', reference '" << slow_error << "'";
      if (!fast_error.empty()) {
        ++refused;
        continue;
      }
      ++ran;
      partial += op.out_last_mode != 0;
      ASSERT_EQ(std::memcmp(fast->narrow.data(), slow->narrow.data(), kNarrowBytes), 0)
          << "op " << n << ": narrow memory differs";
    }
    EXPECT_GT(ran, 55) << refused << " refused";
    EXPECT_GT(partial, 5);
  }
}

}  // namespace
}  // namespace tinycoral::chip
