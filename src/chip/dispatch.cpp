// Dispatch (docs/chip.md "Scheduling"): the scalar core hands every tile instruction to the unit
// queue of each tile in its mask and every scalar-side DMA instruction to its DMA queue, in program
// order, as works with their dependencies; ring producers are ordered per consumer, and a bias
// load tells a pending ring consumer how many groups its stream carries. Also the mesh topology.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

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

}  // namespace tinycoral::chip
