// Dispatch and scheduling of the virtual Edge TPU (docs/chip.md "Scheduling"): tile instructions go
// into per-tile unit queues in program order; an instruction starts when (a) the instructions it
// depends on completed and (b) its stream inputs (ring packets, mesh words, host data) are there.
// Dependencies come from memory footprints inside a "fence region" (the instructions of a tile
// between two 0x1a fences that cover every unit): program-order hazards, except that a read waits
// for a writer issued after it when the instruction waits on a sync counter that counts that
// writer's writes (consumers are often issued before their producers, isa.md 1.7). Counter values
// are recorded, not counted: data availability stands for them.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <sstream>

#include "chip/machine.h"
#include "chip/register_indirect.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

UnitId tile_unit_of(uint8_t opcode) {
  switch (opcode) {
    case isa::kTensorOp:
    case isa::kPoolOp:
    case isa::kReduceOp:
      return UnitId::kOp;
    case isa::kRingProducer:
      return UnitId::kRingProducer;
    case isa::kRingConsumer0:
      return UnitId::kRingConsumer0;
    case isa::kRingConsumer1:
      return UnitId::kRingConsumer1;
    case isa::kNarrowToWide:
      return UnitId::kNarrowToWide;
    case isa::kWideToNarrow:
      return UnitId::kWideToNarrow;
    case isa::kMeshSouth:
      return UnitId::kMeshSouth;
    case isa::kMeshWest:
      return UnitId::kMeshWest;
    case isa::kMeshNorth:
      return UnitId::kMeshNorth;
    case isa::kMeshEast:
      return UnitId::kMeshEast;
    case isa::kNluLoad:
      return UnitId::kNlu;
    default:
      return UnitId::kTileSync;
  }
}

uint16_t tile_mask_of(const ProgramItem& item) {
  return std::visit(
      [](const auto& d) -> uint16_t {
        using T = std::decay_t<decltype(d)>;
        if constexpr (std::is_same_v<T, OpInstr>)
          return d.tile_mask;
        else if constexpr (std::is_same_v<T, RingInstr> || std::is_same_v<T, MeshInstr> ||
                           std::is_same_v<T, WideNarrowInstr> || std::is_same_v<T, NluLoadInstr>)
          return d.tile_mask;
        else if constexpr (std::is_same_v<T, TileSyncInstr>)
          return d.tiles;
        else
          return 0;
      },
      item.decoded);
}

// The 0x1a `units` bits in the tile CSR order (isa.md 2.8, 2.12): op, wideToNarrow, narrowToWide,
// ringBusConsumer0, ringBusConsumer1, ringBusProducer, meshBus0-3. The NLU load shares the op's
// bit.
constexpr std::array<UnitId, 10> kFenceUnitOrder = {UnitId::kOp,
                                                    UnitId::kWideToNarrow,
                                                    UnitId::kNarrowToWide,
                                                    UnitId::kRingConsumer0,
                                                    UnitId::kRingConsumer1,
                                                    UnitId::kRingProducer,
                                                    UnitId::kMeshSouth,
                                                    UnitId::kMeshWest,
                                                    UnitId::kMeshNorth,
                                                    UnitId::kMeshEast};

}  // namespace

Access access_of(Space space, bool write, const OpTtu& ttu, int64_t scale, int64_t base,
                 int64_t element) {
  Access a;
  a.space = space;
  a.write = write;
  a.lo = base + scale * ttu.min_address();
  a.hi = base + scale * ttu.max_address() + element;
  if (ttu.steps() > (1u << 20)) return a;
  std::vector<std::pair<int64_t, int64_t>> runs;
  TtuWalker w(ttu);
  do {
    const int64_t lo = base + scale * w.address();
    if (!runs.empty() && lo >= runs.back().first && lo <= runs.back().second)
      runs.back().second = std::max(runs.back().second, lo + element);
    else
      runs.push_back({lo, lo + element});
  } while (w.next());
  std::sort(runs.begin(), runs.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : runs) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  if (merged.size() > 1)  // else the bounding box says it all
    a.runs = std::make_shared<const std::vector<std::pair<int64_t, int64_t>>>(std::move(merged));
  return a;
}

