// The scalar-side DMA units (isa.md 2.10): avDataPop / parameterPop (0x25) stage a host stream,
// infeed (0x26) sends staged bytes (or scalar memory) over the ring to tiles, outfeed (0x27) drains
// the packets that ring producers address to the scalar core into the host output stream or scalar
// memory. Each unit runs its own queue in order; docs/chip.md lists the unit sizes and hypotheses.
// This file delivers output bytes and dispatches a ready instruction to its handler in units/
// (pop.cpp, infeed.cpp, outfeed.cpp).
#include <algorithm>

#include "chip/machine.h"
#include "chip/units/dma_work.h"
#include "common/error.h"

namespace tinycoral::chip {

void VirtualEdgeTpu::Impl::deliver_output_bytes(std::span<const uint8_t> bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (open_outputs.empty())
      fail("the chip sent ", bytes.size() - pos,
           " output bytes with no open output descriptor (tag 3)");
    OutputDescriptor& d = open_outputs.front();
    const size_t take = std::min<size_t>(d.length - d.data.size(), bytes.size() - pos);
    d.data.insert(d.data.end(), bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                  bytes.begin() + static_cast<std::ptrdiff_t>(pos + take));
    pos += take;
    if (d.data.size() == d.length) {
      stats.host_out_bytes += d.length;
      outputs.push_back(std::move(d.data));
      open_outputs.pop_front();
    }
  }
}

bool VirtualEdgeTpu::Impl::try_run_dma_work(uint32_t id) {
  Work& w = works[id];
  if (!deps_done(w)) return false;
  DmaWork d{id, w, w.program->items[w.item]};
  bool ran = false;
  switch (d.item.opcode) {
    case isa::kPop:
      ran = run_pop(d);
      break;
    case isa::kInfeed:
      ran = run_infeed(d);
      break;
    case isa::kOutfeed:
      ran = run_outfeed(d);
      break;
    default:
      d.fail("not a DMA instruction");
  }
  if (!ran) return false;
  charge();
  clock_dma_work(id, d.bytes, d.packets);
  finish(id);
  trace(w);
  return true;
}

}  // namespace tinycoral::chip
