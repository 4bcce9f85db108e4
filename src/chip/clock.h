// The virtual Edge TPU's clock: how many chip cycles a program would take on a real stick. Every
// executed instruction gets a modeled start and finish (a list schedule): it starts once the
// scalar core has issued it, the instructions it depends on finished and its unit is free, and it
// runs for its own cost (ClockCosts, stated per unit). Streams overlap: a ring consumer or inbound
// mesh half starts when its first packet or word can have arrived and ends no earlier than its
// last one, and an op drains its weight FIFO while the ring consumer before it fills it. The
// scalar core spends a cycle per instruction and waits at fences for the work it waits for. The
// calibration against Google's figures is in docs/chip.md "Clock".
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <vector>

namespace tinycoral::chip {

// The two clock settings of the stick (driver.md: "high" = 250 MHz, libedgetpu's default; "max" =
// 500 MHz).
constexpr double kClockHighHz = 250e6;
constexpr double kClockMaxHz = 500e6;

// The unit classes the clock reports busy cycles for.
enum class ClockUnit : uint8_t { kMac, kDma, kRing, kMesh, kScalar, kCount };
const char* clock_unit_name(ClockUnit unit);
constexpr size_t kClockUnits = static_cast<size_t>(ClockUnit::kCount);

// The cost of each kind of instruction, in chip cycles. An op step multiplies one input word by
// one weight row (isa.md: up to 64 columns x 4 MACs, one weight byte per MAC); the rates are
// calibrated (docs/chip.md "Clock").
struct ClockCosts {
  // op, per tile: weight bytes (= MACs) a cycle, so a full 256-byte row takes 3.6 cycles and a
  // depthwise step's 16-byte diagonal a quarter of one; and at most this many loop steps a cycle
  uint32_t macs_per_cycle = 72;
  uint32_t steps_per_cycle = 4;
  uint32_t op_start = 32;              // op: pipeline fill per instruction
  uint32_t dma_bytes_per_cycle = 64;   // wideToNarrow / narrowToWide, pops, infeeds, outfeeds
  uint32_t ring_bytes_per_cycle = 64;  // ring producers and consumers
  uint32_t mesh_words_per_cycle = 1;   // 4-byte mesh elements
  uint32_t transfer_start = 8;         // any data-moving instruction
  uint32_t scalar_instruction = 1;     // scalar core, per instruction or bundle
  uint32_t nlu_load = 48;              // 40 coefficients + 7 breakpoints + mode
  uint32_t fence = 1;                  // 0x1a
};

// What one instruction instance did, as far as its cost goes.
struct WorkAmount {
  uint64_t op_steps = 0;    // op: iterations of its loop nest
  uint64_t macs = 0;        // op: the MACs of the columns its steps use
  uint64_t bytes = 0;       // data moved by a DMA / ring instruction
  uint64_t mesh_words = 0;  // mesh: the longer of its two halves
  uint32_t fixed = 0;       // NLU load, fence
};

// Cycles of one instruction with the given amount, on a unit of the given class.
uint64_t work_cycles(const ClockCosts& costs, ClockUnit unit, const WorkAmount& amount);

// Packets (or mesh words) sent on one stream, oldest first: a run of `count` arriving evenly from
// `first` to `last` (the cycles the sender starts and ends sending them).
class Arrivals {
 public:
  void push(uint64_t count, uint64_t first, uint64_t last);
  // Takes the `count` oldest; the cycles the first and last of them arrive (0, 0 when nothing is
  // recorded: a stream the clock does not follow).
  std::pair<uint64_t, uint64_t> take(uint64_t count);
  void clear() { runs_.clear(); }
  uint64_t count() const {
    uint64_t n = 0;
    for (const Run& r : runs_) n += r.count;
    return n;
  }

 private:
  struct Run {
    uint64_t count, first, last;
  };
  std::deque<Run> runs_;
};

// Totals of the completed programs, in chip cycles.
struct ClockStats {
  uint64_t cycles = 0;                              // end to end, programs one after another
  uint64_t last_program_cycles = 0;                 // the last program completed
  std::array<uint64_t, kClockUnits> busy_cycles{};  // summed over tiles
};

// The model's state for the programs running now. Times are cycles since the current program
// started; a program's length is added to ClockStats when it completes.
class ChipClock {
 public:
  explicit ChipClock(ClockCosts costs = {}) : costs_(costs) {}
  const ClockCosts& costs() const { return costs_; }

  // The scalar core: `executed` is its instruction count since the chip was made.
  uint64_t scalar_now(uint64_t executed) const { return stall_ + (executed - scalar_base_); }
  // It waited until `cycle` (a fence, a load after an outfeed into scalar memory).
  void scalar_wait_until(uint64_t cycle, uint64_t executed);

  // A new work (ids are dense, in order).
  void add_work() { finish_.push_back(0); }
  uint64_t finish_of(uint32_t id) const { return finish_[id]; }
  // Start and finish of the work run() scheduled last (for traces).
  std::pair<uint64_t, uint64_t> last_run() const { return last_run_; }

  // Work `id`, ready at cycle `ready` (issued, and what it depends on finished), ran on
  // `unit_slot` (one per unit of each tile and of the scalar side), taking its input stream's
  // first and last arrival into account ({0, 0}: none). Returns {start, finish}.
  std::pair<uint64_t, uint64_t> run(uint32_t id, uint64_t ready, uint32_t unit_slot, ClockUnit unit,
                                    const WorkAmount& amount,
                                    std::pair<uint64_t, uint64_t> input = {0, 0}, int tile = -1);

  // A ring consumer `id` on `tile` fills the weight FIFO of the op after it, which drains it as it
  // fills (the FIFO holds a few rows of a stream of hundreds): works that wait for the consumer may
  // start once its first row landed at `first_row`, and the tile's next FIFO op ends no earlier
  // than the stream (take_fifo_end).
  void feed_fifo(uint32_t id, int tile, uint64_t first_row);
  uint64_t take_fifo_end(int tile);

  // Latest finish of any work on `tile` (-1: any work at all).
  uint64_t latest(int tile) const { return tile < 0 ? latest_all_ : latest_tile_[tile]; }

  // Streams: ring packets per tile and consumer, mesh words per tile and direction, packets to the
  // scalar core per producer ordinal, outfeeds into scalar memory.
  Arrivals& ring(int tile, int consumer) { return ring_[tile][consumer]; }
  Arrivals& mesh(int tile, int dir) { return mesh_[tile][dir]; }
  std::map<uint64_t, Arrivals>& to_scalar() { return to_scalar_; }
  uint64_t scalar_memory_ready = 0;  // last outfeed into scalar memory finished

  // Every work of the running program(s) completed: add its length to the totals and start over.
  void end_program(uint64_t executed);
  const ClockStats& stats() const { return stats_; }
  void reset();

 private:
  ClockCosts costs_;
  ClockStats stats_;
  std::vector<uint64_t> finish_;
  std::array<uint64_t, 16 * 32> unit_free_{};
  std::array<uint64_t, 16> latest_tile_{};
  std::array<uint64_t, 16> fifo_end_{};  // last row of the FIFO streams not yet drained
  uint64_t latest_all_ = 0;
  uint64_t stall_ = 0, scalar_base_ = 0;
  std::pair<uint64_t, uint64_t> last_run_{0, 0};
  std::array<std::array<Arrivals, 2>, 16> ring_;
  std::array<std::array<Arrivals, 4>, 16> mesh_;
  std::map<uint64_t, Arrivals> to_scalar_;
};

}  // namespace tinycoral::chip
