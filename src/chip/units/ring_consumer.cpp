// The ring consumers (0x11 ringConsumer0, 0x12 ringConsumer1): take one packet per TTU step (and,
// with the aux pair, a bias block per group) from their tile's ring queue into wide rows, each
// whole row also queued as a FIFO fill (docs/chip.md "Unit semantics used", "Ring consumers").
#include <algorithm>
#include <array>
#include <cstring>

#include "chip/units/tile_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_ring_consumer(TileWork& t) {
  const auto& r = std::get<RingInstr>(t.item.decoded);
  Tile& tile = t.tile;
  TileState& ts = t.ts;
  // Producers with to_c1 feed ringConsumer1 (0x12), infeeds and the other producers feed
  // ringConsumer0 (MobileNet gen2020: producer 244 -> consumer 216, infeeds -> 0x11).
  auto& own = ts.ring_in[t.item.opcode == isa::kRingConsumer1 ? 1 : 0];
  // With the aux pair enabled each group (outermost-level iteration) starts with its bias
  // block, written as a fill of the aux row (docs/chip.md "Ring consumers"); then one packet
  // per TTU step. Depthwise streams are (bias, 9 taps) of 16-byte entries per channel word.
  if (own.empty() || own.size() < consumer_packets_needed(r, t.w.aux_groups)) return false;
  const uint64_t groups = consumer_aux_groups(r, t.w.aux_groups);
  // A whole-row packet goes to its row's fills at once, and to wide memory only as the row's
  // last fill when the instruction ends: nothing else runs in between, so the wide copies of
  // the fills before it (a FIFO row takes hundreds per instruction) could never be read.
  auto& deferred = ts.deferred_rows;
  auto& mark = ts.deferred_mark;
  if (mark.empty()) mark.resize(kWideRows);
  auto write_deferred = [&] {
    for (uint32_t row : deferred) {
      std::memcpy(tile.wide.data() + size_t{row} * kWideRowBytes, tile.fifo_rows[row].fills.back(),
                  kWideRowBytes);
      mark[row] = 0;
    }
    deferred.clear();
  };
  write_deferred();  // (empty unless an earlier consumer stopped with an error)
  // The FIFO rows this instruction fills, looked up once each (a few rows take all packets).
  std::array<std::pair<uint32_t, FifoRow*>, 64> row_cache;
  row_cache.fill({UINT32_MAX, nullptr});
  auto fifo_row = [&](uint32_t index) -> FifoRow& {
    auto& slot = row_cache[index % row_cache.size()];
    if (slot.first != index) slot = {index, &tile.fifo_rows[index]};
    return *slot.second;
  };
  PacketQueue::Reader packets = own.reader();
  const uint64_t buffered_before = buffered_bytes;
  uint64_t taken = 0;
  auto take = [&](int64_t unit) {
    const std::span<const uint8_t> p = packets.next();
    ++taken;
    buffered_bytes -= p.size();
    uint8_t* row = t.wide_row(unit, true);  // bounds and statistics
    if (unit % 4 == 0 && p.size() <= kWideRowBytes) {
      const auto index = static_cast<uint32_t>(unit / 4);
      FifoRow& fifo = fifo_row(index);
      // A resident load (mode 0) that writes a row again in a later instruction replaces what
      // the earlier ones queued there and nothing read: a chain whose parameter segments take
      // turns in wide memory loads the same rows once per segment, and those stale fills must
      // not make an op read the rows as a FIFO (op_unit's refill rule).
      if (r.mode == 0 && !mark[index] && !fifo.fills.empty()) fifo.fills.clear();
      if (p.size() == kWideRowBytes) {
        fifo.fills.push_back(p.data());
      } else if (mark[index] ? fifo.fills.holds_prefixes(p.size()) : fifo.fills.empty()) {
        // A short packet (a depthwise stream's 16-byte entries) replaces the start of what the
        // row holds: its latest fill of this instruction, else wide memory. Queued as just
        // those bytes while all fills share the rest (FillQueue, prefix fills).
        if (!mark[index]) fifo.fills.start_prefixes(p.size(), row);
        fifo.fills.push_prefix(p.data());
      } else {
        uint8_t* fill = fifo.fills.push_uninitialized();
        const uint8_t* latest = mark[index] ? fifo.fills.row(fifo.fills.size() - 2) : row;
        std::memcpy(fill, latest, kWideRowBytes);
        std::memcpy(fill, p.data(), p.size());
      }
      ++fifo.written;
      if (!mark[index]) {
        mark[index] = 1;
        deferred.push_back(index);
      }
    } else {  // an unaligned packet overlaps two rows of wide memory: write it now
      write_deferred();
      std::memcpy(row, p.data(), std::min<size_t>(p.size(), kWideRowBytes));
      t.record_fill(unit);
    }
  };
  const uint32_t base = units::consumer_base(r);
  const uint64_t per_group = groups > 1 ? r.ttu.steps() / groups : r.ttu.steps();
  uint64_t step = 0;
  uint64_t to_group = 0;  // steps left before the next group's bias block (no division per step)
  // A group's aux block: aux_rows0 packets to consecutive rows (per-channel streams: the
  // multipliers, biases and weight zero points, docs/chip_ops.md "Per-channel").
  auto take_aux = [&] {
    for (uint32_t i = 0; i < r.aux_rows0; ++i) take(units::aux_row(r) + 4 * int64_t{i});
  };
  if (groups == 1) take_aux();
  // A short last pass (MobileNet v1 0.5/160: 75 input packets through a 2-slot FIFO walked
  // 38 x 2 times, gstride 5) leaves out the last steps.
  const uint64_t last = r.ttu.steps() - r.short_last_pass;
  units::walk(r.ttu, [&](int64_t off) {
    if (step >= last) return;
    if (groups > 1 && to_group-- == 0) {  // step % per_group == 0
      take_aux();
      to_group = per_group - 1;
    }
    ++step;
    take(int64_t{base} + 4 * off);
  });
  own.drop(taken);
  t.taken = taken;
  t.bytes = buffered_before - buffered_bytes;
  write_deferred();
  charge();
  return true;
}

}  // namespace tinycoral::chip
