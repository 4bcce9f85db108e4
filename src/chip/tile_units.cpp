// The tile units of the virtual Edge TPU: ring consumers/producer (0x10-0x12), wideToNarrow and
// narrowToWide (0x14/0x13), the four mesh directions (0x15-0x18), the NLU load (0x19) and the op
// unit (0x01-0x03, arithmetic in src/chip/ops/). Each instruction runs as a whole once the
// scheduler found its inputs ready; the semantics and their evidence are in docs/chip.md.
#include <algorithm>
#include <cstring>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

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
uint32_t consumer_base(const RingInstr& r) { return r.addr & ~3u; }
int64_t aux_row(const RingInstr& r) { return int64_t{r.aux_addr0 & ~3u}; }

[[noreturn]] void fail_at(int tile, const ProgramItem& item, const std::string& what) {
  fail("tile ", tile, ": ", opcode_name(item.opcode), " at word ", item.word_offset, ": ", what);
}

bool op_uses(const OpTtu& t) {
  if (t.base != 0) return true;
  for (int k = 0; k < 8; ++k)
    if (t.inc[k] != 0 || t.cnt[k] != 0) return true;
  return false;
}

// An op keeps partial sums in wide memory when a non-reduced loop sits inside a reduced one
// (K-chunked conv, isa.md 2.1.3): then reduce_mask is not of the form 2^k - 1.
// The softmax's shift constant (docs/chip_ops.md 6.2) writes its group to the `psum` row it
// selects (psum.sel, bit 13 of the unit address) without such a loop.
bool op_uses_psum(const OpInstr& op) {
  const uint32_t m = op.reduce_mask;
  return (m != 0 && (m & (m + 1)) != 0) || (op.psum.base & (int64_t{1} << 13)) != 0;
}

// A circular-streaming wideToNarrow (mode 1, tail bit 871) whose narrow walk is (1, L)(rewind, n):
// n chunks of L words into the same staging. The staging has two slots of `fill_bytes` (isa.md
// 2.5's size field): Google's last copy op reads the last image row at staging + slot when that
// row's index is odd (gen2020 MobileNet word 158: 4356 + 384; gen2021 split_concat word 176:
// 48 + 256).
struct StagingChunks {
  uint32_t count = 0;  // 0: not a chunked staging write
  uint32_t length = 0, slot_words = 0;
};
StagingChunks staging_chunks(const WideNarrowInstr& n) {
  const DmaTtu& t = n.narrow_ttu;
  if (n.mode != 1 || !n.circ_stream || t.cnt[1] == 0 || t.inc[0] != 1) return {};
  for (int d = 2; d < 8; ++d)
    if (t.cnt[d] != 0) return {};
  if (t.inc[1] + int64_t{t.cnt[0]} * t.inc[0] != 0) return {};  // the chunk level must rewind
  return {t.cnt[1] + 1, t.cnt[0] + 1, n.fill_bytes / 4};
}

// A FIFO reader takes the most recent fills of a row: fills beyond the ones it needs are left
// over from earlier streams through the same row that nobody read (MobileNet v1 0.25: rows
// 0x2000-0x2020 carry both the depthwise taps of ringConsumer0 and the pointwise weights of
// ringConsumer1; the depthwise op at word 972 must see its own 16 fills, not an older one). The
// hazards make the next writer wait for this reader, so its own fills are the newest.
void drop_stale_fills(Tile& tile, uint32_t row, uint64_t needed) {
  FifoRow* r = tile.fifo_rows.find(row);
  if (!r) return;
  while (r->fills.size() > needed) {
    r->fills.pop_front();
    ++r->consumed;
  }
}
// Rows one producer or wideToNarrow may walk: far above Google's programs (MobileNet v1 1.0's
// largest producer sends 1819 rows, its largest bias load 256), low enough that a fuzzed walk
// cannot build a stream of gigabytes.
constexpr uint64_t kMaxRowSteps = 1u << 16;

// Visits per wide row of a DMA walk in 256-byte rows starting at `unit`, sorted by row.
using RowVisits = std::vector<std::pair<uint32_t, uint64_t>>;
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

// The row visits of a ring (0x10-0x12), narrowToWide or wideToNarrow item's wide walk, cached in
// the program (callers bound the walk to kMaxRowSteps first).
const RowVisits& item_rows(const Program& program, uint32_t index) {
  ItemFacts& facts = program.facts[index];
  if (facts.rows_known) return facts.row_visits;
  const ProgramItem& item = program.items[index];
  if (item.opcode >= 0x10 && item.opcode <= 0x12) {
    const auto& r = std::get<RingInstr>(item.decoded);
    facts.row_visits = row_visits(r.ttu, item.opcode == 0x10 ? r.addr : consumer_base(r));
  } else if (item.opcode == 0x13 || item.opcode == 0x14) {
    const auto& n = std::get<WideNarrowInstr>(item.decoded);
    facts.row_visits = row_visits(n.wide_ttu, n.wide_addr);
  }
  facts.rows_known = true;
  return facts.row_visits;
}

// Elements one mesh half may walk (Google's largest: the 16-position x 256-channel gather).
constexpr uint64_t kMaxMeshSteps = 1u << 22;

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

// The element offsets of a mesh walk. A short last piece (gstride != 0) leaves out the last `short`
// words of the innermost level in the last iteration of the piece level (MobileNet v2 moves a
// 24-word position as pieces of 16 and 8 words; without this the 8 extra words landed on the next
// position and every tile's column 0 of depthwise layer 4 was wrong).
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

