// How long a program run would take on a real Coral USB stick, modeled: the chip's cycles from the
// virtual Edge TPU's clock (src/chip/clock.h) at either clock setting, plus the USB transfers at
// the measured link rates and a fixed cost per run (docs/chip.md "Clock"). The parts are kept apart
// so that a caller (the CLI's --json, the compiler choosing between programs) can see where the
// time goes.
#pragma once

#include <array>
#include <cstdint>

#include "chip/clock.h"
#include "container/executable.h"

namespace tinycoral::runtime {

// The link as measured (driver.md 3.10: host to device 300-360 MB/s, device to host about
// 55 MB/s, independent of the chip's clock) and the fixed cost of one run.
struct StickLink {
  double host_to_device_bytes_per_s = 330e6;
  double device_to_host_bytes_per_s = 55e6;
  // Submitting a run and taking its completion through Google's stack (libedgetpu + TFLite),
  // whatever its size: the 64 x 64 FULLY_CONNECTED layer takes 0.213 ms (frontend.md 4.2), of which
  // its compute and bytes explain about 0.02 ms.
  double per_run_ms = 0.19;
};

// One program run: what the chip did and what crossed the link.
struct ProgramRun {
  uint64_t cycles = 0;
  std::array<uint64_t, chip::kClockUnits> busy_cycles{};
  uint64_t bytes_to_device = 0, bytes_from_device = 0;
  bool ran = false;
};

struct StickTime {
  double compute_ms_high = 0, compute_ms_max = 0;  // at 250 and 500 MHz
  double to_device_ms = 0, from_device_ms = 0, per_run_ms = 0;
  double total_ms_high() const {
    return compute_ms_high + to_device_ms + from_device_ms + per_run_ms;
  }
  double total_ms_max() const {
    return compute_ms_max + to_device_ms + from_device_ms + per_run_ms;
  }
  StickTime& operator+=(const StickTime& b) {  // the times of runs one after another
    compute_ms_high += b.compute_ms_high;
    compute_ms_max += b.compute_ms_max;
    to_device_ms += b.to_device_ms;
    from_device_ms += b.from_device_ms;
    per_run_ms += b.per_run_ms;
    return *this;
  }
};

// The parts add up: a batch-1 run sends its instructions and inputs, computes, then returns its
// outputs (no overlap is assumed between the link and the chip).
StickTime stick_time(const ProgramRun& run, const StickLink& link = {});

// Runs a compiled package's programs on a fresh virtual Edge TPU behind the virtual stick (inputs
// zero) and returns what its inference costs again and again with the parameters resident, and
// what the parameter-caching program cost once. Throws Error when the virtual
// chip cannot run it.
struct PackageRuns {
  ProgramRun caching, inference;
};
PackageRuns model_package(const container::Package& package);

}  // namespace tinycoral::runtime
