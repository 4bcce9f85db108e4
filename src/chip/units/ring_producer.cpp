// The ring producer (0x10): reads wide rows (or the oldest fills of FIFO rows) into one block and
// sends its 256-byte packets to the ring consumers of the tiles in its mask and, with destination
// bit 16, to the scalar core's outfeed stream (docs/chip.md "Unit semantics used").
#include <cstring>

#include "chip/units/tile_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_ring_producer(TileWork& t) {
  const auto& r = std::get<RingInstr>(t.item.decoded);
  Tile& tile = t.tile;
  if (r.ttu.steps() > units::kMaxRowSteps)
    t.fail(cat("walks ", r.ttu.steps(), " rows (bound ", units::kMaxRowSteps, ")"));
  for (auto [row, visits] : units::item_rows(*t.w.program, t.w.item))
    units::drop_stale_fills(tile, row, visits);
  // All the rows go into one block; the packets are its 256-byte slices.
  const uint64_t steps = r.ttu.steps();
  std::shared_ptr<uint8_t[]> block =
      std::make_shared_for_overwrite<uint8_t[]>(steps * kWideRowBytes);
  uint8_t* next = block.get();
  units::walk(r.ttu, [&](int64_t off) {
    const int64_t unit = int64_t{r.addr} + 4 * off;
    const uint8_t* row = t.wide_row(unit, false);
    // A producer reading a FIFO row (the output FIFO a narrowToWide filled) consumes its
    // oldest fill, like every other FIFO reader; resident rows have no queued fills.
    if (FifoRow* fifo = tile.fifo_rows.find(static_cast<uint32_t>(unit / 4));
        unit % 4 == 0 && fifo && !fifo->fills.empty()) {
      std::memcpy(next, fifo->fills.front(), kWideRowBytes);
      next += kWideRowBytes;
      fifo->fills.pop_front();
      ++fifo->consumed;
      return;
    }
    std::memcpy(next, row, kWideRowBytes);
    next += kWideRowBytes;
  });
  const uint64_t bytes = steps * kWideRowBytes;
  for (uint32_t k = 0; k < kTileCount; ++k)
    if (r.dest >> k & 1) {
      tile_state[k].ring_in[r.to_c1 ? 1 : 0].push(block, 0, bytes, kWideRowBytes);
      stats.ring_bytes += bytes;
      buffered_bytes += bytes;
    }
  if (r.dest >> 16 & 1) {
    auto& stream = to_scalar[t.w.ordinal];
    stream.produced = true;
    for (uint64_t k = 0; k < steps; ++k) {
      stream.packets.emplace_back(block, k * kWideRowBytes, kWideRowBytes);
      stats.ring_bytes += kWideRowBytes;
      buffered_bytes += kWideRowBytes;
    }
  }
  if (buffered_bytes > options.max_buffered_bytes)
    t.fail(cat("more than ", options.max_buffered_bytes, " bytes wait in ring queues"));
  charge();
  return true;
}

}  // namespace tinycoral::chip