// An op whose `in` walk re-reads a narrow staging at every iteration of its outermost loop (stride
// 0; gen2020 MobileNet word 50 copies image rows 0..30 from the staging at 4356) takes one
// staging chunk per iteration: on the chip the op and the wideToNarrow hand the staging over row
// by row. Running as a whole, the op replays the wideToNarrow's chunk history instead: one pass of
// the loop per chunk, with the chunk put back into the staging first.
struct StagedLoop {
  const std::vector<std::vector<uint8_t>>* chunks = nullptr;
  int loop = -1;
  int64_t staging = 0;  // bytes
};
int outermost_level(const OpTtu& t) {
  for (int k = 7; k >= 0; --k)
    if (t.cnt[k] != 0) return k;
  return -1;
}
StagedLoop staged_loop(const Tile& tile, const OpInstr& op) {
  if (tile.staging.empty() || !op_uses(op.in)) return {};
  int loop = -1;
  for (int k = 7; k >= 0 && loop < 0; --k)
    if (op.loops[k] != 0) loop = k;
  const int level = outermost_level(op.in);
  if (loop <= 0 || level < 0 || op.in.cnt[level] != op.loops[loop] || op.in.strides()[level] != 0)
    return {};
  const int64_t lo = op.in.min_address(), hi = op.in.max_address();
  for (const auto& [word, chunks] : tile.staging) {
    if (chunks.size() < uint64_t{op.loops[loop]} + 1) continue;
    const int64_t begin = 4 * int64_t{word};
    if (lo < begin || hi >= begin + static_cast<int64_t>(chunks.front().size())) continue;
    // Only while slot 0 still holds the last chunk the wideToNarrow put there: once another
    // instruction wrote over the staging, an op reading it again reads that data (DeepLab word
    // 3488 reads the ADD output at narrow 0, where the image rows were staged long before; its
    // two output groups re-read the same input, which looked like a staged loop).
    const auto& last_in_slot0 = chunks[(chunks.size() - 1) & ~size_t{1}];
    if (!std::equal(last_in_slot0.begin(), last_in_slot0.end(), tile.narrow.begin() + begin))
      continue;
    return {&chunks, loop, begin};
  }
  return {};
}
// The same op restricted to pass `pass` of its outermost loop; false when a walk does not follow
// that loop with its own outermost level (then the op cannot be split). A walk may merge that loop
// with the loops inside it into one level of k times its count when its stride is the same along
// them (PoseNet word 50: loops (.., 4, 22), `par` and `psum` walk one level of 88): a pass then
// covers k of that level's steps.
bool restrict_to_pass(OpInstr& part, const OpInstr& op, int loop, uint32_t pass) {
  part.loops[loop] = 0;
  const uint64_t passes = uint64_t{op.loops[loop]} + 1;
  for (auto [dst, src] : {std::pair{&part.in, &op.in},
                          {&part.out, &op.out},
                          {&part.par, &op.par},
                          {&part.psum, &op.psum}}) {
    const int level = outermost_level(*src);
    if (level < 0) continue;
    const uint64_t steps = uint64_t{src->cnt[level]} + 1;
    if (steps % passes != 0) return false;
    const uint64_t k = steps / passes;
    dst->cnt[level] = static_cast<uint32_t>(k - 1);
    dst->base = src->base + static_cast<int64_t>(pass * k) * src->strides()[level];
  }
  return true;
}

}  // namespace

// With the aux pair, each group of packets starts with its bias block. How many groups there are
// is told by the bias load (mode-2 wideToNarrow) that reads the aux row afterwards: one fill per
// group (MobileNet v1 0.25 word 1006 reads row 0x2010 twice for consumer 1002's 2 x (bias + 16
// rows) = the 34 packets of producer 1030; MobileNet v2 word 1120 reads its row once for consumer
// 1116's (1 x 12)(-11 x 4) = 1 + 48 packets; depthwise loads read 0x2048 once per channel word).
// Without such a load (parameter caching) the groups are the iterations of the outermost counted
// level above the slot level.
uint64_t consumer_aux_groups(const RingInstr& r, uint32_t known_groups) {
  if (!r.aux_en0) return 0;
  if (known_groups != 0) return known_groups;
  for (int d = 3; d >= 1; --d)  // level 0 is the slot level, never a group level
    if (r.ttu.cnt[d] != 0) return uint64_t{r.ttu.cnt[d]} + 1;
  return 1;
}
uint64_t consumer_packets_needed(const RingInstr& r, uint32_t known_groups) {
  return r.ttu.steps() - r.short_last_pass + r.aux_rows0 * consumer_aux_groups(r, known_groups);
}

