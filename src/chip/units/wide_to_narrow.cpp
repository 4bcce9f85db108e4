// wideToNarrow (0x14): wide rows (or the fills of FIFO rows) as one byte stream into narrow
// words, into the bias store (mode 2, bias and per-channel loads), or chunk by chunk into a narrow
// staging (circular streaming) (docs/chip.md "Unit semantics used").
#include <algorithm>
#include <array>
#include <cstring>

#include "chip/units/tile_work.h"

namespace tinycoral::chip {
namespace {

// Words that each wide step of a wideToNarrow hands to the narrow walk when they are fewer than a
// row holds: the walk's outer levels iterate once per wide step (their iteration product equals
// the wide steps) and an iteration takes the same whole number of words, under 64. The rest of
// each row is not read. 0 when the rows stream whole. gen2021 DeepLab's image-pooling gather (word
// 9628: 99 fills of a one-row FIFO, narrow levels 48 x 3 x 33) takes 3 positions x 16 words from
// each fill, as narrowToWide 9621 wrote them (docs/chip.md "wideToNarrow").
uint64_t short_row_words(const WideNarrowInstr& n) {
  const uint64_t rows = n.wide_ttu.steps(), words = n.narrow_ttu.steps();
  if (rows == 0 || words % rows != 0 || words / rows >= kWideRowBytes / 4) return 0;
  uint64_t outer = 1;
  for (int d = 5; d >= 1 && outer < rows; --d) {
    if (n.narrow_ttu.cnt[d] == 0) continue;
    outer *= uint64_t{n.narrow_ttu.cnt[d]} + 1;
  }
  return outer == rows ? words / rows : 0;
}

}  // namespace

bool VirtualEdgeTpu::Impl::run_wide_to_narrow(TileWork& t) {
  Tile& tile = t.tile;
  const auto& n = std::get<WideNarrowInstr>(t.item.decoded);
  // A ring FIFO is read fill by fill: each wide-walk step takes the oldest fill of its row not
  // yet read (ring consumers may have refilled the row many times before this instruction
  // runs as a whole), so the FIFO's read position persists across instructions.
  if (n.wide_ttu.steps() > units::kMaxRowSteps)
    t.fail(cat("walks ", n.wide_ttu.steps(), " wide rows (bound ", units::kMaxRowSteps, ")"));
  // A walk that visits a row more than once reads successive fills of it even without the
  // FIFO bit (0.5/160 word 744 loads the biases of two output groups from row 0x2010).
  const units::RowVisits& visits_per_row = units::item_rows(*t.w.program, t.w.item);
  bool fifo = n.wide_circ;
  for (auto [row, visits] : visits_per_row) fifo |= visits > 1;
  if (fifo)
    for (auto [row, visits] : visits_per_row) units::drop_stale_fills(tile, row, visits);
  std::vector<uint8_t> stream;
  stream.reserve(kWideRowBytes * n.wide_ttu.steps());  // bounded above
  units::walk(n.wide_ttu, [&](int64_t off) {
    const int64_t unit = int64_t{n.wide_addr} + 4 * off;
    const uint8_t* row = t.wide_row(unit, false);
    if (fifo) {
      FifoRow* r = tile.fifo_rows.find(static_cast<uint32_t>(unit / 4));
      if (r && !r->fills.empty()) {
        stream.insert(stream.end(), r->fills.front(), r->fills.front() + kWideRowBytes);
        r->fills.pop_front();
        ++r->consumed;
        return;
      }
    }
    stream.insert(stream.end(), row, row + kWideRowBytes);
  });
  const units::StagingChunks chunks = units::staging_chunks(n);
  if (n.mode != 2 && chunks.count == 0 && !n.skip_en) {
    if (const uint64_t k = short_row_words(n); k != 0) {
      const size_t bytes = 4 * static_cast<size_t>(k);
      for (size_t row = 1; row * kWideRowBytes < stream.size(); ++row)
        std::memmove(stream.data() + row * bytes, stream.data() + row * kWideRowBytes, bytes);
      stream.resize(stream.size() / kWideRowBytes * bytes);
    }
  }
  size_t pos = n.skip_en ? 4 * size_t{n.skip_words} : 0;
  if (pos >= stream.size()) t.fail("skips past the wide data it reads");
  auto put = [&](int64_t word) {
    if (pos + 4 > stream.size()) pos = 0;  // circular FIFO: wrap to its first row
    if (n.mode == 2) {
      if (word < 0 || word * 4 + 4 > kBiasStoreBytes)
        t.fail(cat("bias store word ", word, " outside ", kBiasStoreBytes, " bytes"));
      std::memcpy(tile.bias_store.data() + word * 4, stream.data() + pos, 4);
    } else {
      std::memcpy(t.narrow_word(word, true), stream.data() + pos, 4);
    }
    pos += 4;
  };
  if (n.mode == 2) {
    // The bias store takes 8 bytes per narrow step (isa.md 2.5: an FC group's 32 steps carry
    // its 256 bytes of bias), from the start of each wide row (fill) in turn, packed in
    // arrival order from the instruction's address: a depthwise layer's channel words land
    // 16 bytes apart, as src/chip/ops expects (docs/chip_ops.md section 2 "Bias").
    // Per-channel loads walk planes on narrow level 1 (stride 64 words): plane 0 at word 0
    // holds multipliers, plane 1 at word 0x40 biases; per-tensor loads write only 0x40.
    // Row r of the stream is plane r % planes of group r / planes; each plane's groups are
    // packed in arrival order from its address (a multiplier plane below word 0x40 goes to
    // the simulator's multiplier region, kMultStoreBase; docs/chip_ops.md "Per-channel").
    const uint64_t rows = stream.size() / kWideRowBytes, steps = n.narrow_ttu.steps();
    const uint64_t per_row = std::max<uint64_t>(1, steps / std::max<uint64_t>(1, rows));
    const uint64_t planes = bias_load_planes(n);
    const int64_t plane_words = n.narrow_ttu.strides()[1];
    for (uint64_t row = 0; row < rows && (row * per_row) < steps; ++row) {
      const uint64_t bytes = std::min<uint64_t>(8 * per_row, kWideRowBytes);
      const int64_t word = int64_t{n.narrow_addr} +
                           static_cast<int64_t>(row % planes) * (planes > 1 ? plane_words : 0);
      const int64_t at = (word < kBiasPlaneWord ? kMultStoreBase + 4 * word : 4 * word) +
                         static_cast<int64_t>((row / planes) * bytes);
      if (at < 0 || at + static_cast<int64_t>(bytes) > kBiasStoreBytes)
        t.fail(cat("bias store bytes ", at, "+", bytes, " outside ", kBiasStoreBytes, " bytes"));
      std::memcpy(tile.bias_store.data() + at, stream.data() + row * kWideRowBytes, bytes);
    }
  } else if (chunks.count == 0) {
    units::walk(n.narrow_ttu, [&](int64_t off) { put(int64_t{n.narrow_addr} + off); });
  } else {
    // Circular streaming into a narrow staging (docs/chip.md "wideToNarrow"): chunk k of L
    // words goes to slot k % 2; with head_en and a negative tail the last chunk only drains
    // the rest of the fill.
    auto& history = tile.staging[n.narrow_addr];
    history.clear();
    for (uint32_t k = 0; k < chunks.count; ++k) {
      if (k + 1 == chunks.count && n.head_en && n.head_tail < 0) {
        pos += 4 * size_t{n.head_words};
        break;
      }
      const int64_t base = int64_t{n.narrow_addr} + (k % 2) * int64_t{chunks.slot_words};
      for (uint32_t i = 0; i < chunks.length; ++i) put(base + i);
      std::vector<uint8_t> copy(4 * size_t{chunks.length});
      for (uint32_t i = 0; i < chunks.length; ++i)
        std::memcpy(copy.data() + 4 * i, t.narrow_word(base + i, false), 4);
      history.push_back(std::move(copy));
    }
  }
  charge();
  return true;
}

}  // namespace tinycoral::chip