Access access_of_offsets(Space space, bool write, const std::vector<int64_t>& offsets,
                         int64_t scale, int64_t base, int64_t element) {
  Access a;
  a.space = space;
  a.write = write;
  if (offsets.empty()) return a;
  std::vector<std::pair<int64_t, int64_t>> runs;
  for (int64_t off : offsets) runs.push_back({base + scale * off, base + scale * off + element});
  std::sort(runs.begin(), runs.end());
  std::vector<std::pair<int64_t, int64_t>> merged;
  for (const auto& r : runs) {
    if (!merged.empty() && r.first <= merged.back().second)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  a.lo = merged.front().first;
  a.hi = merged.back().second;
  if (merged.size() > 1)
    a.runs = std::make_shared<const std::vector<std::pair<int64_t, int64_t>>>(std::move(merged));
  return a;
}

bool overlaps(const Access& a, const Access& b) {
  if (a.space != b.space || a.hi <= b.lo || b.hi <= a.lo) return false;
  if (!a.runs && !b.runs) return true;
  // Runs of each (the bounding box alone when it has none), without copying them.
  const std::pair<int64_t, int64_t> box_a{a.lo, a.hi}, box_b{b.lo, b.hi};
  const std::span<const std::pair<int64_t, int64_t>> ra =
      a.runs ? std::span(*a.runs) : std::span(&box_a, 1);
  const std::span<const std::pair<int64_t, int64_t>> rb =
      b.runs ? std::span(*b.runs) : std::span(&box_b, 1);
  size_t i = 0, j = 0;
  while (i < ra.size() && j < rb.size()) {
    if (ra[i].second <= rb[j].first)
      ++i;
    else if (rb[j].second <= ra[i].first)
      ++j;
    else
      return true;
  }
  return false;
}

uint32_t writers_counted_by(uint32_t counters, Space space) {
  // Counter k (isa.md 2.12) -> the unit whose writes it counts and the space they go to. The
  // other counters count no write: credits returned by readers (MESH_*_OUT, RING_WRITE, the
  // PARAMETERS credit a narrowToWide or ring consumer waits for), producer ordinals (17, 18).
  struct Counted {
    int counter;
    UnitId unit;
    Space space;
  };
  static constexpr Counted kCounted[] = {
      {0, UnitId::kOp, Space::kNarrow},             // AVDATA: op results
      {1, UnitId::kNarrowToWide, Space::kWide},     // PARAMETERS: an op's weight FIFO feed
      {1, UnitId::kRingConsumer1, Space::kWide},    //   (MUL feed / ring parameter consumer)
      {3, UnitId::kMeshSouth, Space::kNarrow},      // MESH_NORTH_IN: words from the north
      {4, UnitId::kMeshWest, Space::kNarrow},       // MESH_EAST_IN
      {5, UnitId::kMeshNorth, Space::kNarrow},      // MESH_SOUTH_IN
      {6, UnitId::kMeshEast, Space::kNarrow},       // MESH_WEST_IN
      {11, UnitId::kWideToNarrow, Space::kNarrow},  // WIDE_TO_NARROW
      {12, UnitId::kWideToNarrow, Space::kBias},    // WIDE_TO_SCALING
      {13, UnitId::kNarrowToWide, Space::kWide},    // NARROW_TO_WIDE
      {14, UnitId::kRingConsumer0, Space::kWide},   // RING_READ_A
      {15, UnitId::kRingConsumer1, Space::kWide}};  // RING_READ_B
  uint32_t units = 0;
  for (const Counted& c : kCounted)
    if ((counters >> c.counter & 1) && c.space == space) units |= 1u << static_cast<int>(c.unit);
  return units;
}

namespace {
using Runs = std::vector<std::pair<int64_t, int64_t>>;
using RunSpan = std::span<const std::pair<int64_t, int64_t>>;
// The runs of an access without copying them: its list, or `box` set to its bounding box.
RunSpan runs_of(const Access& a, std::pair<int64_t, int64_t>& box) {
  if (a.runs) return *a.runs;
  box = {a.lo, a.hi};
  return RunSpan(&box, 1);
}
// a minus b; both sorted and merged.
Runs subtract(RunSpan a, RunSpan b) {
  Runs out;
  size_t j = 0;
  for (auto [lo, hi] : a) {
    while (j < b.size() && b[j].second <= lo) ++j;
    for (size_t k = j; k < b.size() && b[k].first < hi; ++k) {
      if (b[k].first > lo) out.emplace_back(lo, b[k].first);
      lo = std::max(lo, b[k].second);
    }
    if (lo < hi) out.emplace_back(lo, hi);
  }
  return out;
}
void set_runs(Access& a, Runs runs) {
  a.lo = runs.front().first;
  a.hi = runs.back().second;
  a.runs = std::make_shared<const Runs>(std::move(runs));
}
}  // namespace

const char* unit_name(UnitId unit) {
  static constexpr const char* kNames[] = {
      "op",        "wideToNarrow", "narrowToWide", "ringConsumer0", "ringConsumer1", "ringProducer",
      "meshSouth", "meshWest",     "meshNorth",    "meshEast",      "nluLoad",       "tileSync",
      "scalar",    "avDataPop",    "parameterPop", "infeed",        "outfeed"};
  const auto i = static_cast<size_t>(unit);
  return i < std::size(kNames) ? kNames[i] : "?";
}

int mesh_neighbour(int tile, uint8_t opcode) {
  const int row = tile / 4, col = tile % 4;
  switch (opcode) {
    case isa::kMeshSouth:
      return row < 3 ? tile + 4 : -1;
    case isa::kMeshWest:
      return col > 0 ? tile - 1 : -1;
    case isa::kMeshNorth:
      return row > 0 ? tile - 4 : -1;
    case isa::kMeshEast:
      return col < 3 ? tile + 1 : -1;
    default:
      return -1;
  }
}

VirtualEdgeTpu::Impl::Impl(ChipOptions o) : options(o) {
  for (uint32_t t = 0; t < kTileCount; ++t) {
    tiles[t].index = t;
    tile_state[t].last_barrier.fill(kNone);
    tile_state[t].gates.fill(kNone);
  }
}

void VirtualEdgeTpu::Impl::charge(uint64_t instructions) {
  budget_used += instructions;
  if (budget_used > options.instruction_budget)
    fail("program ", programs_received, " exceeded the instruction budget of ",
         options.instruction_budget, " executed instructions (runaway loop?)");
}

uint32_t VirtualEdgeTpu::Impl::new_work(uint32_t item, int tile, UnitId unit) {
  // Every work counts against the budget when it is created, not only when it runs (a work that
  // never runs still holds memory until the program ends), and their number is bounded.
  charge();
  if (works.size() >= options.max_work_items)
    fail("program ", programs_received, " dispatched more than ", options.max_work_items,
         " unit instructions (one per tile) before finishing, the limit of work items");
  Work& w = works.emplace_back();
  w.program = program.get();
  w.item = item;
  w.tile = tile;
  w.unit = unit;
  w.order = next_order++;
  w.ready_cycle = clock.scalar_now(scalar_executed());  // clock: issued now
  clock.add_work();
  finished.push_back(0);
  return static_cast<uint32_t>(works.size() - 1);
}

namespace {
bool has_forward_read(const Work& w) {
  return std::any_of(w.accesses.begin(), w.accesses.end(),
                     [](const Access& a) { return a.forward; });
}
}  // namespace

void VirtualEdgeTpu::Impl::add_hazards(const std::vector<uint32_t>& region, Work& n, uint32_t id) {
  // Per read: the byte runs an earlier instruction of the region writes. The rest of the read is a
  // forward read, even when earlier writers cover part of it (MobileNet's horizontal halo moves
  // read rows -1 and 16, which only the vertical moves issued after them write: the corners).
  std::vector<Runs> written;  // sized on the first RAW overlap (most works have none)
  // Per space, the bounding box of n's accesses: an earlier work none of whose accesses meets it
  // shares no bytes with n, so nothing below applies to it (most of a region).
  constexpr size_t kSpaces = 5;
  std::array<std::pair<int64_t, int64_t>, kSpaces> box;
  box.fill({INT64_MAX, INT64_MIN});
  for (const Access& a : n.accesses) {
    auto& [lo, hi] = box[static_cast<size_t>(a.space)];
    lo = std::min(lo, a.lo);
    hi = std::max(hi, a.hi);
  }
  auto meets_box = [&](const Work& e) {
    for (const Access& b : e.accesses) {
      const auto [lo, hi] = box[static_cast<size_t>(b.space)];
      if (b.lo < hi && lo < b.hi) return true;
    }
    return false;
  };
  for (uint32_t eid : region) {
    Work& e = works[eid];
    if (!meets_box(e)) continue;
    bool depend = false;
    bool e_forward_changed = false;
    // When n writes what e reads forward, e consumes n's output: n does not wait for e's other
    // reads of the same bytes (split_concat / MobileNet: an infeed from scalar memory issued
    // before the outfeed that rewrites the region it read last time).
    // But when n must follow e anyway (it reads or overwrites what e writes), e cannot wait for
    // n: e's forward read then takes the bytes as they are (MobileNet v2 word 411 reads an input
    // block whose first bytes the halo move at word 432, writing into e's output, reuses).
    bool follows_e = false;
    for (const Access& a : n.accesses)
      for (const Access& b : e.accesses)
        if (b.write && overlaps(a, b)) follows_e = true;
    const uint32_t n_unit = 1u << static_cast<uint32_t>(n.unit);
    bool feeds_e = false;
    if (e.unit != n.unit && !e.done && !follows_e)
      for (const Access& a : n.accesses)
        for (const Access& b : e.accesses)
          if (a.write && b.forward && (b.waits_for & n_unit) && overlaps(a, b)) feeds_e = true;
    for (size_t i = 0; i < n.accesses.size(); ++i) {
      const Access& a = n.accesses[i];
      for (Access& b : e.accesses) {
        if (!overlaps(a, b) || (!a.write && !b.write)) continue;
        if (b.write) {  // RAW or WAW: program order
          depend = true;
          if (!a.write) {
            if (written.empty()) written.resize(n.accesses.size());
            if (b.runs)
              written[i].insert(written[i].end(), b.runs->begin(), b.runs->end());
            else
              written[i].emplace_back(b.lo, b.hi);
          }
        } else if (b.forward && (b.waits_for & n_unit) && e.unit != n.unit && !e.done &&
                   !follows_e) {
          // e reads what a later instruction on another unit produces: this one. What this one
          // does not write stays a forward read.
          e.deps.push_back(id);
          e_forward_changed = true;
          std::pair<int64_t, int64_t> box_a, box_b;
          Runs rest = subtract(runs_of(b, box_b), runs_of(a, box_a));
          if (rest.empty())
            b.forward = false;
          else
            set_runs(b, std::move(rest));
        } else if (feeds_e) {
          continue;
        } else if (!b.forward) {
          depend = true;  // WAR
        } else {
          b.forward = false;
          e_forward_changed = true;
          depend = true;  // WAR
        }
      }
    }
    if (depend && !e.done) n.deps.push_back(eid);
    if (depend && e.done) clock_depends(n, eid);  // clock: finished, but maybe later in cycles
    if (e_forward_changed) e.forward_reads = has_forward_read(e);
  }
  const size_t count = n.accesses.size();
  for (size_t i = 0; i < count; ++i) {
    // A read that waits on no counter counting a writer of its space takes the bytes in program
    // order: what earlier regions left, or earlier writers of its region (below).
    if (n.accesses[i].write || n.accesses[i].waits_for == 0) continue;
    if (written.empty() || written[i].empty()) {
      n.accesses[i].forward = true;
      continue;
    }
    Runs& w = written[i];
    std::sort(w.begin(), w.end());
    Runs merged;
    for (auto r : w) {
      if (!merged.empty() && r.first <= merged.back().second)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    std::pair<int64_t, int64_t> box;
    Runs rest = subtract(runs_of(n.accesses[i], box), merged);
    if (rest.empty()) continue;
    // The covered part orders after its writers; the rest waits for a later writer (keeping it in
    // the covered access too would make that writer wait for this read: a cycle).
    Access forward = n.accesses[i];
    forward.forward = true;
    set_runs(n.accesses[i], subtract(runs_of(n.accesses[i], box), rest));
    set_runs(forward, std::move(rest));
    n.accesses.push_back(std::move(forward));
  }
  n.forward_reads = has_forward_read(n);
}

void VirtualEdgeTpu::Impl::add_scalar_hazards(Work& n, uint32_t id) {
  // Reuse the tile logic over the scalar region (a scratch copy: the erase below).
  std::vector<uint32_t> region = scalar_region;
  // An infeed from scalar memory reads what the next outfeed into scalar memory writes, even when
  // an earlier outfeed of the region wrote the same bytes (compiled programs issue it before that
  // outfeed; its pop_wait counts the words outfed before: MobileNet v1 0.25 word 727 takes the
  // weights of outfeed 731, not those of 618).
  if (n.unit == UnitId::kInfeed)
    std::erase_if(region, [&](uint32_t e) {
      return std::any_of(works[e].accesses.begin(), works[e].accesses.end(),
                         [](const Access& a) { return a.write; });
    });
  add_hazards(region, n, id);
  scalar_region.push_back(id);
}

void VirtualEdgeTpu::Impl::close_region(TileState& ts) {
  for (uint32_t id : ts.region) works[id].region_open = false;
  ts.region.clear();
}

void VirtualEdgeTpu::Impl::dispatch(uint32_t index) {
  const ProgramItem& item = program->items[index];
  const uint8_t opcode = item.opcode;
  if (opcode >= isa::kPop && opcode <= isa::kOutfeed) {
    UnitId unit = opcode == isa::kInfeed    ? UnitId::kInfeed
                  : opcode == isa::kOutfeed ? UnitId::kOutfeed
                                            : UnitId::kAvDataPop;
    if (opcode == isa::kPop && !std::get<PopInstr>(item.decoded).activations)
      unit = UnitId::kParameterPop;
    const uint32_t id = new_work(index, -1, unit);
    Work& w = works[id];
    if (opcode == isa::kPop) {
      last_pop[std::get<PopInstr>(item.decoded).activations ? 1 : 0] = id;
    } else if (opcode == isa::kInfeed) {
      const auto& f = std::get<InfeedInstr>(item.decoded);
      if (f.from_scalar_memory) {
        Access read{Space::kScalarMemory, false, 4 * int64_t{f.offset},
                    4 * (int64_t{f.offset} + f.units)};
        read.waits_for = 1u << static_cast<uint32_t>(UnitId::kOutfeed);  // SCALAR_INFEED
        w.accesses.push_back(read);
      } else {
        w.pop = last_pop[f.activations ? 1 : 0];
        if (w.pop == kNone)
          fail("word ", item.word_offset, ": infeed before any ",
               f.activations ? "avDataPop" : "parameterPop");
        w.deps.push_back(w.pop);
      }
    } else {
      const auto& o = std::get<OutfeedInstr>(item.decoded);
      if (o.to_scalar_memory)
        w.accesses.push_back({Space::kScalarMemory, true, o.base, int64_t{o.base} + o.bytes});
    }
    add_scalar_hazards(works[id], id);
    const size_t q = unit == UnitId::kAvDataPop      ? 0
                     : unit == UnitId::kParameterPop ? 1
                     : unit == UnitId::kInfeed       ? 2
                                                     : 3;
    dma_queues[q].push_back(id);
    return;
  }

  const uint16_t mask = dispatch_tile_mask(item, tile_mask_of(item), scalar);
  const int64_t narrow_shift = indirect_narrow_shift(item, scalar);
  const RingInstr* producer = nullptr;
  std::vector<uint32_t> producer_works;
  const std::vector<Access>* item_footprint = nullptr;  // the same for all its tiles
  if (opcode == isa::kRingProducer && (std::get<RingInstr>(item.decoded).dest & 0xffff) != 0)
    producer = &std::get<RingInstr>(item.decoded);
  for (int t = 0; t < static_cast<int>(kTileCount); ++t) {
    if (!(mask >> t & 1)) continue;
    TileState& ts = tile_state[t];
    if (opcode == isa::kTileSync) {
      const auto& s = std::get<TileSyncInstr>(item.decoded);
      for (int k = 0; k < 19; ++k)
        if (s.counters >> k & 1) {
          ++stats.tile_counter_ops[k];
          tiles[t].counters[k] = static_cast<int32_t>(s.count);
        }
      if ((s.units & 0x3ff) == 0) continue;  // counter-only operation: nothing to order
      const uint32_t id = new_work(index, t, UnitId::kTileSync);
      for (size_t bit = 0; bit < kFenceUnitOrder.size(); ++bit) {
        if (!(s.units >> bit & 1)) continue;
        // Bit 0 also covers the NLU load (a fixed array: no allocation per bit and tile).
        const std::array<UnitId, 2> both{kFenceUnitOrder[bit], UnitId::kNlu};
        for (UnitId u : std::span(both.data(), bit == 0 ? 2 : 1)) {
          auto& q = ts.queues[static_cast<size_t>(u)];
          if (!q.empty()) works[id].deps.push_back(q.back());
          const uint32_t prev = ts.last_barrier[static_cast<size_t>(u)];
          if (prev != kNone) works[id].deps.push_back(prev);
          ts.last_barrier[static_cast<size_t>(u)] = id;
        }
      }
      syncs.push_back(id);
      sync_gates.push_back(kNone);
      if ((s.units & 0x3ff) == 0x3ff) close_region(ts);
      continue;
    }
    const UnitId unit = tile_unit_of(opcode);
    const uint32_t id = new_work(index, t, unit);
    if (!item_footprint) item_footprint = &footprint_of(*program, index);
    if (narrow_shift == 0) {
      works[id].accesses = *item_footprint;
    } else {
      works[id].accesses = shifted_narrow_footprint(*item_footprint, narrow_shift);
      works[id].narrow_shift = narrow_shift;
    }
    const uint32_t barrier = ts.last_barrier[static_cast<size_t>(unit)];
    if (barrier != kNone) works[id].deps.push_back(barrier);
    if (opcode == isa::kRingProducer) {
      const auto& r = std::get<RingInstr>(item.decoded);
      works[id].packets = static_cast<uint32_t>(r.ttu.steps());
      if (r.dest >> 16 & 1) {
        works[id].ordinal = next_scalar_ordinal++;
        to_scalar[works[id].ordinal];  // the outfeeds wait on this producer
      }
    }
    if (opcode == isa::kWideToNarrow) note_bias_groups(ts, std::get<WideNarrowInstr>(item.decoded));
    if (producer) {
      for (uint32_t prev : last_tile_producers[producer->to_c1 ? 1 : 0])
        if (!works[prev].done)
          works[id].deps.push_back(prev);
        else
          clock_depends(works[id], prev);
      producer_works.push_back(id);
    }
    // A FIFO reader whose rows' earlier fills are all taken reads the next writer's fill.
    std::vector<uint32_t> taken;
    if (opcode == isa::kWideToNarrow || opcode == isa::kRingProducer)
      taken = fifo_writers_all_taken(ts, *program, index);
    if (taken.empty()) {
      add_hazards(ts.region, works[id], id);
    } else {
      std::vector<uint32_t> rest = ts.region;
      std::erase_if(rest, [&](uint32_t e) {
        return std::find(taken.begin(), taken.end(), e) != taken.end();
      });
      add_hazards(rest, works[id], id);
    }
    ts.region.push_back(id);
    ts.queues[static_cast<size_t>(unit)].push_back(id);
    ts.busy |= 1u << static_cast<uint32_t>(unit);
  }
  if (producer && !producer_works.empty())
    last_tile_producers[producer->to_c1 ? 1 : 0] = std::move(producer_works);
}

// A bias load (mode-2 wideToNarrow) reading the aux row of a pending consumer on its tile tells
// that consumer how many bias blocks (groups) its stream carries: one per wide step and plane.
void VirtualEdgeTpu::Impl::note_bias_groups(TileState& ts, const WideNarrowInstr& load) {
  if (load.mode != 2) return;
  for (UnitId unit : {UnitId::kRingConsumer0, UnitId::kRingConsumer1}) {
    const auto& q = ts.queues[static_cast<size_t>(unit)];
    for (auto it = q.rbegin(); it != q.rend(); ++it) {
      Work& c = works[*it];
      if (c.done) continue;
      const auto& r = std::get<RingInstr>(c.program->items[c.item].decoded);
      if (!r.aux_en0 || (r.aux_addr0 & ~3u) != (load.wide_addr & ~3u)) continue;
      if (c.aux_groups == 0)
        c.aux_groups = static_cast<uint32_t>(load.wide_ttu.steps() / bias_load_planes(load));
      break;
    }
  }
}

bool VirtualEdgeTpu::Impl::deps_done(Work& w) {
  // Polled for every queue front on every pass: drop completed dependencies from the back and stop
  // at the first one still pending, so a blocked work costs O(1) per poll instead of a scan.
  while (!w.deps.empty() && finished[w.deps.back()]) {
    clock_depends(w, w.deps.back());
    w.deps.pop_back();
  }
  if (!w.deps.empty()) return false;
  return !(w.region_open && w.forward_reads);
}

void VirtualEdgeTpu::Impl::finish(uint32_t id) {
  works[id].done = true;
  finished[id] = 1;
}

uint32_t VirtualEdgeTpu::Impl::gate_of(uint32_t id) const {
  const Work& w = works[id];
  return w.deps.empty() ? kNone : w.deps.back();  // deps_done dropped the finished ones
}

void VirtualEdgeTpu::Impl::trace(const Work& w) {
  ++stats.instructions[static_cast<size_t>(w.unit)];
  if (!options.trace) return;
  const ProgramItem& item = w.program->items[w.item];
  options.trace->record(
      {programs_received, item.word_offset, item.opcode, w.tile, unit_name(w.unit)});
}

bool VirtualEdgeTpu::Impl::run_units() {
  bool progress = false;
  bool again = true;
  while (again) {
    again = false;
    // A queue (or fence) whose gate is still closed would fail deps_done again: skip it.
    size_t kept = 0;
    for (size_t i = 0; i < syncs.size(); ++i) {
      const uint32_t id = syncs[i];
      uint32_t gate = sync_gates[i];
      if (!gate_closed(gate)) {
        Work& s = works[id];
        if (deps_done(s)) {
          clock_tile_work(id, 0, 0, 0);
          finish(id);
          trace(s);
          again = true;
          continue;
        }
        gate = gate_of(id);
      }
      syncs[kept] = id;
      sync_gates[kept++] = gate;
    }
    syncs.resize(kept);
    sync_gates.resize(kept);
    for (uint32_t t = 0; t < kTileCount; ++t) {
      TileState& ts = tile_state[t];
      for (uint32_t busy = ts.busy; busy != 0; busy &= busy - 1) {
        const auto u = static_cast<size_t>(std::countr_zero(busy));
        auto& q = ts.queues[u];
        uint32_t& gate = ts.gates[u];
        while (!q.empty() && !gate_closed(gate)) {
          if (!try_run_tile_work(q.front())) {
            gate = gate_of(q.front());
            break;
          }
          q.pop_front();
          gate = kNone;
          again = true;
        }
        if (q.empty()) ts.busy &= ~(1u << u);
      }
    }
    for (size_t k = 0; k < dma_queues.size(); ++k) {
      auto& q = dma_queues[k];
      uint32_t& gate = dma_gates[k];
      while (!q.empty() && !gate_closed(gate)) {
        if (!try_run_dma_work(q.front())) {
          gate = gate_of(q.front());
          break;
        }
        q.pop_front();
        gate = kNone;
        again = true;
      }
    }
    progress |= again;
  }
  return progress;
}

bool VirtualEdgeTpu::Impl::all_works_done() const {
  for (const auto& ts : tile_state)
    if (ts.busy != 0) return false;
  for (const auto& q : dma_queues)
    if (!q.empty()) return false;
  for (uint32_t id : syncs)
    if (!works[id].done) return false;
  return true;
}

void VirtualEdgeTpu::Impl::start_next_program() {
  if (pending_programs.empty()) return;
  if (program) retired.push_back(std::move(program));
  program = std::move(pending_programs.front());
  pending_programs.pop_front();
  scalar.pc = 0;
  scalar.loops.clear();
  scalar.running = true;
  scalar.halt_code = 0;
  budget_used = 0;
}

bool VirtualEdgeTpu::Impl::finish_program_if_done() {
  if (scalar.running) return false;
  if (program && scalar.halt_code == 1) {  // continues in the next bitstream
    if (pending_programs.empty()) return false;
    start_next_program();
    return true;
  }
  if (!all_works_done()) return false;
  const bool had = program != nullptr || !pending_programs.empty();
  if (program) {
    ++stats.programs_completed;
    clock.end_program(scalar_executed());
    program.reset();
    retired.clear();
    works.clear();
    finished.clear();
    syncs.clear();
    sync_gates.clear();
    dma_gates.fill(kNone);
    scalar_region.clear();
    staging.clear();
    staging_read_at.clear();
    for (auto& p : last_tile_producers) p.clear();
    to_scalar.clear();
    next_scalar_ordinal = outfeed_ordinal = 0;
    last_pop = {kNone, kNone};
    for (auto& ts : tile_state) {
      ts.region.clear();
      ts.last_barrier.fill(kNone);
      ts.gates.fill(kNone);
    }
    for (auto& tile : tiles) {
      tile.fifo_rows.clear();
      tile.staging.clear();
    }
  }
  start_next_program();
  return had;
}

std::string VirtualEdgeTpu::Impl::describe(uint32_t id) const {
  const Work& w = works[id];
  const ProgramItem& item = w.program->items[w.item];
  std::ostringstream s;
  if (w.tile >= 0) s << "tile " << w.tile << " ";
  s << unit_name(w.unit) << " (" << opcode_name(item.opcode) << " at word " << item.word_offset
    << ")";
  return s.str();
}

std::string VirtualEdgeTpu::Impl::blocked_reason(uint32_t id) {
  Work& w = works[id];
  std::ostringstream s;
  for (size_t k = 0; k < w.deps.size(); ++k)
    if (const uint32_t d = w.deps[k]; !works[d].done) {
      s << describe(d) << " to finish";
      return s.str();
    }
  if (w.region_open)
    for (const Access& a : w.accesses)
      if (a.forward)
        return cat("a writer of bytes [", a.lo, ", ", a.hi,
                   ") issued later in its fence region (no fence yet)");
  const ProgramItem& item = w.program->items[w.item];
  switch (item.opcode) {
    case isa::kRingConsumer0:
    case isa::kRingConsumer1: {
      const auto& r = std::get<RingInstr>(item.decoded);
      const auto& queue = tile_state[w.tile].ring_in[item.opcode == isa::kRingConsumer1 ? 1 : 0];
      s << consumer_packets_needed(r, w.aux_groups) << " ring packets (" << queue.size()
        << " queued)";
      return s.str();
    }
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast: {
      const auto& m = std::get<MeshInstr>(item.decoded);
      s << m.in_ttu.steps() << " mesh words ("
        << tile_state[w.tile].mesh_in[isa::mesh_direction(item.opcode)].size() << " arrived)";
      return s.str();
    }
    case isa::kPop: {
      const auto& p = std::get<PopInstr>(item.decoded);
      s << p.units << " units of the host " << (p.activations ? "input" : "parameter")
        << " stream (" << host_in[p.activations ? 1 : 0].size() << " bytes received)";
      return s.str();
    }
    case isa::kOutfeed:
      s << "ring packets for the scalar core from producer #" << outfeed_ordinal;
      return s.str();
    default:
      return "nothing known (scheduler bug)";
  }
}

std::string VirtualEdgeTpu::Impl::deadlock_report() {
  std::ostringstream s;
  s << "deadlock: every unit waits (program " << programs_received << ")";
  if (scalar.running && program) {
    const ProgramItem& item = program->items[scalar.pc];
    s << "\n  scalar core at word " << item.word_offset << " (" << opcode_name(item.opcode)
      << "): waits for earlier tile/DMA instructions to finish";
  }
  int listed = 0;
  auto list = [&](uint32_t id) {
    if (listed++ < 40) s << "\n  " << describe(id) << ": waits for " << blocked_reason(id);
  };
  for (uint32_t t = 0; t < kTileCount; ++t)
    for (auto& q : tile_state[t].queues)
      if (!q.empty()) list(q.front());
  for (auto& q : dma_queues)
    if (!q.empty()) list(q.front());
  for (uint32_t id : syncs)
    if (!works[id].done) list(id);
  if (listed > 40) s << "\n  ... and " << (listed - 40) << " more";
  return s.str();
}

RunState VirtualEdgeTpu::Impl::advance() {
  if (!fault.empty()) return RunState::kFaulted;
  try {
    for (;;) {
      waiting_on_host = false;
      bool progress = false;
      while (step_scalar()) progress = true;
      if (run_units()) progress = true;
      if (finish_program_if_done()) progress = true;
      if (!progress) break;
    }
  } catch (const Error& e) {
    fault = e.what();
    return RunState::kFaulted;
  }
  if (!program && pending_programs.empty()) return RunState::kIdle;
  if (waiting_on_host || (!scalar.running && scalar.halt_code == 1)) return RunState::kWaiting;
  fault = deadlock_report();
  return RunState::kFaulted;
}

}  // namespace tinycoral::chip
