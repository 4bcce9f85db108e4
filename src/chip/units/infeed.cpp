// Infeed (0x26): sends a range of a pop's staged bytes (or of scalar memory) over the ring to the
// ringConsumer0 of the tiles in its mask, as packets of its packet size (isa.md 2.10, docs/chip.md
// "Unit semantics used").
#include <algorithm>
#include <cstring>
#include <vector>

#include "chip/units/dma_work.h"

namespace tinycoral::chip {

namespace {
// The offset field counts modulo 128 KiB (a staging ring; see below).
constexpr uint64_t kStagingWrapBytes = 128 * 1024;
}  // namespace

bool VirtualEdgeTpu::Impl::run_infeed(DmaWork& d) {
  const auto& f = std::get<InfeedInstr>(d.item.decoded);
  const uint32_t unit = f.from_scalar_memory ? 4 : f.activations ? kActivationUnit : kParameterUnit;
  uint64_t begin = uint64_t{f.offset} * unit;
  const uint64_t length = uint64_t{f.units} * unit;
  std::span<const uint8_t> source;
  if (f.from_scalar_memory) {
    source = scalar.smem;
  } else {
    auto it = staging.find(d.w.pop);
    if (it == staging.end()) d.fail("its pop staged nothing");
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
    auto [at, fresh] = staging_read_at.try_emplace(d.w.pop, begin);
    while (!fresh && begin + kStagingWrapBytes / 2 < at->second &&
           begin + length + kStagingWrapBytes <= source.size())
      begin += kStagingWrapBytes;
    at->second = begin + length;
  }
  if (begin + length > source.size())
    d.fail(cat("sends bytes [", begin, ", ", begin + length, ") but its source holds ",
               source.size()));
  // One block holds the bytes; every destination queues its packets as one run of slices.
  if (length > 0 && f.packet_bytes == 0) d.fail("sends packets of 0 bytes");
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
    d.fail(cat("more than ", options.max_buffered_bytes, " bytes wait in ring queues"));
  d.bytes = length;
  d.packets = f.packet_bytes ? (length + f.packet_bytes - 1) / f.packet_bytes : 0;
  return true;
}

}  // namespace tinycoral::chip
