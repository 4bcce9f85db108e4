// The tile side of the virtual Edge TPU: what each tile instruction touches (its footprint, for
// the scheduler's hazards) and the dispatch of a ready instruction to its unit's handler in
// src/chip/units/: ring producer (0x10), ring consumers (0x11/0x12), narrowToWide (0x13),
// wideToNarrow (0x14), the four mesh directions (0x15-0x18), the NLU load (0x19) and the op unit
// (0x01-0x03, arithmetic in src/chip/ops/). Each instruction runs as a whole once the scheduler
// found its inputs ready; the semantics and their evidence are in docs/chip.md.
#include <algorithm>

#include "chip/machine.h"
#include "chip/units/tile_work.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

using units::aux_row;
using units::consumer_base;
using units::item_rows;
using units::kMaxMeshSteps;
using units::kMaxRowSteps;
using units::mesh_offsets;
using units::op_uses;
using units::RowVisits;
using units::staging_chunks;
using units::StagingChunks;

// An op keeps partial sums in wide memory when a non-reduced loop sits inside a reduced one
// (K-chunked conv, isa.md 2.1.3): then reduce_mask is not of the form 2^k - 1; its class says when
// else (a one-position K-chunked conv, whose chunks move the FIFO to its next fill: ops::
// keeps_partial_sums). The softmax's shift constant (docs/chip_ops.md 6.2) writes its group to the
// `psum` row it selects (psum.sel, bit 13 of the unit address) without such a loop.
bool op_uses_psum(const OpInstr& op) {
  const uint32_t m = op.reduce_mask;
  if ((m != 0 && (m & (m + 1)) != 0) || (op.psum.base & (int64_t{1} << 13)) != 0) return true;
  const OpClass* cls = ops::classify(op);
  return cls && cls->keeps_partial_sums && cls->keeps_partial_sums(op);
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
  // A ring producer reads a FIFO row's fills too (the Keras LSTM's gather after the time loop:
  // tile 0 sends 4 chunks of the hidden sequence through row 0x2064, producer 2072 issued after
  // narrowToWide 2054, whose fill producer 2050 took; it reads 2076's fill).
  const ProgramItem& reader_item = program.items[index];
  const bool producer = reader_item.opcode == isa::kRingProducer;
  bool fifo = producer;
  if (producer) {
    if (std::get<RingInstr>(reader_item.decoded).ttu.steps() > kMaxRowSteps) return {};
  } else {
    const auto& reader = std::get<WideNarrowInstr>(reader_item.decoded);
    if (reader.mode == 2 || reader.wide_ttu.steps() > kMaxRowSteps) return {};
    fifo = reader.wide_circ;
  }
  const RowVisits& rows = item_rows(program, index);
  if (rows.empty()) return {};
  // A walk that visits a row more than once reads it as a FIFO too (as the unit does): the
  // 64x64 softmax gathers two packets per tile through row 0x2074 (bright_64x64 word 1622).
  for (auto [row, visits] : rows) fifo |= visits > 1;
  if (!fifo) return {};
  // Fills written and taken per reader row (same order as `rows`).
  std::vector<uint64_t> filled(rows.size()), taken(rows.size());
  std::vector<uint32_t> writers;
  for (uint32_t eid : ts.region) {
    const Work& e = works[eid];
    const ProgramItem& item = e.program->items[e.item];
    bool writes = false;
    if (item.opcode == isa::kRingProducer && producer) {
      if (std::get<RingInstr>(item.decoded).ttu.steps() > kMaxRowSteps) return {};
    } else if (item.opcode == isa::kRingConsumer0 || item.opcode == isa::kRingConsumer1) {
      const auto& r = std::get<RingInstr>(item.decoded);
      if (r.ttu.steps() > kMaxRowSteps) return {};
      writes = true;
    } else if (item.opcode == isa::kNarrowToWide || item.opcode == isa::kWideToNarrow) {
      const auto& n = std::get<WideNarrowInstr>(item.decoded);
      if (n.wide_ttu.steps() > kMaxRowSteps) continue;
      if (item.opcode == isa::kWideToNarrow && n.mode == 2) continue;
      bool fifo_access = n.wide_circ;
      if (item.opcode == isa::kWideToNarrow)
        for (auto [row, count] : item_rows(*e.program, e.item)) fifo_access |= count > 1;
      if (!fifo_access) continue;
      writes = item.opcode == isa::kNarrowToWide;
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
    case isa::kTensorOp:
    case isa::kPoolOp:
    case isa::kReduceOp: {
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
    case isa::kRingProducer: {
      const auto& r = std::get<RingInstr>(item.decoded);
      a.push_back(access_of(Space::kWide, false, r.ttu, 4 * kUnit, int64_t{r.addr} * kUnit, kRow));
      break;
    }
    case isa::kRingConsumer0:
    case isa::kRingConsumer1: {
      const auto& r = std::get<RingInstr>(item.decoded);
      a.push_back(
          access_of(Space::kWide, true, r.ttu, 4 * kUnit, int64_t{consumer_base(r)} * kUnit, kRow));
      if (r.aux_en0)
        a.push_back({Space::kWide, true, aux_row(r) * kUnit,
                     aux_row(r) * kUnit + int64_t{r.aux_rows0} * kRow});
      break;
    }
    case isa::kNarrowToWide:
    case isa::kWideToNarrow: {
      const auto& w = std::get<WideNarrowInstr>(item.decoded);
      const bool to_narrow = item.opcode == isa::kWideToNarrow;
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
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast: {
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
    case isa::kNluLoad:
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
    const bool op_in = isa::is_tensor_op(item.opcode) && access.space == Space::kNarrow;
    access.waits_for = writers_counted_by(op_in ? in_counters : counters, access.space);
  }
  return a;
}

bool VirtualEdgeTpu::Impl::try_run_tile_work(uint32_t id) {
  Work& w = works[id];
  if (!deps_done(w)) return false;
  TileWork t{id, w, w.program->items[w.item], tiles[w.tile], tile_state[w.tile]};
  bool ran = false;
  switch (t.item.opcode) {
    case isa::kTensorOp:
    case isa::kPoolOp:
    case isa::kReduceOp:
      ran = run_op_unit(t);
      break;
    case isa::kRingProducer:
      ran = run_ring_producer(t);
      break;
    case isa::kRingConsumer0:
    case isa::kRingConsumer1:
      ran = run_ring_consumer(t);
      break;
    case isa::kNarrowToWide:
      ran = run_narrow_to_wide(t);
      break;
    case isa::kWideToNarrow:
      ran = run_wide_to_narrow(t);
      break;
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast:
      ran = run_mesh(t);
      break;
    case isa::kNluLoad:
      ran = run_nlu_load(t);
      break;
    default:
      t.fail("not a tile instruction");
  }
  if (!ran) return false;
  clock_tile_work(id, t.macs, t.taken, t.sent, t.bytes);
  finish(id);
  trace(w);
  return true;
}

}  // namespace tinycoral::chip
