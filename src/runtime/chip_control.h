// The chip's open and close sequences over CSRs (docs/driver.md "Open sequence", "Close sequence"):
// clocks, reset, tile configuration, run control, interrupts. The same code runs against a real
// stick and the virtual stick.
#pragma once

#include <cstdint>

#include "usb/csr.h"

namespace tinycoral::runtime {

// GCB clock: 500 MHz (max), 250 MHz (high, the default), 125 MHz (medium), 63 MHz (low).
enum class ClockLevel : uint8_t { kMax, kHigh, kMedium, kLow };

struct ChipInfo {
  uint32_t efuse_revision = 0;  // omc0_00 bits[31:24]
};

// Brings the chip from any state to running: reset, quit reset with the chosen clock, select all
// tiles, start every run-control unit, enable interrupts. Throws Error when a poll never completes.
ChipInfo open_chip(usb::Csr& csr, usb::LinkSpeed speed, ClockLevel clock = ClockLevel::kHigh);
// Disables interrupts, halts every unit and puts the chip back into reset.
void close_chip(usb::Csr& csr);

}  // namespace tinycoral::runtime
