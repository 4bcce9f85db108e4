// The walk helpers the tile units share (walks.h).
#include "chip/units/walks.h"

#include <algorithm>

#include "common/error.h"

namespace tinycoral::chip::units {
namespace {

RowVisits row_visits(const DmaTtu& ttu, int64_t unit) {
  std::vector<uint32_t> rows;
  TtuWalker w(ttu);
  do {
    const int64_t u = unit + 4 * w.address();
    if (u >= 0 && u % 4 == 0) rows.push_back(static_cast<uint32_t>(u / 4));
  } while (w.next());
  std::sort(rows.begin(), rows.end());
  RowVisits visits;
  for (uint32_t row : rows)
    if (!visits.empty() && visits.back().first == row)
      ++visits.back().second;
    else
      visits.push_back({row, 1});
  return visits;
}

}  // namespace

void fail_at(int tile, const ProgramItem& item, const std::string& what) {
  fail("tile ", tile, ": ", opcode_name(item.opcode), " at word ", item.word_offset, ": ", what);
}

const RowVisits& item_rows(const Program& program, uint32_t index) {
  ItemFacts& facts = program.facts[index];
  if (facts.rows_known) return facts.row_visits;
  const ProgramItem& item = program.items[index];
  if (item.opcode >= isa::kRingProducer && item.opcode <= isa::kRingConsumer1) {
    const auto& r = std::get<RingInstr>(item.decoded);
    facts.row_visits =
        row_visits(r.ttu, item.opcode == isa::kRingProducer ? r.addr : consumer_base(r));
  } else if (item.opcode == isa::kNarrowToWide || item.opcode == isa::kWideToNarrow) {
    const auto& n = std::get<WideNarrowInstr>(item.decoded);
    facts.row_visits = row_visits(n.wide_ttu, n.wide_addr);
  }
  facts.rows_known = true;
  return facts.row_visits;
}

void drop_stale_fills(Tile& tile, uint32_t row, uint64_t needed) {
  FifoRow* r = tile.fifo_rows.find(row);
  if (!r) return;
  while (r->fills.size() > needed) {
    r->fills.pop_front();
    ++r->consumed;
  }
}

StagingChunks staging_chunks(const WideNarrowInstr& n) {
  const DmaTtu& t = n.narrow_ttu;
  if (n.mode != 1 || !n.circ_stream || t.cnt[1] == 0 || t.inc[0] != 1) return {};
  for (int d = 2; d < 8; ++d)
    if (t.cnt[d] != 0) return {};
  if (t.inc[1] + int64_t{t.cnt[0]} * t.inc[0] != 0) return {};  // the chunk level must rewind
  return {t.cnt[1] + 1, t.cnt[0] + 1, n.fill_bytes / 4};
}

std::vector<int64_t> mesh_offsets(const DmaTtu& ttu, uint32_t short_words, int level) {
  std::vector<int64_t> out;
  out.reserve(std::min<uint64_t>(ttu.steps(), kMaxMeshSteps));  // callers bound the walk anyway
  const uint64_t inner = uint64_t{ttu.cnt[0]} + 1;
  const uint64_t keep = inner > short_words ? inner - short_words : 0;
  TtuWalker w(ttu);
  do {
    if (short_words != 0 && level > 0 && w.counter(level) == ttu.cnt[level] && w.counter(0) >= keep)
      continue;
    out.push_back(w.address());
  } while (w.next());
  return out;
}

}  // namespace tinycoral::chip::units
