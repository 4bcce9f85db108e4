// The clock's view of each executed instruction (clock.h): what it moved or computed, which unit
// it occupied, which stream it read and which streams it fed. The unit handlers call these hooks
// just before a work finishes; the rules themselves are in clock.cpp.
#include <algorithm>

#include "chip/machine.h"

namespace tinycoral::chip {
namespace {

// One unit slot per unit of each tile, and after them the scalar side's units.
uint32_t unit_slot(const Work& w) {
  const auto u = static_cast<uint32_t>(w.unit);
  return w.tile >= 0 ? static_cast<uint32_t>(w.tile) * 16 + u : 16 * kTileCount + u;
}

uint64_t op_steps(const OpInstr& op) {
  uint64_t steps = 1;
  for (uint32_t n : op.loops) steps *= uint64_t{n} + 1;
  return steps;
}

// Whether the next op on the work's tile, in program order, reads its weights through a FIFO.
bool next_op_reads_fifo(const Work& w) {
  const auto& items = w.program->items;
  for (size_t i = w.item + 1; i < items.size(); ++i) {
    if (!isa::is_tensor_op(items[i].opcode)) continue;
    const auto& op = std::get<OpInstr>(items[i].decoded);
    if (op.tile_mask >> w.tile & 1) return op.par_fifo != 0;
  }
  return false;
}

}  // namespace

std::pair<uint64_t, uint64_t> VirtualEdgeTpu::Impl::clock_tile_work(uint32_t id, uint64_t macs,
                                                                    uint64_t taken, uint64_t sent,
                                                                    uint64_t bytes) {
  const Work& w = works[id];
  const ProgramItem& item = w.program->items[w.item];
  WorkAmount amount;
  ClockUnit unit = ClockUnit::kMac;
  std::pair<uint64_t, uint64_t> input{0, 0};
  const uint8_t opcode = item.opcode;
  if (isa::is_tensor_op(opcode)) {
    const auto& op = std::get<OpInstr>(item.decoded);
    amount.op_steps = op_steps(op);
    amount.macs = macs;
    if (op.par_fifo != 0) input.second = clock.take_fifo_end(w.tile);
  } else if (opcode == isa::kRingProducer) {
    unit = ClockUnit::kRing;
    amount.bytes = std::get<RingInstr>(item.decoded).ttu.steps() * kWideRowBytes;
  } else if (opcode == isa::kRingConsumer0 || opcode == isa::kRingConsumer1) {
    unit = ClockUnit::kRing;
    amount.bytes = bytes;  // 256-byte rows, or 16-byte entries from scalar memory
    input = clock.ring(w.tile, opcode == isa::kRingConsumer1 ? 1 : 0).take(taken);
  } else if (opcode == isa::kNarrowToWide || opcode == isa::kWideToNarrow) {
    unit = ClockUnit::kDma;
    const auto& n = std::get<WideNarrowInstr>(item.decoded);
    amount.bytes = n.narrow_ttu.steps() * (opcode == isa::kWideToNarrow && n.mode == 2 ? 8 : 4);
  } else if (isa::is_mesh(opcode)) {
    unit = ClockUnit::kMesh;
    amount.mesh_words = std::max(taken, sent);
    if (taken > 0) input = clock.mesh(w.tile, isa::mesh_direction(opcode)).take(taken);
  } else if (opcode == isa::kNluLoad) {
    amount.fixed = clock.costs().nlu_load;
  } else {  // 0x1a fence
    unit = ClockUnit::kScalar;
    amount.fixed = clock.costs().fence;
  }
  const auto [start, finish] =
      clock.run(id, w.ready_cycle, unit_slot(w), unit, amount, input, w.tile);
  // Streams it fed: the first packet (word) arrives one packet after the sender started.
  if ((opcode == isa::kRingConsumer0 || opcode == isa::kRingConsumer1) && next_op_reads_fifo(w)) {
    const uint64_t row = kWideRowBytes / std::max(1u, clock.costs().ring_bytes_per_cycle);
    clock.feed_fifo(id, w.tile, std::max(start, input.first) + clock.costs().transfer_start + row);
  } else if (opcode == isa::kRingProducer) {
    const auto& r = std::get<RingInstr>(item.decoded);
    const uint64_t steps = r.ttu.steps();
    const uint64_t first = start + clock.costs().transfer_start +
                           kWideRowBytes / std::max(1u, clock.costs().ring_bytes_per_cycle);
    for (uint32_t t = 0; t < kTileCount; ++t)
      if (r.dest >> t & 1)
        clock.ring(static_cast<int>(t), r.to_c1 ? 1 : 0).push(steps, first, finish);
    if (r.dest >> 16 & 1) clock.to_scalar()[w.ordinal].push(steps, first, finish);
  } else if (isa::is_mesh(opcode) && sent > 0) {
    const int neighbour = mesh_neighbour(w.tile, opcode);
    if (neighbour >= 0)
      clock.mesh(neighbour, isa::mesh_direction(opcode))
          .push(sent, start + clock.costs().transfer_start, finish);
  }
  return {start, finish};
}

void VirtualEdgeTpu::Impl::clock_dma_work(uint32_t id, uint64_t bytes, uint64_t packets) {
  const Work& w = works[id];
  const ProgramItem& item = w.program->items[w.item];
  WorkAmount amount;
  amount.bytes = bytes;
  std::pair<uint64_t, uint64_t> input{0, 0};
  if (item.opcode == isa::kOutfeed) {  // packets addressed to the scalar core, in producer order
    auto& streams = clock.to_scalar();
    uint64_t left = packets;
    bool any = false;
    for (auto it = streams.begin(); it != streams.end() && left > 0;) {
      const uint64_t n = std::min(left, it->second.count());
      const auto [first, last] = it->second.take(n);
      if (!any) input.first = first;
      any = true;
      input.second = std::max(input.second, last);
      left -= n;
      if (it->second.count() == 0)
        it = streams.erase(it);
      else
        ++it;
    }
  }
  const auto [start, finish] =
      clock.run(id, w.ready_cycle, unit_slot(w), ClockUnit::kDma, amount, input);
  if (item.opcode == isa::kInfeed) {
    const auto& f = std::get<InfeedInstr>(item.decoded);
    const uint64_t first = start + clock.costs().transfer_start +
                           f.packet_bytes / std::max(1u, clock.costs().dma_bytes_per_cycle);
    for (uint32_t t = 0; t < kTileCount; ++t)
      if (f.tiles >> t & 1) clock.ring(static_cast<int>(t), 0).push(packets, first, finish);
  } else if (item.opcode == isa::kOutfeed &&
             std::get<OutfeedInstr>(item.decoded).to_scalar_memory) {
    clock.scalar_memory_ready = std::max(clock.scalar_memory_ready, finish);
  }
}

}  // namespace tinycoral::chip
