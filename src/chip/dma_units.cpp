// The scalar-side DMA units (isa.md 2.10): avDataPop / parameterPop (0x25) stage a host stream,
// infeed (0x26) sends staged bytes (or scalar memory) over the ring to tiles, outfeed (0x27) drains
// the packets that ring producers address to the scalar core into the host output stream or scalar
// memory. Each unit runs its own queue in order; docs/chip.md lists the unit sizes and hypotheses.
#include <algorithm>
#include <cstring>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {
constexpr uint64_t kStagingWrapBytes = 128 * 1024;
}
namespace {

[[noreturn]] void fail_dma(const ProgramItem& item, const std::string& what) {
  fail(opcode_name(item.opcode), " at word ", item.word_offset, ": ", what);
}

constexpr uint32_t kActivationUnit = 8;  // bytes per avDataPop/infeed unit ("act unit")
constexpr uint32_t kParameterUnit = 64;  // bytes per parameterPop/infeed unit

}  // namespace

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
  const ProgramItem& item = w.program->items[w.item];
  uint64_t clock_bytes = 0, clock_packets = 0;  // clock: what it moved
  switch (item.opcode) {
    case isa::kPop: {
      const auto& p = std::get<PopInstr>(item.decoded);
      const uint64_t bytes = uint64_t{p.units} * (p.activations ? kActivationUnit : kParameterUnit);
      auto& host = host_in[p.activations ? 1 : 0];
      if (host.size() < bytes) {
        waiting_on_host = true;
        return false;
      }
      std::vector<uint8_t> staged(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(bytes));
      host.erase(host.begin(), host.begin() + static_cast<std::ptrdiff_t>(bytes));
      staging[id] = std::move(staged);
      clock_bytes = bytes;
      break;
    }
    case isa::kInfeed: {
      const auto& f = std::get<InfeedInstr>(item.decoded);
      const uint32_t unit = f.from_scalar_memory ? 4
                            : f.activations      ? kActivationUnit
                                                 : kParameterUnit;
      uint64_t begin = uint64_t{f.offset} * unit;
      const uint64_t length = uint64_t{f.units} * unit;
      std::span<const uint8_t> source;
      if (f.from_scalar_memory) {
        source = scalar.smem;
      } else {
        auto it = staging.find(w.pop);
        if (it == staging.end()) fail_dma(item, "its pop staged nothing");
        source = it->second;
        // The offset field counts modulo 128 KiB: gen2020 MobileNet v1 0.25's caching program
        // pops 584 KiB once and its infeeds' offsets run 0x750 -> 0x058 (64-byte units) where the
        // parameters continue at 128 KiB + 0x58 x 64 (blob offset 136704 = the layer-12
        // depthwise block the tile later sends on).
        // Infeeds of one pop run forward: each starts at the wrap of its offset nearest to the end
        // of the previous one. They may overlap it by a little: PoseNet's tile rows start 3 bytes
        // into a unit, so tile row 1's infeed (word 216, offset 0x3eb5) re-sends the last 8-byte
        // unit of row 0's (word 208, 0x3eb6 units); moving it a whole wrap on gave tiles 4-7
        // someone else's pixels.
        auto [at, fresh] = staging_read_at.try_emplace(w.pop, begin);
        while (!fresh && begin + kStagingWrapBytes / 2 < at->second &&
               begin + length + kStagingWrapBytes <= source.size())
          begin += kStagingWrapBytes;
        at->second = begin + length;
      }
      if (begin + length > source.size())
        fail_dma(item, cat("sends bytes [", begin, ", ", begin + length, ") but its source holds ",
                           source.size()));
      // One block holds the bytes; every destination queues its packets as one run of slices.
      if (length > 0 && f.packet_bytes == 0) fail_dma(item, "sends packets of 0 bytes");
      if (length > 0 && (f.tiles & ((1u << kTileCount) - 1))) {  // (no memcpy from an empty source)
        std::shared_ptr<uint8_t[]> block = std::make_shared_for_overwrite<uint8_t[]>(length);
        std::memcpy(block.get(), source.data() + begin, length);
        for (uint32_t t = 0; t < kTileCount; ++t) {
          if (!(f.tiles >> t & 1)) continue;
          tile_state[t].ring_in[0].push(block, 0, length, f.packet_bytes);
          stats.ring_bytes += length;
          buffered_bytes += length;
        }
      }
      if (buffered_bytes > options.max_buffered_bytes)
        fail_dma(item, cat("more than ", options.max_buffered_bytes, " bytes wait in ring queues"));
      clock_bytes = length;
      clock_packets = f.packet_bytes ? (length + f.packet_bytes - 1) / f.packet_bytes : 0;
      break;
    }
    case isa::kOutfeed: {
      const auto& o = std::get<OutfeedInstr>(item.decoded);
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
          fail_dma(item, "ring stream to the scalar core ran dry");
        outfeed_ordinal = it->first;
        Packet p = std::move(it->second.packets.front());
        it->second.packets.pop_front();
        buffered_bytes -= p.size();
        data.insert(data.end(), p.begin(), p.end());
      }
      data.resize(o.bytes);
      clock_bytes = o.bytes;
      clock_packets = packets;
      if (o.to_scalar_memory) {
        if (uint64_t{o.base} + o.bytes > kScalarStreamBytes)
          fail_dma(item, cat("writes scalar memory [", o.base, ", ", o.base + o.bytes, ") beyond ",
                             kScalarStreamBytes, " bytes"));
        if (uint64_t{o.base} + o.bytes > scalar.smem.size()) scalar.smem.resize(o.base + o.bytes);
        if (!data.empty()) std::memcpy(scalar.smem.data() + o.base, data.data(), data.size());
      } else {
        deliver_output_bytes(data);
      }
      break;
    }
    default:
      fail_dma(item, "not a DMA instruction");
  }
  charge();
  clock_dma_work(id, clock_bytes, clock_packets);
  finish(id);
  trace(w);
  return true;
}

}  // namespace tinycoral::chip
