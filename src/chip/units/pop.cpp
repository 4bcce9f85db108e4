// avDataPop / parameterPop (0x25): stage the next bytes of a host stream (tag 1 activations in
// 8-byte units, tag 2 parameters in 64-byte units) for the infeeds that send them on; waits for the
// host while the stream is short (isa.md 2.10).
#include <algorithm>
#include <cstring>
#include <vector>

#include "chip/units/dma_work.h"

namespace tinycoral::chip {

bool VirtualEdgeTpu::Impl::run_pop(DmaWork& d) {
  const auto& p = std::get<PopInstr>(d.item.decoded);
  const uint64_t bytes = uint64_t{p.units} * (p.activations ? kActivationUnit : kParameterUnit);
  auto& host = host_in[p.activations ? 1 : 0];
  if (host.size() < bytes) {
    waiting_on_host = true;
    return false;
  }
  std::vector<uint8_t> staged(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(bytes));
  host.erase(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(bytes));
  staging[d.id] = std::move(staged);
  d.bytes = bytes;
  return true;
}

}  // namespace tinycoral::chip
