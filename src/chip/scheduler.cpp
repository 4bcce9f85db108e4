// The run loop of the virtual Edge TPU (docs/chip.md "Scheduling"): every unit runs its queue in
// program order, an instruction once the instructions it depends on completed and its stream
// inputs (ring packets, mesh words, host data) are there; programs start and end here, and a run
// where nothing can progress is a deadlock. Dispatch (dispatch.cpp) and the dependencies
// (hazards.cpp, footprints.cpp) are computed when an instruction is issued; counter values are
// recorded, not counted: data availability stands for them.
#include <algorithm>
#include <cstdint>

#include "chip/machine.h"
#include "common/error.h"

namespace tinycoral::chip {

const char* unit_name(UnitId unit) {
  static constexpr const char* kNames[] = {
      "op",        "wideToNarrow", "narrowToWide", "ringConsumer0", "ringConsumer1", "ringProducer",
      "meshSouth", "meshWest",     "meshNorth",    "meshEast",      "nluLoad",       "tileSync",
      "scalar",    "avDataPop",    "parameterPop", "infeed",        "outfeed"};
  const auto i = static_cast<size_t>(unit);
  return i < std::size(kNames) ? kNames[i] : "?";
}

VirtualEdgeTpu::Impl::Impl(ChipOptions o) : options(o) {
  for (uint32_t t = 0; t < kTileCount; ++t) {
    tiles[t].index = t;
    tile_state[t].last_barrier.fill(kNone);
    tile_state[t].gates.fill(kNone);
  }
}

void VirtualEdgeTpu::Impl::charge(uint64_t instructions) {
  budget_used += instructions;
  if (budget_used > options.instruction_budget)
    fail("program ", programs_received, " exceeded the instruction budget of ",
         options.instruction_budget, " executed instructions (runaway loop?)");
}

bool VirtualEdgeTpu::Impl::deps_done(Work& w) {
  // Polled for every queue front on every pass: drop completed dependencies from the back and stop
  // at the first one still pending, so a blocked work costs O(1) per poll instead of a scan.
  while (!w.deps.empty() && finished[w.deps.back()]) {
    clock_depends(w, w.deps.back());
    w.deps.pop_back();
  }
  if (!w.deps.empty()) return false;
  return !(w.region_open && w.forward_reads);
}

void VirtualEdgeTpu::Impl::finish(uint32_t id) {
  works[id].done = true;
  finished[id] = 1;
}

uint32_t VirtualEdgeTpu::Impl::gate_of(uint32_t id) const {
  const Work& w = works[id];
  return w.deps.empty() ? kNone : w.deps.back();  // deps_done dropped the finished ones
}

void VirtualEdgeTpu::Impl::trace(const Work& w) {
  ++stats.instructions[static_cast<size_t>(w.unit)];
  if (!options.trace) return;
  const ProgramItem& item = w.program->items[w.item];
  const auto [start, finish] = clock.last_run();
  options.trace->record(
      {programs_received, item.word_offset, item.opcode, w.tile, unit_name(w.unit), start, finish});
}

bool VirtualEdgeTpu::Impl::run_units() {
  bool progress = false;
  bool again = true;
  while (again) {
    again = false;
    // A queue (or fence) whose gate is still closed would fail deps_done again: skip it.
    size_t kept = 0;
    for (size_t i = 0; i < syncs.size(); ++i) {
      const uint32_t id = syncs[i];
      uint32_t gate = sync_gates[i];
      if (!gate_closed(gate)) {
        Work& s = works[id];
        if (deps_done(s)) {
          clock_tile_work(id, 0, 0, 0);
          finish(id);
          trace(s);
          again = true;
          continue;
        }
        gate = gate_of(id);
      }
      syncs[kept] = id;
      sync_gates[kept++] = gate;
    }
    syncs.resize(kept);
    sync_gates.resize(kept);
    for (uint32_t t = 0; t < kTileCount; ++t) {
      TileState& ts = tile_state[t];
      for (uint32_t busy = ts.busy; busy != 0; busy &= busy - 1) {
        const auto u = static_cast<size_t>(std::countr_zero(busy));
        auto& q = ts.queues[u];
        uint32_t& gate = ts.gates[u];
        while (!q.empty() && !gate_closed(gate)) {
          if (!try_run_tile_work(q.front())) {
            gate = gate_of(q.front());
            break;
          }
          q.pop_front();
          gate = kNone;
          again = true;
        }
        if (q.empty()) ts.busy &= ~(1u << u);
      }
    }
    for (size_t k = 0; k < dma_queues.size(); ++k) {
      auto& q = dma_queues[k];
      uint32_t& gate = dma_gates[k];
      while (!q.empty() && !gate_closed(gate)) {
        if (!try_run_dma_work(q.front())) {
          gate = gate_of(q.front());
          break;
        }
        q.pop_front();
        gate = kNone;
        again = true;
      }
    }
    progress |= again;
  }
  return progress;
}

bool VirtualEdgeTpu::Impl::all_works_done() const {
  for (const auto& ts : tile_state)
    if (ts.busy != 0) return false;
  for (const auto& q : dma_queues)
    if (!q.empty()) return false;
  for (uint32_t id : syncs)
    if (!works[id].done) return false;
  return true;
}

void VirtualEdgeTpu::Impl::start_next_program() {
  if (pending_programs.empty()) return;
  if (program) retired.push_back(std::move(program));
  program = std::move(pending_programs.front());
  pending_programs.pop_front();
  scalar.pc = 0;
  scalar.loops.clear();
  scalar.running = true;
  scalar.halt_code = 0;
  budget_used = 0;
}

bool VirtualEdgeTpu::Impl::finish_program_if_done() {
  if (scalar.running) return false;
  if (program && scalar.halt_code == 1) {  // continues in the next bitstream
    if (pending_programs.empty()) return false;
    start_next_program();
    return true;
  }
  if (!all_works_done()) return false;
  const bool had = program != nullptr || !pending_programs.empty();
  if (program) {
    ++stats.programs_completed;
    clock.end_program(scalar_executed());
    program.reset();
    retired.clear();
    works.clear();
    finished.clear();
    syncs.clear();
    sync_gates.clear();
    dma_gates.fill(kNone);
    scalar_region.clear();
    staging.clear();
    staging_read_at.clear();
    for (auto& p : last_tile_producers) p.clear();
    to_scalar.clear();
    next_scalar_ordinal = outfeed_ordinal = 0;
    last_pop = {kNone, kNone};
    for (auto& ts : tile_state) {
      ts.region.clear();
      ts.last_barrier.fill(kNone);
      ts.gates.fill(kNone);
    }
    for (auto& tile : tiles) {
      tile.fifo_rows.clear();
      tile.staging.clear();
    }
  }
  start_next_program();
  return had;
}

RunState VirtualEdgeTpu::Impl::advance() {
  if (!fault.empty()) return RunState::kFaulted;
  try {
    for (;;) {
      waiting_on_host = false;
      bool progress = false;
      while (step_scalar()) progress = true;
      if (run_units()) progress = true;
      if (finish_program_if_done()) progress = true;
      if (!progress) break;
    }
  } catch (const Error& e) {
    fault = e.what();
    return RunState::kFaulted;
  }
  if (!program && pending_programs.empty()) return RunState::kIdle;
  if (waiting_on_host || (!scalar.running && scalar.halt_code == 1)) return RunState::kWaiting;
  fault = deadlock_report();
  return RunState::kFaulted;
}

}  // namespace tinycoral::chip
