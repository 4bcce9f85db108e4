// Internal state of the virtual Edge TPU (VirtualEdgeTpu::Impl), shared by the files that implement
// it: dispatch.cpp, hazards.cpp and footprints.cpp (issuing works with their data-availability
// dependencies), scheduler.cpp (the run loop), deadlock_report.cpp, scalar_core.cpp (bundles,
// loops, branches, descriptors, fences), tile_units.cpp (footprints and the dispatch to the tile
// units' handlers in units/: ring, mesh, wide/narrow DMA, NLU load, op) and dma_units.cpp (output
// delivery, the dispatch to units/pop, infeed and outfeed).
#pragma once

#include <algorithm>
#include <array>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chip/program.h"
#include "chip/scalar_memory.h"
#include "chip/virtual_edge_tpu.h"

namespace tinycoral::chip {

struct TileWork;  // units/tile_work.h
struct DmaWork;   // units/dma_work.h

constexpr uint32_t kTileUnits = 12;  // UnitId::kOp .. UnitId::kTileSync
// Outfeeds into scalar memory and infeeds from it stream through it: MobileNet v1 1.0's depthwise
// layers move 20480 bytes at a time (the chip wraps or streams them; docs/chip.md). The DMA side
// may therefore use up to this much; the scalar core's loads and stores stay within 16 KiB.
constexpr uint32_t kScalarStreamBytes = 1 << 20;
constexpr uint32_t kNone = UINT32_MAX;

// The byte runs a TTU walk touches: address(step) * scale + base, `element` bytes each. Falls back
// to the bounding box for walks longer than a million steps.
Access access_of(Space space, bool write, const OpTtu& ttu, int64_t scale, int64_t base,
                 int64_t element);
// The same from an explicit list of walk offsets (mesh walks with a short last piece).
Access access_of_offsets(Space space, bool write, const std::vector<int64_t>& offsets,
                         int64_t scale, int64_t base, int64_t element);
bool overlaps(const Access& a, const Access& b);
// The units (bit = UnitId) whose writes into `space` advance one of the tile sync counters in
// `counters` (bit k = counter k, isa.md 2.12): what a read waiting on those counters may wait for.
uint32_t writers_counted_by(uint32_t counters, Space space);

// One ring packet: a slice of a block shared by every packet one instruction sends (one allocation
// per producer or infeed, not per packet). Immutable; a producer broadcasting to several tiles (or
// a queue handing it on) copies a reference, not its bytes.
class Packet {
 public:
  Packet(std::shared_ptr<const uint8_t[]> block, size_t offset, size_t size)
      : block_(std::move(block)), offset_(offset), size_(size) {}
  const uint8_t* data() const { return block_.get() + offset_; }
  size_t size() const { return size_; }
  const uint8_t* begin() const { return data(); }
  const uint8_t* end() const { return data() + size_; }

 private:
  std::shared_ptr<const uint8_t[]> block_;
  size_t offset_, size_;
};

// The ring packets waiting for one consumer, oldest first, kept as runs of consecutive slices of
// one block (what one producer or infeed sent): sending a run to a tile and taking a packet cost no
// allocation and no reference counting per packet.
class PacketQueue {
  struct Run {
    std::shared_ptr<const uint8_t[]> block;
    size_t begin, end, packet_bytes;
  };

 public:
  // Packets of `packet_bytes` (the last one shorter) covering [begin, end) of `block`.
  void push(std::shared_ptr<const uint8_t[]> block, size_t begin, size_t end, size_t packet_bytes) {
    if (begin >= end) return;
    runs_.push_back({std::move(block), begin, end, packet_bytes});
    count_ += (end - begin + packet_bytes - 1) / packet_bytes;
  }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // The oldest packet (queue not empty).
  std::span<const uint8_t> front() const {
    const Run& r = runs_.front();
    return {r.block.get() + r.begin, std::min(r.packet_bytes, r.end - r.begin)};
  }
  void pop_front() {
    Run& r = runs_.front();
    r.begin += std::min(r.packet_bytes, r.end - r.begin);
    --count_;
    if (r.begin >= r.end) runs_.pop_front();
  }

  // Reads the packets oldest first without taking them (a ring consumer reads hundreds in one go,
  // then drops them at once). Valid while the queue is not changed; at most size() reads.
  class Reader {
   public:
    std::span<const uint8_t> next() {
      if (at_ >= run_->end) {
        ++run_;
        at_ = run_->begin;
      }
      const size_t bytes = std::min(run_->packet_bytes, run_->end - at_);
      const uint8_t* data = run_->block.get() + at_;
      at_ += bytes;
      return {data, bytes};
    }