// A FIFO reader (circular wideToNarrow) whose rows' earlier fills in its fence region were all
// taken by earlier FIFO readers has nothing left to read from them: it reads what the next writer
// fills. Returns those earlier writers, to be left out of its hazards so that its read waits for
// the next one (gen2021 MobileNet v1 0.25 word 2514: the second of four broadcast rounds through
// row 0x2074 is issued after consumer 2499, whose fill word 2492 took, and before consumer 2521,
// whose fill it carries; without this every tile's classifier input had tile 0's 64 channels
// twice).
std::vector<uint32_t> VirtualEdgeTpu::Impl::fifo_writers_all_taken(const TileState& ts,
                                                                   const Program& program,
                                                                   uint32_t index) {
  const auto& reader = std::get<WideNarrowInstr>(program.items[index].decoded);
  if (reader.mode == 2 || reader.wide_ttu.steps() > kMaxRowSteps) return {};
  const RowVisits& rows = item_rows(program, index);
  if (rows.empty()) return {};
  // A walk that visits a row more than once reads it as a FIFO too (as the unit does): the
  // 64x64 softmax gathers two packets per tile through row 0x2074 (bright_64x64 word 1622).
  bool fifo = reader.wide_circ;
  for (auto [row, visits] : rows) fifo |= visits > 1;
  if (!fifo) return {};
  // Fills written and taken per reader row (same order as `rows`).
  std::vector<uint64_t> filled(rows.size()), taken(rows.size());
  std::vector<uint32_t> writers;
  for (uint32_t eid : ts.region) {
    const Work& e = works[eid];
    const ProgramItem& item = e.program->items[e.item];
    bool writes = false;
    if (item.opcode == 0x11 || item.opcode == 0x12) {
      const auto& r = std::get<RingInstr>(item.decoded);
      if (r.ttu.steps() > kMaxRowSteps) return {};
      writes = true;
    } else if (item.opcode == 0x13 || item.opcode == 0x14) {
      const auto& n = std::get<WideNarrowInstr>(item.decoded);
      if (n.wide_ttu.steps() > kMaxRowSteps) continue;
      if (item.opcode == 0x14 && n.mode == 2) continue;
      bool fifo_access = n.wide_circ;
      if (item.opcode == 0x14)
        for (auto [row, count] : item_rows(*e.program, e.item)) fifo_access |= count > 1;
      if (!fifo_access) continue;
      writes = item.opcode == 0x13;
    } else {
      continue;
    }
    const RowVisits& visits = item_rows(*e.program, e.item);
    // Both sorted by row: merge.
    bool touches = false;
    size_t i = 0;
    for (auto [row, count] : visits) {
      while (i < rows.size() && rows[i].first < row) ++i;
      if (i == rows.size()) break;
      if (rows[i].first != row) continue;
      touches = true;
      (writes ? filled : taken)[i] += count;
    }
    if (touches && writes) writers.push_back(eid);
  }
  for (size_t i = 0; i < rows.size(); ++i)
    if (filled[i] == 0 || taken[i] < filled[i]) return {};
  return writers;
}

const std::vector<Access>& VirtualEdgeTpu::Impl::footprint_of(const Program& program,
                                                              uint32_t index) {
  ItemFacts& facts = program.facts[index];
  if (!facts.footprint_known) {
    facts.footprint = footprint(program.items[index]);
    facts.footprint_known = true;
  }
  return facts.footprint;
}

std::vector<Access> VirtualEdgeTpu::Impl::footprint(const ProgramItem& item) {
  std::vector<Access> a;
  constexpr int64_t kUnit = kWideUnitBytes, kRow = kWideRowBytes;
  switch (item.opcode) {
    case 0x01:
    case 0x02:
    case 0x03: {
      const auto& op = std::get<OpInstr>(item.decoded);
      if (op_uses(op.in))
        a.push_back(access_of(Space::kNarrow, false, op.in, 1, 0, op.in.inc[0] == 1 ? 1 : 4));
      a.push_back(access_of(Space::kNarrow, true, op.out, 1, 0, 4));
      if (op_uses(op.par)) a.push_back(access_of(Space::kWide, false, op.par, kUnit, 0, kRow));
      if (op_uses_psum(op)) {
        a.push_back(access_of(Space::kWide, false, op.psum, kUnit, 0, kRow));
        a.push_back(access_of(Space::kWide, true, op.psum, kUnit, 0, kRow));
      }
      // Per-channel multipliers (pc_mult) live in the bias store too; the zero-point row in wide
      // memory.
      if (op.cfg4 || op.pc_mult) a.push_back({Space::kBias, false, 0, kBiasStoreBytes});
      if (op.cfg3 == 8) {
        const int64_t zp = int64_t{op.pc_zp_unit & ~3u} * kUnit;
        a.push_back({Space::kWide, false, zp, zp + kRow});
      }
      if (op.nlu_mode) a.push_back({Space::kNlu, false, 0, 1});
      break;
    }
    case 0x10: {
      const auto& r = std::get<RingInstr>(item.decoded);
      a.push_back(access_of(Space::kWide, false, r.ttu, 4 * kUnit, int64_t{r.addr} * kUnit, kRow));
      break;
    }
    case 0x11:
    case 0x12: {
      const auto& r = std::get<RingInstr>(item.decoded);
      a.push_back(
          access_of(Space::kWide, true, r.ttu, 4 * kUnit, int64_t{consumer_base(r)} * kUnit, kRow));
      if (r.aux_en0)
        a.push_back({Space::kWide, true, aux_row(r) * kUnit,
                     aux_row(r) * kUnit + int64_t{r.aux_rows0} * kRow});
      break;
    }
    case 0x13:
    case 0x14: {
      const auto& w = std::get<WideNarrowInstr>(item.decoded);
      const bool to_narrow = item.opcode == 0x14;
      a.push_back(access_of(Space::kWide, !to_narrow, w.wide_ttu, 4 * kUnit,
                            int64_t{w.wide_addr} * kUnit, kRow));
      const Space narrow_space = to_narrow && w.mode == 2 ? Space::kBias : Space::kNarrow;
      a.push_back(
          access_of(narrow_space, to_narrow, w.narrow_ttu, 4, 4 * int64_t{w.narrow_addr}, 4));
      if (const StagingChunks c = to_narrow ? staging_chunks(w) : StagingChunks{}; c.count > 1) {
        const int64_t slot1 = 4 * (int64_t{w.narrow_addr} + c.slot_words);
        a.push_back({Space::kNarrow, true, slot1, slot1 + 4 * int64_t{c.length}});
      }
      break;
    }
    case 0x15:
    case 0x16:
    case 0x17:
    case 0x18: {
      const auto& m = std::get<MeshInstr>(item.decoded);
      // With a short last piece the walk touches fewer words than its TTU spans: the exact runs
      // matter for the halo corners (MobileNet v2 depthwise 4).
      auto half = [&](bool write, const DmaTtu& ttu, uint32_t addr, uint32_t short_words,
                      int level) {
        if (short_words == 0 || ttu.steps() > kMaxMeshSteps)
          return access_of(Space::kNarrow, write, ttu, 4, addr, 4);
        return access_of_offsets(Space::kNarrow, write, mesh_offsets(ttu, short_words, level), 4,
                                 addr, 4);
      };
      if (m.out_active)
        a.push_back(half(false, m.out_ttu, m.out_addr, m.out_short, m.out_piece_level));
      if (m.in_active || m.fill_en)
        a.push_back(half(true, m.in_ttu, m.in_addr, m.in_short, m.in_piece_level));
      break;
    }
    case 0x19:
      a.push_back({Space::kNlu, true, 0, 1});
      break;
    default:
      break;
  }
  // What each read may wait for beyond program order (docs/chip.md "Scheduling"): the writers
  // counted by the sync counters the instruction waits on. An op names no counter we can read (its
  // sync slots are undecoded); its streaming fields say the same: `in.sync` (a staging that a
  // wideToNarrow fills, WIDE_TO_NARROW) and `par.fifo` (a weight FIFO that a narrowToWide or ring
  // consumer fills: PARAMETERS, RING_READ_A/B).
  uint32_t counters = 0, in_counters = 0;
  std::visit(
      [&](const auto& d) {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, RingInstr> || std::is_same_v<T, MeshInstr> ||
                      std::is_same_v<T, WideNarrowInstr>)
          counters = d.wait_counters;
        if constexpr (std::is_same_v<T, OpInstr>) {
          if (d.par_fifo != 0) counters = 1u << 1 | 1u << 14 | 1u << 15;
          if (d.in_sync != 0) in_counters = 1u << 11;
        }
      },
      item.decoded);
  for (Access& access : a) {
    if (access.write) continue;
    const bool op_in = item.opcode <= 0x03 && access.space == Space::kNarrow;
    access.waits_for = writers_counted_by(op_in ? in_counters : counters, access.space);
  }
  return a;
}

