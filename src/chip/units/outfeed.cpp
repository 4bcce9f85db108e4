// Outfeed (0x27): drains the ring packets that producers address to the scalar core, in producer
// order, into the host output stream or scalar memory (isa.md 2.10).
#include <algorithm>
#include <cstring>
#include <vector>

#include "chip/units/dma_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_outfeed(DmaWork& d) {
  const auto& o = std::get<OutfeedInstr>(d.item.decoded);
  const uint64_t packets = (uint64_t{o.bytes} + kWideRowBytes - 1) / kWideRowBytes;
  // Count the packets available in producer order before taking any (the outfeed is atomic);
  // a producer that has not run yet blocks the stream behind it.
  uint64_t available = 0;
  for (auto it = to_scalar.lower_bound(outfeed_ordinal);
       it != to_scalar.end() && available < packets; ++it) {
    if (!it->second.produced) break;
    available += it->second.packets.size();
  }
  if (available < packets) return false;
  std::vector<uint8_t> data;
  for (uint64_t k = 0; k < packets; ++k) {
    auto it = to_scalar.lower_bound(outfeed_ordinal);
    while (it != to_scalar.end() && it->second.produced && it->second.packets.empty()) {
      it = to_scalar.erase(it);
    }
    if (it == to_scalar.end() || it->second.packets.empty())
      d.fail("ring stream to the scalar core ran dry");
    outfeed_ordinal = it->first;
    Packet p = std::move(it->second.packets.front());
    it->second.packets.pop_front();
    buffered_bytes -= p.size();
    data.insert(data.end(), p.begin(), p.end());
  }
  data.resize(o.bytes);
  d.bytes = o.bytes;
  d.packets = packets;
  if (o.to_scalar_memory) {
    if (uint64_t{o.base} + o.bytes > kScalarStreamBytes)
      d.fail(cat("writes scalar memory [", o.base, ", ", o.base + o.bytes, ") beyond ",
                 kScalarStreamBytes, " bytes"));
    if (uint64_t{o.base} + o.bytes > scalar.smem.size()) scalar.smem.resize(o.base + o.bytes);
    if (!data.empty()) std::memcpy(scalar.smem.data() + o.base, data.data(), data.size());
  } else {
    deliver_output_bytes(data);
  }
  return true;
}

}  // namespace tinycoral::chip