   private:
    friend class PacketQueue;
    explicit Reader(const PacketQueue& q)
        : run_(q.runs_.begin()), at_(q.runs_.empty() ? 0 : q.runs_.front().begin) {}
    std::deque<Run>::const_iterator run_;
    size_t at_;
  };
  Reader reader() const { return Reader(*this); }
  // Takes the n oldest packets.
  void drop(uint64_t n) {
    while (n > 0) {
      Run& r = runs_.front();
      const uint64_t in_run = (r.end - r.begin + r.packet_bytes - 1) / r.packet_bytes;
      if (n < in_run) {
        r.begin += n * r.packet_bytes;
        count_ -= n;
        return;
      }
      n -= in_run;
      count_ -= in_run;
      runs_.pop_front();
    }
  }

 private:
  std::deque<Run> runs_;
  size_t count_ = 0;
};

// The works a work waits for: the first few inline (most works wait for fewer than 7), the rest
// in a vector whose storage is kept for the next work in the same slot.
class DepList {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  uint32_t operator[](size_t i) const { return i < kInline ? inline_[i] : more_[i - kInline]; }
  uint32_t back() const { return (*this)[size_ - 1]; }
  void pop_back() { --size_; }
  void push_back(uint32_t id) {
    if (size_ < kInline) {
      inline_[size_] = id;
    } else if (size_ - kInline < more_.size()) {
      more_[size_ - kInline] = id;
    } else {
      more_.push_back(id);
    }
    ++size_;
  }
  void clear() { size_ = 0; }

 private:
  static constexpr uint32_t kInline = 7;
  uint32_t size_ = 0;
  std::array<uint32_t, kInline> inline_;
  std::vector<uint32_t> more_;
};

// One instruction instance on one unit (of one tile, or of the scalar side). What a waiting work
// is polled for comes first and needs no other memory: the run loop reads only the start of it
// (works are many and go cold while the ops stream their data).
struct Work {
  DepList deps;                // works that must complete first
  bool region_open = true;     // a forward read can still gain a writer
  bool forward_reads = false;  // some access is a forward read (kept by add_hazards)
  bool done = false;
  bool started = false;  // mesh: outbound half done
  const Program* program = nullptr;
  uint32_t item = 0;
  int tile = -1;
  UnitId unit = UnitId::kOp;
  uint64_t order = 0;
  std::vector<Access> accesses;
  uint32_t pop = kNone;      // infeed: the pop whose staging data it sends
  uint64_t ordinal = 0;      // producer with scalar destination: its place in the outfeed stream
  uint32_t packets = 0;      // producer: packets it sends
  int64_t narrow_shift = 0;  // register-indirect narrowToWide: words added to its narrow address
  // consumer with the aux pair: bias blocks it takes, from the bias load that reads its aux row
  // (0: not known, see consumer_aux_groups)
  uint32_t aux_groups = 0;
  uint64_t ready_cycle = 0;  // the clock: issued, and what it waited for finished (clock.h)
};

// The works of the running program(s) by id: chunks that stay in place (references survive
// appends) and are reused by the next program, each work keeping the storage of its vectors (a
// MobileNet inference creates ~25K works; allocating their deque blocks, dependency and access
// vectors anew each time was a good part of the scheduler's cost).
class WorkStore {
 public:
  Work& operator[](size_t id) { return chunks_[id / kChunk][id % kChunk]; }
  const Work& operator[](size_t id) const { return chunks_[id / kChunk][id % kChunk]; }
  size_t size() const { return size_; }
  // A new work with default fields (its vectors empty, their storage kept).
  Work& emplace_back() {
    if (size_ == chunks_.size() * kChunk) chunks_.push_back(std::make_unique<Work[]>(kChunk));
    Work& w = (*this)[size_++];
    DepList deps = std::move(w.deps);
    std::vector<Access> accesses = std::move(w.accesses);
    deps.clear();
    accesses.clear();
    w = Work{};
    w.deps = std::move(deps);
    w.accesses = std::move(accesses);
    return w;
  }
  void clear() { size_ = 0; }