bool VirtualEdgeTpu::Impl::try_run_tile_work(uint32_t id) {
  Work& w = works[id];
  if (!deps_done(w)) return false;
  const ProgramItem& item = w.program->items[w.item];
  Tile& tile = tiles[w.tile];
  TileState& ts = tile_state[w.tile];

  auto narrow_word = [&](int64_t word_address, bool write) -> uint8_t* {
    if (word_address < 0 || word_address * 4 + 4 > kNarrowBytes)
      fail_at(w.tile, item,
              cat("narrow word address ", word_address, " outside ", kNarrowBytes / 4, " words"));
    if (write)
      tile.stats.narrow_bytes_written += 4;
    else
      tile.stats.narrow_bytes_read += 4;
    return tile.narrow.data() + word_address * 4;
  };
  auto wide_row = [&](int64_t unit, bool write) -> uint8_t* {
    if (unit < 0 || (unit + 4) > kWideUnits)
      fail_at(w.tile, item, cat("wide unit address ", unit, " outside ", kWideUnits, " units"));
    if (write)
      tile.stats.wide_bytes_written += kWideRowBytes;
    else
      tile.stats.wide_bytes_read += kWideRowBytes;
    return tile.wide.data() + unit * kWideUnitBytes;
  };
  // Every row a ring consumer or narrowToWide writes is also kept as a FIFO fill, so that an op
  // streaming weights through a FIFO reads each fill in turn (tile.h, OpEnv::par_fifo_row).
  auto record_fill = [&](int64_t unit) {
    if (unit % 4 != 0) return;
    auto& row = tile.fifo_rows[static_cast<uint32_t>(unit / 4)];
    row.fills.push_back(tile.wide.data() + unit * kWideUnitBytes);
    ++row.written;
  };

  uint64_t clock_macs = 0, clock_taken = 0, clock_sent = 0, clock_bytes = 0;  // clock: what it did
  switch (item.opcode) {
    case 0x01:
    case 0x02:
    case 0x03: {
      const auto& decoded = std::get<OpInstr>(item.decoded);
      const OpClass* cls = ops::classify(decoded);
      if (!cls || !cls->run)
        fail_at(w.tile, item,
                cat("unknown op class (", describe_op_class(decoded), "): not simulated"));
      const uint64_t macs_before = tile.stats.macs;
      // Weights refilled while the op runs: an op without the FIFO field whose rows were written
      // once per iteration of its outer loops (0.5/160 word 751: 2 output groups through the same
      // 16 rows, consumer 740 writes each row twice) reads them as a FIFO, one fill per group.
      OpInstr streamed = decoded;
      if (decoded.par_fifo == 0 && cls->par_fifo_fills) {
        streamed.par_fifo = 1;
        const uint32_t fills = cls->par_fifo_fills(streamed);
        const int64_t first = decoded.par.min_address() / 4, last = decoded.par.max_address() / 4;
        bool refilled = fills > 1 && decoded.par.min_address() >= 0;
        for (int64_t row = first; refilled && row <= last; ++row) {
          const FifoRow* r = tile.fifo_rows.find(static_cast<uint32_t>(row));
          refilled = r && r->fills.size() >= fills;
        }
        if (!refilled) streamed.par_fifo = 0;
      }
      const OpInstr& op = streamed;
      if (cls->par_fifo_fills && op.par_fifo != 0)
        if (const uint32_t fills = cls->par_fifo_fills(op); fills > 0)
          for (int64_t row = op.par.min_address() / 4, last = op.par.max_address() / 4; row <= last;
               ++row)
            if (row >= 0) drop_stale_fills(tile, static_cast<uint32_t>(row), fills);
      const StagedLoop staged = staged_loop(tile, op);
      OpInstr part = op;
      if (staged.chunks && restrict_to_pass(part, op, staged.loop, 0)) {
        // The staging keeps what the wideToNarrow left in it for the ops after this one (PoseNet
        // word 237 copies the last image row, chunk 22, after word 50 replayed chunks 0-21).
        const size_t slot_bytes = staged.chunks->front().size();
        const std::vector<uint8_t> left(
            tile.narrow.begin() + staged.staging,
            tile.narrow.begin() + staged.staging + static_cast<std::ptrdiff_t>(slot_bytes));
        for (uint32_t pass = 0; pass <= op.loops[staged.loop]; ++pass) {
          restrict_to_pass(part, op, staged.loop, pass);
          const auto& chunk = (*staged.chunks)[pass];
          std::memcpy(tile.narrow.data() + staged.staging, chunk.data(), chunk.size());
          OpEnv env(tile, part);
          cls->run(part, env);
        }
        std::memcpy(tile.narrow.data() + staged.staging, left.data(), left.size());
      } else {
        OpEnv env(tile, op);
        cls->run(op, env);
      }
      stats.macs += tile.stats.macs - macs_before;
      clock_macs = tile.stats.macs - macs_before;
      charge(1 + (tile.stats.macs - macs_before) / 4096);
      if (cls->par_fifo_fills) {
        const uint32_t fills = cls->par_fifo_fills(op);
        if (fills > 0) {
          const int64_t first = op.par.min_address() / 4, last = op.par.max_address() / 4;
          for (int64_t row = first; row <= last; ++row) {
            FifoRow* r = tile.fifo_rows.find(static_cast<uint32_t>(row));
            if (!r) continue;
            for (uint32_t k = 0; k < fills && !r->fills.empty(); ++k) r->fills.pop_front();
            r->consumed += fills;
          }
        }
      }
      break;
    }
    case 0x10: {
      const auto& r = std::get<RingInstr>(item.decoded);
      if (r.ttu.steps() > kMaxRowSteps)
        fail_at(w.tile, item, cat("walks ", r.ttu.steps(), " rows (bound ", kMaxRowSteps, ")"));
      for (auto [row, visits] : item_rows(*w.program, w.item)) drop_stale_fills(tile, row, visits);
      // All the rows go into one block; the packets are its 256-byte slices.
      const uint64_t steps = r.ttu.steps();
      std::shared_ptr<uint8_t[]> block =
          std::make_shared_for_overwrite<uint8_t[]>(steps * kWideRowBytes);
      uint8_t* next = block.get();
      walk(r.ttu, [&](int64_t off) {
        const int64_t unit = int64_t{r.addr} + 4 * off;
        const uint8_t* row = wide_row(unit, false);
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
      for (uint32_t t = 0; t < kTileCount; ++t)
        if (r.dest >> t & 1) {
          tile_state[t].ring_in[r.to_c1 ? 1 : 0].push(block, 0, bytes, kWideRowBytes);
          stats.ring_bytes += bytes;
          buffered_bytes += bytes;
        }
      if (r.dest >> 16 & 1) {
        auto& stream = to_scalar[w.ordinal];
        stream.produced = true;
        for (uint64_t k = 0; k < steps; ++k) {
          stream.packets.emplace_back(block, k * kWideRowBytes, kWideRowBytes);
          stats.ring_bytes += kWideRowBytes;
          buffered_bytes += kWideRowBytes;
        }
      }
      if (buffered_bytes > options.max_buffered_bytes)
        fail_at(w.tile, item,
                cat("more than ", options.max_buffered_bytes, " bytes wait in ring queues"));
      charge();
      break;
    }
    case 0x11:
    case 0x12: {
      const auto& r = std::get<RingInstr>(item.decoded);
      // Producers with to_c1 feed ringConsumer1 (0x12), infeeds and the other producers feed
      // ringConsumer0 (MobileNet gen2020: producer 244 -> consumer 216, infeeds -> 0x11).
      auto& own = ts.ring_in[item.opcode == 0x12 ? 1 : 0];
      // With the aux pair enabled each group (outermost-level iteration) starts with its bias
      // block, written as a fill of the aux row (docs/chip.md "Ring consumers"); then one packet
      // per TTU step. Depthwise streams are (bias, 9 taps) of 16-byte entries per channel word.
      if (own.empty() || own.size() < consumer_packets_needed(r, w.aux_groups)) return false;
      const uint64_t groups = consumer_aux_groups(r, w.aux_groups);
      // A whole-row packet goes to its row's fills at once, and to wide memory only as the row's
      // last fill when the instruction ends: nothing else runs in between, so the wide copies of
      // the fills before it (a FIFO row takes hundreds per instruction) could never be read.
      auto& deferred = ts.deferred_rows;
      auto& mark = ts.deferred_mark;
      if (mark.empty()) mark.resize(kWideRows);
      auto write_deferred = [&] {
        for (uint32_t row : deferred) {
          std::memcpy(tile.wide.data() + size_t{row} * kWideRowBytes,
                      tile.fifo_rows[row].fills.back(), kWideRowBytes);
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
        uint8_t* row = wide_row(unit, true);  // bounds and statistics
        if (unit % 4 == 0 && p.size() <= kWideRowBytes) {
          const auto index = static_cast<uint32_t>(unit / 4);
          FifoRow& fifo = fifo_row(index);
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
          record_fill(unit);
        }
      };
      const uint32_t base = consumer_base(r);
      const uint64_t per_group = groups > 1 ? r.ttu.steps() / groups : r.ttu.steps();
      uint64_t step = 0;
      uint64_t to_group =
          0;  // steps left before the next group's bias block (no division per step)
      // A group's aux block: aux_rows0 packets to consecutive rows (per-channel streams: the
      // multipliers, biases and weight zero points, docs/chip_ops.md "Per-channel").
      auto take_aux = [&] {
        for (uint32_t i = 0; i < r.aux_rows0; ++i) take(aux_row(r) + 4 * int64_t{i});
      };
      if (groups == 1) take_aux();
      // A short last pass (MobileNet v1 0.5/160: 75 input packets through a 2-slot FIFO walked
      // 38 x 2 times, gstride 5) leaves out the last steps.
      const uint64_t last = r.ttu.steps() - r.short_last_pass;
      walk(r.ttu, [&](int64_t off) {
        if (step >= last) return;
        if (groups > 1 && to_group-- == 0) {  // step % per_group == 0
          take_aux();
          to_group = per_group - 1;
        }
        ++step;
        take(int64_t{base} + 4 * off);
      });
      own.drop(taken);
      clock_taken = taken;
      clock_bytes = buffered_before - buffered_bytes;
      write_deferred();
      charge();
      break;
    }
    case 0x13: {
      const auto& n = std::get<WideNarrowInstr>(item.decoded);
      std::vector<uint8_t> stream;
      stream.reserve(4 * std::min<uint64_t>(n.narrow_ttu.steps(), kMaxRowSteps));
      walk(n.narrow_ttu, [&](int64_t off) {
        const uint8_t* p = narrow_word(int64_t{n.narrow_addr} + off, false);
        stream.insert(stream.end(), p, p + 4);
      });
      // One wide row per iteration of the narrow walk's outermost level when their counts agree
      // and the iterations are shorter than a row (MobileNet v2's ADD weight rows: word 790 writes
      // 4 resident rows of 16 bytes from 4 x 4 narrow words); otherwise rows of 256 bytes in turn.
      // A FIFO destination (wide_circ) streams instead: its fills are the 256-byte packets of one
      // byte stream (PoseNet word 6836 sends 6 image rows of 7 x 36 = 252 bytes as 1512
      // contiguous bytes, the output layout's 252-byte rows of tiles 3, 7 and 11).
      // The outer levels may also share the rows between them: gabor_64x64_p4's pooling relay
      // (word 273, narrow levels 4 x 2 x 4 x 16, 64 wide steps) writes one row of 2 transposed
      // blocks (8 channels x 4 positions) per iteration of its two outer levels, the row the
      // average pool reads for that position quad.
      size_t per_row = kWideRowBytes;
      const uint64_t rows = n.wide_ttu.steps();
      // A FIFO without `w.circ` (the MUL feed, isa.md 2.1.5: `w.rows` 1, the same row every step)
      // takes one fill per wide step, each an equal share of the words (looming word 290: 256
      // steps of one word for op 273's 256 fills).
      // A transposing write of fewer than 64 channels fills each wide step's row with its share
      // (looming words 947-1003: 504 positions of one channel word as 126 rows of 4 positions x 4
      // channels, the rows the 21x21 average pool at 1011 walks lane by lane).
      // Only when 256-byte fills would leave steps empty: gen2021 PoseNet word 6657 (4 steps into
      // one row, 960 bytes) sends fills of 256, 256, 256 and 192 bytes, not 4 of 240 (with equal
      // shares its heatmaps and short offsets differ from the twin's).
      const bool shared_fills = n.transposing || (n.wide_circ && !n.wide_stream &&
                                                  stream.size() <= (rows - 1) * kWideRowBytes);
      if (shared_fills && stream.size() % rows == 0 && stream.size() < rows * kWideRowBytes)
        per_row = stream.size() / rows;
      // The on-tile softmax streams one word per wide step into a 4-row FIFO (bright_16x16 word
      // 641: 128 words, 128 steps, `w.circ`): one fill of one word each (docs/chip_ops.md 6.2).
      // The last round of 4 steps may be short (`w.last`): gen2021 MobileNet sends its 1001
      // logits as 251 words into 4 rows x 63 steps (word 3255), its exponentials as 501 words
      // into 4 x 126 (word 9963).
      if ((n.transposing || n.wide_circ) && rows > 1 && stream.size() % 4 == 0 &&
          stream.size() <= 4 * rows && stream.size() + 16 > 4 * rows)
        per_row = 4;
      uint64_t outer = 1;
      for (int d = 5; d >= 1 && !n.wide_circ && outer < rows; --d) {
        if (n.narrow_ttu.cnt[d] == 0) continue;
        outer *= uint64_t{n.narrow_ttu.cnt[d]} + 1;
        if (outer == rows && stream.size() < rows * kWideRowBytes && stream.size() % rows == 0)
          per_row = stream.size() / rows;
      }
      // Tail bit 799 (pooling relays): each wide step's words are positions of one channel word,
      // transposed so that a wide lane holds one channel with the positions in its bytes, the
      // layout the pooling ops read (gen2020 MobileNet word 2168 -> average pool 2176; docs/chip.md
      // "narrowToWide"). Walks of 4 positions innermost transpose 4 x 4 blocks. Compiler 16.0's
      // softmax gathers (bright_16x16 word 140: 64 words innermost, 64 wide steps) send one word
      // per step: its 4 bytes go to byte 0 of lanes 0-3, one FIFO fill per step (docs/chip_ops.md
      // "Softmax maximum").
      const bool word_per_step = n.transposing && n.narrow_ttu.cnt[0] != 3 && per_row == 4;
      // Bit 800 transposes 16-bit elements: each pair of words is a 2 x 2 block of halves, column
      // j of the pair taking half j of both words (half h from word h). The softmax's exponentials
      // reach the probability op so (bright_16x16 word 823, docs/chip_ops.md 6.2).
      if (n.transposing && n.transpose16) {
        if (stream.size() % 8 != 0)
          fail_at(w.tile, item, "a 16-bit transposing narrowToWide needs pairs of words");
        for (size_t block = 0; block < stream.size(); block += 8) {
          std::array<uint8_t, 8> t;
          for (size_t j = 0; j < 2; ++j)
            for (size_t h = 0; h < 2; ++h)
              std::memcpy(&t[4 * j + 2 * h], &stream[block + 4 * h + 2 * j], 2);
          std::memcpy(stream.data() + block, t.data(), 8);
        }
      } else if (n.transposing && !word_per_step) {
        if (n.narrow_ttu.cnt[0] != 3 || stream.size() % 16 != 0)
          fail_at(w.tile, item,
                  "a transposing narrowToWide needs 4 positions innermost or one word per step");
        for (size_t block = 0; block < stream.size(); block += 16) {
          std::array<uint8_t, 16> t;
          for (size_t b = 0; b < 4; ++b)
            for (size_t j = 0; j < 4; ++j) t[4 * j + b] = stream[block + 4 * b + j];
          std::memcpy(stream.data() + block, t.data(), 16);
        }
      }
      size_t pos = 0;
      walk(n.wide_ttu, [&](int64_t off) {
        if (pos >= stream.size()) return;
        const int64_t unit = int64_t{n.wide_addr} + 4 * off;
        uint8_t* row = wide_row(unit, true);
        const size_t take = std::min<size_t>(per_row, stream.size() - pos);
        if (word_per_step) {
          for (size_t j = 0; j < 4; ++j) row[4 * j] = stream[pos + j];
        } else {
          std::memcpy(row, stream.data() + pos, take);
        }
        pos += take;
        // Only FIFO destinations queue fills (isa.md 2.5: wide_rows / wide_circ); a resident row
        // (split_concat's identity rows at word 44) is just memory.
        if (n.wide_circ) record_fill(unit);
      });
      charge();
      break;
    }
    case 0x14: {
      const auto& n = std::get<WideNarrowInstr>(item.decoded);
      // A ring FIFO is read fill by fill: each wide-walk step takes the oldest fill of its row not
      // yet read (ring consumers may have refilled the row many times before this instruction
      // runs as a whole), so the FIFO's read position persists across instructions.
      if (n.wide_ttu.steps() > kMaxRowSteps)
        fail_at(w.tile, item,
                cat("walks ", n.wide_ttu.steps(), " wide rows (bound ", kMaxRowSteps, ")"));
      // A walk that visits a row more than once reads successive fills of it even without the
      // FIFO bit (0.5/160 word 744 loads the biases of two output groups from row 0x2010).
      const RowVisits& visits_per_row = item_rows(*w.program, w.item);
      bool fifo = n.wide_circ;
      for (auto [row, visits] : visits_per_row) fifo |= visits > 1;
      if (fifo)
        for (auto [row, visits] : visits_per_row) drop_stale_fills(tile, row, visits);
      std::vector<uint8_t> stream;
      stream.reserve(kWideRowBytes * n.wide_ttu.steps());  // bounded above
      walk(n.wide_ttu, [&](int64_t off) {
        const int64_t unit = int64_t{n.wide_addr} + 4 * off;
        const uint8_t* row = wide_row(unit, false);
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
      const StagingChunks chunks = staging_chunks(n);
      if (n.mode != 2 && chunks.count == 0 && !n.skip_en) {
        if (const uint64_t k = short_row_words(n); k != 0) {
          const size_t bytes = 4 * static_cast<size_t>(k);
          for (size_t row = 1; row * kWideRowBytes < stream.size(); ++row)
            std::memmove(stream.data() + row * bytes, stream.data() + row * kWideRowBytes, bytes);
          stream.resize(stream.size() / kWideRowBytes * bytes);
        }
      }
      size_t pos = n.skip_en ? 4 * size_t{n.skip_words} : 0;
      if (pos >= stream.size()) fail_at(w.tile, item, "skips past the wide data it reads");
      auto put = [&](int64_t word) {
        if (pos + 4 > stream.size()) pos = 0;  // circular FIFO: wrap to its first row
        if (n.mode == 2) {
          if (word < 0 || word * 4 + 4 > kBiasStoreBytes)
            fail_at(w.tile, item,
                    cat("bias store word ", word, " outside ", kBiasStoreBytes, " bytes"));
          std::memcpy(tile.bias_store.data() + word * 4, stream.data() + pos, 4);
        } else {
          std::memcpy(narrow_word(word, true), stream.data() + pos, 4);
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
            fail_at(
                w.tile, item,
                cat("bias store bytes ", at, "+", bytes, " outside ", kBiasStoreBytes, " bytes"));
          std::memcpy(tile.bias_store.data() + at, stream.data() + row * kWideRowBytes, bytes);
        }
      } else if (chunks.count == 0) {
        walk(n.narrow_ttu, [&](int64_t off) { put(int64_t{n.narrow_addr} + off); });
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
            std::memcpy(copy.data() + 4 * i, narrow_word(base + i, false), 4);
          history.push_back(std::move(copy));
        }
      }
      charge();
      break;
    }
    case 0x15:
    case 0x16:
    case 0x17:
    case 0x18: {
      const auto& m = std::get<MeshInstr>(item.decoded);
      const size_t dir = item.opcode - 0x15;
      auto& in_q = ts.mesh_in[dir];
      const bool receive = m.in_active && !m.fill_en;
      if (m.out_ttu.steps() > kMaxMeshSteps || m.in_ttu.steps() > kMaxMeshSteps)
        fail_at(w.tile, item, cat("walks more than ", kMaxMeshSteps, " elements"));
      // Element offsets of both halves, without the words a short last piece leaves out (the
      // same on every tile and every run: kept in the program).
      ItemFacts& facts = w.program->facts[w.item];
      if (!facts.mesh_known) {
        if (m.out_active) facts.mesh_out = mesh_offsets(m.out_ttu, m.out_short, m.out_piece_level);
        if (m.in_active || m.fill_en)
          facts.mesh_in = mesh_offsets(m.in_ttu, m.in_short, m.in_piece_level);
        if (!facts.mesh_out.empty() && !facts.mesh_in.empty() &&
            facts.mesh_out.size() != facts.mesh_in.size()) {
          std::unordered_map<int64_t, int64_t> written_at;  // byte address -> last inbound step
          for (size_t k = 0; k < facts.mesh_in.size(); ++k)
            written_at[int64_t{m.in_addr} + 4 * facts.mesh_in[k]] = static_cast<int64_t>(k);
          for (int64_t off : facts.mesh_out) {
            const auto it = written_at.find(int64_t{m.out_addr} + 4 * off);
            facts.mesh_wait.push_back(it == written_at.end() ? -1 : it->second);
          }
        }
        facts.mesh_known = true;
      }
      const std::vector<int64_t>& outs = facts.mesh_out;
      const std::vector<int64_t>& ins = facts.mesh_in;
      const uint64_t in_steps = ins.size();
      if (receive && in_q.size() < in_steps) return false;
      const int neighbour = mesh_neighbour(w.tile, item.opcode);
      // Both halves' addresses are checked once (their offsets' extremes), statistics are added in
      // bulk: the words themselves move in tight loops.
      auto check_half = [&](const std::vector<int64_t>& offsets, uint32_t addr) {
        if (offsets.empty()) return;
        const auto [lo, hi] = std::minmax_element(offsets.begin(), offsets.end());
        if (int64_t{addr} + 4 * *lo < 0 || int64_t{addr} + 4 * *hi + 4 > kNarrowBytes)
          fail_at(w.tile, item,
                  cat("mesh narrow addresses ", int64_t{addr} + 4 * *lo, "..",
                      int64_t{addr} + 4 * *hi, " outside ", kNarrowBytes, " bytes"));
      };
      check_half(outs, m.out_addr);
      check_half(ins, m.in_addr);
      tile.stats.narrow_bytes_read += 4 * uint64_t{outs.size()};
      tile.stats.narrow_bytes_written += 4 * in_steps;
      stats.mesh_bytes += 4 * uint64_t{outs.size()};
      if (neighbour < 0)
        stats.mesh_bytes_dropped_at_edge += 4 * uint64_t{outs.size()};
      else
        buffered_bytes += 4 * uint64_t{outs.size()};
      if (receive) buffered_bytes -= 4 * in_steps;
      std::deque<uint32_t>* const to =
          neighbour < 0 ? nullptr : &tile_state[neighbour].mesh_in[dir];
      uint8_t* const out_base = tile.narrow.data() + m.out_addr;
      uint8_t* const in_base = tile.narrow.data() + m.in_addr;
      // Words go out through a buffer appended to the neighbour's queue at the end, and come in
      // through an iterator erased up to at the end (nothing else runs in between): no deque
      // operation per word.
      thread_local std::vector<uint32_t> sent;
      sent.clear();
      auto in_next = in_q.begin();
      auto send = [&](uint32_t word) { sent.push_back(word); };
      auto read_out = [&](int64_t off) {
        uint32_t v;
        std::memcpy(&v, out_base + 4 * off, 4);
        return v;
      };
      auto write_in = [&](int64_t off) {
        const uint32_t v = receive ? *in_next++ : m.fill;
        std::memcpy(in_base + 4 * off, &v, 4);
      };
      if (!outs.empty() && in_steps > 0 && outs.size() == in_steps) {
        // A relay: each received word may be the one it forwards (docs/chip.md "Mesh").
        for (uint64_t k = 0; k < in_steps; ++k) {
          write_in(ins[k]);
          send(read_out(outs[k]));
        }
      } else if (!outs.empty() && in_steps > 0) {
        // A relay that adds its own data (the gather before MobileNet's average pool: tile 1
        // sends its 4 positions and the 8 it receives from tile 2): an outbound word whose address
        // the inbound half writes is sent after it arrived.
        uint64_t received = 0;
        auto receive_through = [&](uint64_t step) {
          for (; received <= step && received < in_steps; ++received) write_in(ins[received]);
        };
        for (size_t j = 0; j < outs.size(); ++j) {
          if (facts.mesh_wait[j] >= 0) receive_through(static_cast<uint64_t>(facts.mesh_wait[j]));
          send(read_out(outs[j]));
        }
        receive_through(in_steps - 1);
      } else {
        for (int64_t off : outs) send(read_out(off));
        for (int64_t off : ins) write_in(off);
      }
      if (receive) in_q.erase(in_q.begin(), in_next);
      clock_taken = receive ? in_steps : 0;
      clock_sent = sent.size();
      if (to) to->insert(to->end(), sent.begin(), sent.end());
      if (buffered_bytes > options.max_buffered_bytes)
        fail_at(w.tile, item,
                cat("more than ", options.max_buffered_bytes, " bytes wait in mesh links"));
      charge();
      break;
    }
    case 0x19:
      tile.nlu = std::get<NluLoadInstr>(item.decoded).table;
      charge();
      break;
    default:
      fail_at(w.tile, item, "not a tile instruction");
  }
  clock_tile_work(id, clock_macs, clock_taken, clock_sent, clock_bytes);
  finish(id);
  trace(w);
  return true;
}

}  // namespace tinycoral::chip
