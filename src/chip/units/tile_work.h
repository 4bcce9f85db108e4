// One tile instruction being run by its unit's handler (VirtualEdgeTpu::Impl::run_*): the work, its
// item and tile, the checked memory accessors every unit uses, and what the unit reports to the
// modeled clock when it is done.
#pragma once

#include <string>

#include "chip/machine.h"
#include "chip/units/walks.h"
#include "common/error.h"

namespace tinycoral::chip {

struct TileWork {
  uint32_t id;
  Work& w;
  const ProgramItem& item;
  Tile& tile;
  TileState& ts;
  // clock: what the unit did (MACs, ring packets or mesh words taken and sent, bytes taken).
  uint64_t macs = 0, taken = 0, sent = 0, bytes = 0;

  [[noreturn]] void fail(const std::string& what) const { units::fail_at(w.tile, item, what); }

  // The narrow word at `word_address`, bounds-checked and counted.
  uint8_t* narrow_word(int64_t word_address, bool write) {
    if (word_address < 0 || word_address * 4 + 4 > kNarrowBytes)
      fail(cat("narrow word address ", word_address, " outside ", kNarrowBytes / 4, " words"));
    if (write)
      tile.stats.narrow_bytes_written += 4;
    else
      tile.stats.narrow_bytes_read += 4;
    return tile.narrow.data() + word_address * 4;
  }
  // The wide row starting at `unit`, bounds-checked and counted.
  uint8_t* wide_row(int64_t unit, bool write) {
    if (unit < 0 || (unit + 4) > kWideUnits)
      fail(cat("wide unit address ", unit, " outside ", kWideUnits, " units"));
    if (write)
      tile.stats.wide_bytes_written += kWideRowBytes;
    else
      tile.stats.wide_bytes_read += kWideRowBytes;
    return tile.wide.data() + unit * kWideUnitBytes;
  }
  // Every row a ring consumer or narrowToWide writes is also kept as a FIFO fill, so that an op
  // streaming weights through a FIFO reads each fill in turn (tile.h, OpEnv::par_fifo_row).
  void record_fill(int64_t unit) {
    if (unit % 4 != 0) return;
    auto& row = tile.fifo_rows[static_cast<uint32_t>(unit / 4)];
    row.fills.push_back(tile.wide.data() + unit * kWideUnitBytes);
    ++row.written;
  }
};

}  // namespace tinycoral::chip