 private:
  static constexpr size_t kChunk = 1024;
  std::vector<std::unique_ptr<Work[]>> chunks_;
  size_t size_ = 0;
};

// Ring packets a consumer takes: one per TTU step plus its bias blocks (tile_units.cpp).
uint64_t consumer_aux_groups(const RingInstr& r, uint32_t known_groups);
uint64_t consumer_packets_needed(const RingInstr& r, uint32_t known_groups);

struct TileState {
  std::array<std::deque<uint32_t>, kTileUnits> queues;
  uint32_t busy = 0;  // bit u: queues[u] is not empty (the run loop visits only those)
  std::array<uint32_t, kTileUnits> last_barrier;
  // Per queue: a dependency its front waits for (kNone: not known). The run loop skips the queue
  // until that work finished, instead of asking the front again on every pass.
  std::array<uint32_t, kTileUnits> gates;
  std::vector<uint32_t> region;  // works since the last full fence, program order
  // Ring packets for ringConsumer0 (infeeds, producers without to_c1) and ringConsumer1.
  std::array<PacketQueue, 2> ring_in;
  std::array<std::deque<uint32_t>, 4> mesh_in;  // words arriving per mesh opcode 0x15..0x18
  // Wide rows a running ring consumer filled whose wide-memory copy is still to be written (its
  // last fill, when the instruction ends: tile_units.cpp), and a mark per row.
  std::vector<uint32_t> deferred_rows;
  std::vector<uint8_t> deferred_mark;
};

struct OutputDescriptor {
  uint32_t length = 0;
  std::vector<uint8_t> data;
};

struct LoopFrame {
  uint32_t first_item = 0, end_item = 0;  // body [first, end)
  uint32_t remaining = 0;                 // further passes after the current one
};

struct ScalarState {
  std::array<uint32_t, 32> regs{};
  std::array<bool, 8> preds{};
  std::vector<uint8_t> smem = std::vector<uint8_t>(kScalarMemoryBytes);
  std::array<uint32_t, 4> descriptor{};
  std::array<int64_t, 9> counters{};
  uint32_t pc = 0;  // item index
  std::vector<LoopFrame> loops;
  bool running = false;  // a program is loaded and not halted
  uint8_t halt_code = 0;
};

struct VirtualEdgeTpu::Impl {
  explicit Impl(ChipOptions o);

  ChipOptions options;
  ChipStats stats;
  ChipClock clock;  // modeled cycles (clock.h); the hooks are marked "clock:"
  std::array<Tile, kTileCount> tiles;
  std::array<TileState, kTileCount> tile_state;
  ScalarState scalar;

  // Programs: the running one and those received after it.
  std::shared_ptr<Program> program;
  std::vector<std::shared_ptr<Program>> retired;  // earlier chunks whose works may still run
  std::deque<std::shared_ptr<Program>> pending_programs;
  // Recently decoded programs, newest last: the host resends the same execution program for every
  // inference, and a program reused keeps the footprints and row visits cached in it.
  std::vector<std::shared_ptr<Program>> decoded;
  uint32_t programs_received = 0;
  uint64_t budget_used = 0;

  // Works of the running program(s); cleared when everything completed.
  WorkStore works;
  std::vector<uint8_t> finished;  // per work: Work::done, compact for the run loop's gate checks
  uint64_t next_order = 0;
  std::vector<uint32_t> syncs;                     // pending 0x1a works (no queue)
  std::vector<uint32_t> sync_gates;                // per pending 0x1a work, as TileState::gates
  std::vector<uint32_t> scalar_region;             // scalar DMA works since the last scalar fence
  std::array<std::deque<uint32_t>, 4> dma_queues;  // avDataPop, parameterPop, infeed, outfeed
  std::array<uint32_t, 4> dma_gates{kNone, kNone, kNone, kNone};  // as TileState::gates
  std::array<uint32_t, 2> last_pop{kNone, kNone};  // per stream (0 parameters, 1 activations)
  // The works of the last producer instruction that sent to tiles, per consumer (0 / to_c1): the
  // next one waits for them, so that a consumer fed by several producers gets their packets in
  // program order (the chip orders them by their r0 counter thresholds; MobileNet v1 1.0 word
  // 3497 takes 1819 rows from word 3576 on tile 12, then 245 from word 3580 on tile 11).
  std::array<std::vector<uint32_t>, 2> last_tile_producers;

  // Host streams (tag 1 activations/scratch, tag 2 parameters) not yet popped.
  std::array<std::deque<uint8_t>, 2> host_in;
  std::map<uint32_t, std::vector<uint8_t>> staging;  // pop work -> the bytes it staged
  // The infeed offset field wraps at 128 KiB (a staging ring): per pop, where the last infeed from
  // it ended (bytes, unwrapped), so that later infeeds continue past the wrap.
  std::map<uint32_t, uint64_t> staging_read_at;
  uint64_t buffered_bytes = 0;

  // Packets bound for the scalar core (producers with dest bit 16), by producer ordinal.
  struct ScalarStream {
    std::deque<Packet> packets;
    bool produced = false;  // its producer ran
  };
  std::map<uint64_t, ScalarStream> to_scalar;
  uint64_t next_scalar_ordinal = 0;  // next producer ordinal to hand out
  uint64_t outfeed_ordinal = 0;      // producer whose packets the outfeeds read next

  std::deque<OutputDescriptor> open_outputs;
  std::deque<std::vector<uint8_t>> outputs;
  std::deque<HostEvent> events;
  std::string fault;
  bool waiting_on_host = false;  // set by units blocked on host data during a pass

