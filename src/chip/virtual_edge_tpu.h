// The virtual Edge TPU: an instruction-level simulator of the chip behind the HostPort seam
// (docs/chip.md). It runs Google's compiled bitstreams: the scalar core executes the stream in
// order and dispatches tile instructions into per-tile unit queues; every unit runs its queue in
// order and an instruction starts once the data it needs exists (data availability, not emulated
// sync counters, isa.md 4.6). Whatever the simulator cannot model stops the run with an error
// naming the instruction; a run where every unit waits on another is reported as a deadlock.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chip/clock.h"
#include "chip/host_port.h"
#include "chip/tile.h"
#include "common/limits.h"

namespace tinycoral::chip {

// One executed instruction, for --trace.
struct TraceRecord {
  uint32_t program = 0;      // how many bitstreams were received before this one
  uint32_t word_offset = 0;  // in the bitstream
  uint8_t opcode = 0;
  int tile = -1;          // -1: scalar core or scalar-side DMA unit
  const char* unit = "";  // "scalar", "op", "wideToNarrow", ..., "infeed"
  // The clock's cycles (since the program started) the instruction started and finished at; the
  // scalar core's instructions start and finish when it issues them.
  uint64_t start = 0, finish = 0;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void record(const TraceRecord& record) = 0;
};

// Names of the execution units, in the order of ChipStats::instructions.
enum class UnitId : uint8_t {
  kOp,
  kWideToNarrow,
  kNarrowToWide,
  kRingConsumer0,
  kRingConsumer1,
  kRingProducer,
  kMeshSouth,
  kMeshWest,
  kMeshNorth,
  kMeshEast,
  kNlu,
  kTileSync,
  kScalar,
  kAvDataPop,
  kParameterPop,
  kInfeed,
  kOutfeed,
  kCount
};
const char* unit_name(UnitId unit);

struct ChipStats {
  std::array<uint64_t, static_cast<size_t>(UnitId::kCount)> instructions{};
  uint64_t macs = 0;
  uint64_t host_in_bytes = 0, host_out_bytes = 0;
  uint64_t ring_bytes = 0;  // bytes carried by ring packets (infeed, producers)
  uint64_t mesh_bytes = 0;
  uint64_t mesh_bytes_dropped_at_edge = 0;  // outbound data with no neighbour (should stay 0)
  uint64_t narrow_bytes_read = 0, narrow_bytes_written = 0;
  uint64_t wide_bytes_read = 0, wide_bytes_written = 0;
  uint64_t programs_completed = 0;
  std::array<uint64_t, 9> scalar_counter_ops{};  // 0x24 set/wait operations per scalar counter
  std::array<uint64_t, 19> tile_counter_ops{};   // 0x1a operations per tile counter
  ClockStats clock;  // modeled chip cycles of the completed programs (clock.h)
};

struct ChipOptions {
  // Executed instructions (scalar bundles and unit instructions) allowed per bitstream: a runaway
  // loop stops with an error instead of hanging.
  uint64_t instruction_budget = limits::kSimInstructionBudget;
  // Unit instruction instances (one per tile an instruction is dispatched to) a program may create:
  // they are kept until it ends, so a short loop dispatching to 16 tiles must not grow without end.
  uint64_t max_work_items = limits::kSimMaxWorkItems;
  uint64_t max_bitstream_bytes = limits::kMaxBitstreamBytes;
  // DMA descriptors and interrupts issued and not yet taken by the host (take_event).
  size_t max_pending_events = limits::kSimMaxPendingEvents;
  // Host data, ring packets and mesh words that may wait in queues at once.
  uint64_t max_buffered_bytes = 512ull << 20;
  TraceSink* trace = nullptr;
};

class VirtualEdgeTpu : public HostPort {
 public:
  explicit VirtualEdgeTpu(ChipOptions options = {});
  ~VirtualEdgeTpu() override;
  VirtualEdgeTpu(const VirtualEdgeTpu&) = delete;
  VirtualEdgeTpu& operator=(const VirtualEdgeTpu&) = delete;

  void reset() override;
  void receive(DmaTag tag, std::span<const uint8_t> payload) override;
  RunState advance() override;
  std::optional<std::vector<uint8_t>> take_output() override;
  std::optional<HostEvent> take_event() override;
  std::string fault() const override;

  ChipStats stats() const;
  const Tile& tile(uint32_t index) const;
  void set_trace(TraceSink* trace);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace tinycoral::chip
