// The clock's cost rules and list schedule (clock.h; docs/chip.md "Clock").
#include "chip/clock.h"

#include <algorithm>

namespace tinycoral::chip {

const char* clock_unit_name(ClockUnit unit) {
  static constexpr const char* kNames[] = {"mac", "dma", "ring", "mesh", "scalar"};
  const auto i = static_cast<size_t>(unit);
  return i < std::size(kNames) ? kNames[i] : "?";
}

namespace {
uint64_t ceil_div(uint64_t a, uint64_t b) { return b == 0 ? a : (a + b - 1) / b; }
}  // namespace

uint64_t work_cycles(const ClockCosts& c, ClockUnit unit, const WorkAmount& a) {
  switch (unit) {
    case ClockUnit::kMac:
      if (a.fixed != 0) return a.fixed;
      return c.op_start +
             std::max(ceil_div(a.op_steps, c.steps_per_cycle), ceil_div(a.macs, c.macs_per_cycle));
    case ClockUnit::kDma:
      return c.transfer_start + ceil_div(a.bytes, c.dma_bytes_per_cycle);
    case ClockUnit::kRing:
      return c.transfer_start + ceil_div(a.bytes, c.ring_bytes_per_cycle);
    case ClockUnit::kMesh:
      return c.transfer_start + ceil_div(a.mesh_words, c.mesh_words_per_cycle);
    case ClockUnit::kScalar:
      return a.fixed;
    default:
      return 0;
  }
}

void Arrivals::push(uint64_t count, uint64_t first, uint64_t last) {
  if (count != 0) runs_.push_back({count, first, std::max(first, last)});
}

std::pair<uint64_t, uint64_t> Arrivals::take(uint64_t count) {
  uint64_t first = 0, last = 0;
  bool any = false;
  while (count > 0 && !runs_.empty()) {
    Run& r = runs_.front();
    if (!any) first = r.first;
    any = true;
    if (count >= r.count) {
      last = std::max(last, r.last);
      count -= r.count;
      runs_.pop_front();
      continue;
    }
    // Part of the run: its packets arrive evenly between first and last.
    const uint64_t span = r.last - r.first;
    const uint64_t at = r.first + span * count / r.count;
    last = std::max(last, at);
    r.first = at;
    r.count -= count;
    count = 0;
  }
  return {first, last};
}

void ChipClock::scalar_wait_until(uint64_t cycle, uint64_t executed) {
  const uint64_t now = scalar_now(executed);
  if (cycle > now) stall_ += cycle - now;
}

std::pair<uint64_t, uint64_t> ChipClock::run(uint32_t id, uint64_t ready, uint32_t unit_slot,
                                             ClockUnit unit, const WorkAmount& amount,
                                             std::pair<uint64_t, uint64_t> input, int tile) {
  const uint64_t cost = work_cycles(costs_, unit, amount);
  uint64_t& free = unit_free_[unit_slot % unit_free_.size()];
  const uint64_t start = std::max({ready, free, input.first});
  // A stream reader cannot end before its last packet arrived (plus the time to take it).
  const uint64_t finish = std::max(start + cost, input.second + costs_.transfer_start);
  free = finish;
  finish_[id] = finish;
  stats_.busy_cycles[static_cast<size_t>(unit)] += cost;
  latest_all_ = std::max(latest_all_, finish);
  if (tile >= 0) {
    uint64_t& latest = latest_tile_[static_cast<size_t>(tile) % latest_tile_.size()];
    latest = std::max(latest, finish);
  }
  last_run_ = {start, finish};
  return {start, finish};
}

void ChipClock::feed_fifo(uint32_t id, int tile, uint64_t first_row) {
  uint64_t& end = fifo_end_[static_cast<size_t>(tile) % fifo_end_.size()];
  end = std::max(end, finish_[id]);
  finish_[id] = std::min(finish_[id], first_row);
}

uint64_t ChipClock::take_fifo_end(int tile) {
  uint64_t& end = fifo_end_[static_cast<size_t>(tile) % fifo_end_.size()];
  const uint64_t last = end;
  end = 0;
  return last;
}

void ChipClock::end_program(uint64_t executed) {
  const uint64_t total = std::max(scalar_now(executed), latest_all_);
  stats_.cycles += total;
  stats_.last_program_cycles = total;
  stats_.busy_cycles[static_cast<size_t>(ClockUnit::kScalar)] += executed - scalar_base_;
  finish_.clear();
  unit_free_.fill(0);
  latest_tile_.fill(0);
  fifo_end_.fill(0);
  latest_all_ = 0;
  stall_ = 0;
  scalar_base_ = executed;
  scalar_memory_ready = 0;
  for (auto& t : ring_)
    for (auto& a : t) a.clear();
  for (auto& t : mesh_)
    for (auto& a : t) a.clear();
  to_scalar_.clear();
}

void ChipClock::reset() { *this = ChipClock(costs_); }

}  // namespace tinycoral::chip