  // scheduler.cpp, dispatch.cpp, hazards.cpp, deadlock_report.cpp
  RunState advance();
  void dispatch(uint32_t item_index);
  uint32_t new_work(uint32_t item, int tile, UnitId unit);
  // Dependencies of work `id` on the earlier works of its fence region.
  void add_hazards(const std::vector<uint32_t>& region, Work& w, uint32_t id);
  void add_scalar_hazards(Work& w, uint32_t id);
  void close_region(TileState& ts);
  bool deps_done(Work& w);
  void finish(uint32_t id);  // marks the work done
  // After deps_done(works[id]) failed: the dependency it waits for, or kNone (a forward read).
  uint32_t gate_of(uint32_t id) const;
  bool gate_closed(uint32_t gate) const { return gate != kNone && !finished[gate]; }
  bool run_units();
  bool finish_program_if_done();  // true when a program ended or started
  bool all_works_done() const;
  std::string deadlock_report();
  std::string blocked_reason(uint32_t id);
  std::string describe(uint32_t id) const;
  void trace(const Work& w);
  void charge(uint64_t instructions = 1);
  void start_next_program();
  // virtual_edge_tpu.cpp: a program decoded before from the same bytes, or nullptr.
  std::shared_ptr<Program> reuse_decoded(std::span<const uint8_t> bitstream);
  void remember_decoded(std::shared_ptr<Program> program);

  // scalar_core.cpp
  bool step_scalar();  // one instruction (or run of bundles); false when blocked or not running
  bool run_bundles();  // the bundles from pc on until another instruction or a blocked one
  bool scalar_writes_pending() const;  // an outfeed into scalar memory is still to finish
  uint32_t next_pc(uint32_t next);     // after a hardware loop's body: its start again, or on
  void execute_bundle(const ScalarBundle& b, const ProgramItem& item);
  void execute_alu(const ScalarBundle& b, uint32_t alu_a, uint32_t alu_reg,
                   const ProgramItem& item);
  bool scsync_ready(const ScSyncInstr& s, uint64_t order);
  void issue_descriptor(const ProgramItem& item);

  // clock: the scalar core's modeled cycle; a work's modeled run (clock_hooks.cpp).
  uint64_t scalar_executed() const {
    return stats.instructions[static_cast<size_t>(UnitId::kScalar)];
  }
  void clock_depends(Work& w, uint32_t dep) {
    w.ready_cycle = std::max(w.ready_cycle, clock.finish_of(dep));
  }
  // `taken`/`sent`: ring packets or mesh words it took / sent; `bytes`: a consumer's bytes taken.
  std::pair<uint64_t, uint64_t> clock_tile_work(uint32_t id, uint64_t macs, uint64_t taken,
                                                uint64_t sent, uint64_t bytes = 0);
  void clock_dma_work(uint32_t id, uint64_t bytes, uint64_t packets);

  // tile_units.cpp
  bool try_run_tile_work(uint32_t id);
  std::vector<Access> footprint(const ProgramItem& item);  // depends on the item only
  const std::vector<Access>& footprint_of(const Program& program, uint32_t index);  // cached
  void note_bias_groups(TileState& ts, const WideNarrowInstr& load);
  std::vector<uint32_t> fifo_writers_all_taken(const TileState& ts, const Program& program,
                                               uint32_t index);
  // units/*.cpp, one tile unit each: run the work as a whole (true), or return false, having
  // changed nothing, when its stream inputs are not there yet.
  bool run_op_unit(TileWork& t);         // 0x01-0x03
  bool run_ring_producer(TileWork& t);   // 0x10
  bool run_ring_consumer(TileWork& t);   // 0x11, 0x12
  bool run_narrow_to_wide(TileWork& t);  // 0x13
  bool run_wide_to_narrow(TileWork& t);  // 0x14
  bool run_mesh(TileWork& t);            // 0x15-0x18
  bool run_nlu_load(TileWork& t);        // 0x19

  // dma_units.cpp
  bool try_run_dma_work(uint32_t id);
  // units/pop.cpp, infeed.cpp, outfeed.cpp: as the tile units' handlers.
  bool run_pop(DmaWork& d);      // 0x25
  bool run_infeed(DmaWork& d);   // 0x26
  bool run_outfeed(DmaWork& d);  // 0x27
  void deliver_output_bytes(std::span<const uint8_t> bytes);
};

// Mesh neighbour of `tile` in the direction opcode moves data (0x15 south t+4, 0x16 west t-1,
// 0x17 north t-4, 0x18 east t+1), or -1 at the mesh edge.
int mesh_neighbour(int tile, uint8_t opcode);

}  // namespace tinycoral::chip
