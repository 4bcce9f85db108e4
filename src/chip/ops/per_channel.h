// Per-channel requantization (cfg3 8, edgetpu_compiler 16.0's int8 per-channel programs; evidence
// in docs/chip_ops.md "Per-channel requantization"): every output column has its own weight zero
// point (an int32 row in wide memory at the op's pc_zp_unit) and, with pc_mult, its own float32
// multiplier (the bias store's multiplier plane, beside the bias plane cfg4 reads). The engine
// (mac_engine.cpp) reads them here once per op.
#pragma once

#include <cstdint>

#include "chip/tile.h"

namespace tinycoral::chip::ops {

constexpr uint32_t kPerChannelCfg3 = 8;

struct PerChannel {
  // The weight zero point every column of every group uses (the op's w_zp when not per-channel).
  uint8_t w_zp = 0;
  // Column c of output group g: float32 multiplier at mults + 4 (g * channels + c); nullptr =
  // the instruction's `mult` for every column.
  const uint8_t* mults = nullptr;
  // Whether every multiplier is finite (the SIMD output stage's condition, requantize4_fast).
  bool mults_finite = true;
  // Fills of the zero-point FIFO row the op consumed (dropped when it ends), and that row.
  uint32_t zp_fills = 0;
  uint32_t zp_row = 0;
};

// Reads the op's per-channel parameters for `groups` output groups of `channels` columns (the last
// one `last_channels`). Per-channel zero points that differ between columns are refused (every
// int8 per-channel model has 128 in all of them: TFLite's per-channel weights are symmetric).
PerChannel per_channel_parameters(const OpInstr& op, OpEnv& env, uint64_t groups, uint32_t channels,
                                  uint32_t last_channels, bool par_fifo);
// Drops the zero-point fills the op consumed.
void finish_per_channel(const PerChannel& pc, OpEnv& env);

}  // namespace tinycoral::chip::ops
