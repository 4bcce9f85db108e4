// Speed of the op unit's engine (src/chip/ops/): MAC/s of a K-chunked 1x1 conv streaming its
// weights through a FIFO, and of a 3x3 depthwise op, on one tile, each per-tensor (argument 0) and
// per-channel (argument 1: cfg3 8, a multiplier per column from the bias store, the weight zero
// point from a wide row). Hand-made instructions, so the benchmark needs no test data.
#include <benchmark/benchmark.h>

#include <cstring>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"

namespace {

using namespace tinycoral::chip;

// Makes `op` per-channel: zero points 128 in wide row 2000, multipliers near `mult` for `columns`
// columns in the bias store's multiplier region (docs/chip_ops.md "Per-channel requantization").
void make_per_channel(OpInstr& op, Tile& tile, uint32_t columns) {
  op.cfg3 = 8;
  op.pc_mult = true;
  op.pc_zp_unit = 8000;
  for (uint32_t c = 0; c < 64; ++c) {
    const int32_t zp = 128;
    std::memcpy(tile.wide.data() + size_t{8000} * kWideUnitBytes + 4 * c, &zp, 4);
  }
  for (uint32_t c = 0; c < columns; ++c) {
    const float m = op.mult * (1.0f + 0.01f * static_cast<float>(c % 7));
    std::memcpy(tile.bias_store.data() + kMultStoreBase + 4 * c, &m, 4);
  }
}

OpTtu ttu(int64_t base, std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  OpTtu t;
  t.base = base;
  std::array<int64_t, 8> stride{};
  int k = 0;
  for (const auto& [s, n] : dims) {
    stride[k] = s;
    t.cnt[k] = n - 1;
    int64_t inc = s;
    for (int e = 0; e < k; ++e) inc -= static_cast<int64_t>(t.cnt[e]) * stride[e];
    t.inc[k++] = inc;
  }
  return t;
}

// Times `op` on `tile` and reports its multiply-accumulates per second (`macs` per run; the
// narrow byte at `probe`, which it writes, keeps the run from being optimized away).
void time_op(benchmark::State& state, const OpInstr& op, Tile& tile, double macs, size_t probe) {
  const OpClass* cls = ops::classify(op);
  for (auto _ : state) {
    OpEnv env(tile, op);
    cls->run(op, env);
    benchmark::DoNotOptimize(tile.narrow[probe]);
  }
  state.counters["MAC/s"] = benchmark::Counter(macs * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}

// 64 positions x K = 256 (2 chunks of 32 words) -> 128 outputs (2 groups).
void BM_ConvKChunked(benchmark::State& state) {
  OpInstr op;
  op.opcode = 1, op.dp_mode = 4, op.cfg0 = 0xE5, op.reduce_mask = 0b1011;
  op.loops = {31, 0, 63, 1, 1};
  op.in = ttu(0, {{4, 32}, {0, 1}, {256, 64}, {128, 2}, {0, 2}});
  op.par = ttu(4096, {{4, 32}, {0, 1}, {0, 64}, {0, 2}, {0, 2}});
  op.par_fifo = 32;
  op.out = ttu(32768, {{4, 16}, {512, 64}, {64, 2}});
  op.out_ch = op.out_ch_last = 63;
  op.mult = 0.001f, op.clamp_min = -128, op.clamp_max = 127, op.out_zp = 128;
  Tile tile;
  for (size_t i = 0; i < 16384; ++i) tile.narrow[i] = static_cast<uint8_t>(i * 7);
  if (state.range(0)) make_per_channel(op, tile, 128);
  for (uint32_t r = 0; r < 32; ++r)
    for (int f = 0; f < 4; ++f) {
      std::array<uint8_t, kWideRowBytes> row;
      for (size_t i = 0; i < row.size(); ++i) row[i] = static_cast<uint8_t>(i + r + f);
      tile.fifo_rows[(4096 + 4 * r) / 4].fills.push_back(row);
    }
  time_op(state, op, tile, 64.0 * 256 * 128, 32768);
}
BENCHMARK(BM_ConvKChunked)->Arg(0)->Arg(1);

// 3x3 depthwise over 16x16 positions (18x18 halo'd block), 64 channels = 16 channel words.
void BM_Depthwise(benchmark::State& state) {
  OpInstr op;
  op.opcode = 1, op.dp_mode = 3, op.cfg0 = 0xE5, op.reduce_mask = 0b11;
  op.loops = {0, 8, 255, 15};
  op.in = ttu(0, {{4, 1}, {64, 3}, {1152, 3}, {64, 16}, {1152, 16}, {4, 16}});
  op.par = ttu(4096, {{4, 1}, {4, 9}, {0, 256}, {0, 16}});
  op.par_fifo = 9;
  op.out = ttu(65536, {{4, 1}, {64, 256}, {4, 16}});
  op.out_ch = op.out_ch_last = 3;
  op.mult = 0.01f, op.clamp_min = 0, op.clamp_max = 255;
  Tile tile;
  for (size_t i = 0; i < 65536; ++i) tile.narrow[i] = static_cast<uint8_t>(i * 13);
  if (state.range(0)) make_per_channel(op, tile, 64);
  for (uint32_t t = 0; t < 9; ++t)
    for (int f = 0; f < 16; ++f) {
      std::array<uint8_t, kWideRowBytes> row{};
      for (int c = 0; c < 4; ++c) row[4 * c + c] = static_cast<uint8_t>(t * 16 + f + c);
      tile.fifo_rows[(4096 + 4 * t) / 4].fills.push_back(row);
    }
  time_op(state, op, tile, 9.0 * 256 * 64, 65536);
}
BENCHMARK(BM_Depthwise)->Arg(0)->Arg(1);

}  // namespace

BENCHMARK_MAIN();
