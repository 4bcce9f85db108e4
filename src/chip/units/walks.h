// What the tile units share about their walks: TTU walking, the wide rows a walk visits (cached in
// the program), the consumer's row rounding, a wideToNarrow's staging chunks, mesh offsets with a
// short last piece, and the bounds that keep a fuzzed walk small. Used by the unit handlers in this
// folder and by the footprints in tile_units.cpp.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "chip/program.h"
#include "chip/tile.h"

namespace tinycoral::chip::units {

// Walks a DMA-style TTU and calls f(offset) for every step (offsets in the TTU's own unit).
template <typename F>
void walk(const DmaTtu& ttu, F&& f) {
  TtuWalker w(ttu);
  do {
    f(w.address());
  } while (w.next());
}

// Ring consumers write whole 256-byte rows at their address rounded down to a row (4 units). The
// low bits are sometimes 2 (parameter caching 138 read back by the producer at 136; aux 8194 / 8266
// read back by the bias loads at 8192 / 8264): isa.md 2.6 calls this "+2" unexplained.
inline uint32_t consumer_base(const RingInstr& r) { return r.addr & ~3u; }
inline int64_t aux_row(const RingInstr& r) { return int64_t{r.aux_addr0 & ~3u}; }

[[noreturn]] void fail_at(int tile, const ProgramItem& item, const std::string& what);

// Whether an op walks this TTU at all.
inline bool op_uses(const OpTtu& t) {
  if (t.base != 0) return true;
  for (int k = 0; k < 8; ++k)
    if (t.inc[k] != 0 || t.cnt[k] != 0) return true;
  return false;
}

// Rows one producer or wideToNarrow may walk: far above Google's programs (MobileNet v1 1.0's
// largest producer sends 1819 rows, its largest bias load 256), low enough that a fuzzed walk
// cannot build a stream of gigabytes.
constexpr uint64_t kMaxRowSteps = 1u << 16;
// Elements one mesh half may walk (Google's largest: the 16-position x 256-channel gather).
constexpr uint64_t kMaxMeshSteps = 1u << 22;

// Visits per wide row of a DMA walk in 256-byte rows, sorted by row.
using RowVisits = std::vector<std::pair<uint32_t, uint64_t>>;
// The row visits of a ring (0x10-0x12), narrowToWide or wideToNarrow item's wide walk, cached in
// the program (callers bound the walk to kMaxRowSteps first).
const RowVisits& item_rows(const Program& program, uint32_t index);

// A FIFO reader takes the most recent fills of a row: fills beyond the ones it needs are left
// over from earlier streams through the same row that nobody read (MobileNet v1 0.25: rows
// 0x2000-0x2020 carry both the depthwise taps of ringConsumer0 and the pointwise weights of
// ringConsumer1; the depthwise op at word 972 must see its own 16 fills, not an older one). The
// hazards make the next writer wait for this reader, so its own fills are the newest.
void drop_stale_fills(Tile& tile, uint32_t row, uint64_t needed);

// A circular-streaming wideToNarrow (mode 1, tail bit 871) whose narrow walk is (1, L)(rewind, n):
// n chunks of L words into the same staging. The staging has two slots of `fill_bytes` (isa.md
// 2.5's size field): Google's last copy op reads the last image row at staging + slot when that
// row's index is odd (gen2020 MobileNet word 158: 4356 + 384; gen2021 split_concat word 176:
// 48 + 256).
struct StagingChunks {
  uint32_t count = 0;  // 0: not a chunked staging write
  uint32_t length = 0, slot_words = 0;
};
StagingChunks staging_chunks(const WideNarrowInstr& n);

// The element offsets of a mesh walk. A short last piece (gstride != 0) leaves out the last `short`
// words of the innermost level in the last iteration of the piece level (MobileNet v2 moves a
// 24-word position as pieces of 16 and 8 words; without this the 8 extra words landed on the next
// position and every tile's column 0 of depthwise layer 4 was wrong).
std::vector<int64_t> mesh_offsets(const DmaTtu& ttu, uint32_t short_words, int level);

}  // namespace tinycoral::chip::units
