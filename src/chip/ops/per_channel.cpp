// Per-channel requantization parameters (see per_channel.h).
#include "chip/ops/per_channel.h"

#include <cmath>
#include <cstring>

#include "chip/ops/mac_engine.h"

namespace tinycoral::chip::ops {

PerChannel per_channel_parameters(const OpInstr& op, OpEnv& env, uint64_t groups, uint32_t channels,
                                  uint32_t last_channels, bool par_fifo) {
  PerChannel pc;
  pc.w_zp = op.w_zp;
  if (op.cfg3 != kPerChannelCfg3) return pc;
  // Zero points: one row per group. With streamed parameters the row is a FIFO that the ring
  // consumer filled once per group (the group's aux block); resident parameters keep one row.
  const int64_t unit = op.pc_zp_unit;
  if (unit % 4 != 0 || unit < 0 || unit >= kWideUnits)
    env.fail_op(cat("per-channel zero-point row at unit ", unit, " is not a wide row"));
  pc.zp_row = static_cast<uint32_t>(unit / 4);
  const FifoRow* fifo = par_fifo ? env.tile().fifo_rows.find(pc.zp_row) : nullptr;
  const bool from_fills = fifo && fifo->fills.size() >= groups;
  bool first = true;
  int32_t common = 0;
  for (uint64_t g = 0; g < (from_fills ? groups : 1); ++g) {
    const uint8_t* row = from_fills ? env.par_fifo_row(static_cast<uint32_t>(g), unit)
                                    : env.wide_read(unit, kWideRowBytes);
    const uint32_t n = g + 1 == groups ? last_channels : channels;
    for (uint32_t c = 0; c < n; ++c) {
      int32_t z;
      std::memcpy(&z, row + 4 * c, 4);
      if (first) common = z, first = false;
      if (z != common || z < 0 || z > 255)
        env.fail_op(cat("per-channel weight zero points ", common, " and ", z, " (group ", g,
                        " column ", c, "): only one common zero point in 0..255 is modelled"));
    }
  }
  pc.w_zp = static_cast<uint8_t>(common);
  if (from_fills) pc.zp_fills = static_cast<uint32_t>(groups);
  if (op.pc_mult) {
    const uint64_t end = kMultStoreBase + 4 * (groups - 1) * channels + 4 * uint64_t{last_channels};
    if (end > kBiasStoreBytes)
      env.fail_op(cat("per-channel multipliers up to byte ", end, " outside the bias store"));
    pc.mults = env.tile().bias_store.data() + kMultStoreBase;
    for (uint64_t i = 0; i < (groups - 1) * channels + last_channels; ++i) {
      float m;
      std::memcpy(&m, pc.mults + 4 * i, 4);
      pc.mults_finite &= std::isfinite(m);
    }
  }
  return pc;
}

void finish_per_channel(const PerChannel& pc, OpEnv& env) {
  if (pc.zp_fills == 0) return;
  FifoRow* r = env.tile().fifo_rows.find(pc.zp_row);
  for (uint32_t k = 0; k < pc.zp_fills && r && !r->fills.empty(); ++k) {
    r->fills.pop_front();
    ++r->consumed;
  }
}

}  // namespace tinycoral::chip::ops
