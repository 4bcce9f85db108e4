// What the run reports when nothing can progress (docs/chip.md "Deadlock"): per blocked unit, its
// instruction (tile, unit, opcode, word offset) and what it waits for.
#include <sstream>
#include <string>

#include "chip/machine.h"

namespace tinycoral::chip {

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

}  // namespace tinycoral::chip
