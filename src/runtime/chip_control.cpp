// Register-level open/close, in the order libedgetpu uses and the captured trace confirms
// (docs/driver.md "Open sequence").
#include "runtime/chip_control.h"

#include "usb/protocol.h"

namespace tinycoral::runtime {
namespace {
// A namespace alias, not a using-directive: in the unity build this file shares one translation
// unit with other runtime files, and a directive would change their name lookup silently.
namespace reg = usb::reg;

constexpr uint32_t kForceSleepMask = 3u << usb::kForceSleepShift;
constexpr uint32_t kPowerStateMask = 3u << usb::kPowerStateShift;
constexpr uint32_t kGatedGcbMask = 3u << usb::kGatedGcbShift;
constexpr uint32_t kClockMask = (3u << 28) | (1u << 30) | (1u << 31);

uint32_t clock_bits(ClockLevel level) {
  switch (level) {  // [29:28] GCB divider, bit30 AXI 125 MHz, bit31 8051 at 250 MHz
    case ClockLevel::kMax:
      return 0u << 28;
    case ClockLevel::kHigh:
      return (1u << 28) | (1u << 30);
    case ClockLevel::kMedium:
      return (2u << 28) | (1u << 30);
    case ClockLevel::kLow:
      return (3u << 28) | (1u << 30) | (1u << 31);
  }
  return 0;
}

void enter_reset(usb::Csr& csr) {
  const uint32_t scu3 = csr.read32(reg::kScuCtrl3);
  if (((scu3 >> usb::kForceSleepShift) & 3) != usb::kForceSleepReset) {
    csr.write32(reg::kScuCtrl3,
                (scu3 & ~kForceSleepMask) | (usb::kForceSleepReset << usb::kForceSleepShift));
    csr.poll32(reg::kScuCtrl3, kPowerStateMask, usb::kPowerStateReset << usb::kPowerStateShift);
  }
  // Clearing the bulk credits on entering reset.
  csr.write32(reg::kGcbbCredit0, 0xF);
  csr.write32(reg::kGcbbCredit0, 0x0);
}

void select_all_tiles(usb::Csr& csr) {
  csr.write64(reg::kTileConfig0, usb::kTileBroadcast);
  // Tile writes are not ordered after the tileconfig write, hence the read-back.
  csr.poll64(reg::kTileConfig0, 0x7F, usb::kTileBroadcast);
}

void set_run_control(usb::Csr& csr, uint64_t value) {
  for (uint32_t r : reg::kScalarRunControls) csr.write64(r, value);
  select_all_tiles(csr);
  for (uint32_t r : reg::kTileRunControls) csr.write64(r, value);
}

}  // namespace

ChipInfo open_chip(usb::Csr& csr, usb::LinkSpeed speed, ClockLevel clock) {
  csr.modify32(reg::kScuCtrl0, 0x3F00, 0);  // both *_inact_phy_mode fields
  const bool gated = ((csr.read32(reg::kScuCtrl2) >> usb::kGatedGcbShift) & 3) == 1;
  if (gated) csr.modify32(reg::kScuCtrl2, kGatedGcbMask, 2u << usb::kGatedGcbShift);
  enter_reset(csr);
  // Quit reset with the chosen clocks.
  csr.modify32(reg::kScuCtrl3, kForceSleepMask | kClockMask,
               (usb::kForceSleepRun << usb::kForceSleepShift) | clock_bits(clock));
  csr.poll32(reg::kScuCtrl3, kPowerStateMask, usb::kPowerStateRun << usb::kPowerStateShift);
  csr.poll64(reg::kScalarCoreRunControl, ~uint64_t{0}, 0);
  csr.write64(reg::kIdleRegister, 0x1);
  select_all_tiles(csr);
  csr.write64(reg::kDeepSleep, 0x1E02);
  // After open the GCB clock is always hardware-gated.
  csr.modify32(reg::kScuCtrl2, kGatedGcbMask, 1u << usb::kGatedGcbShift);

  ChipInfo info;
  info.efuse_revision = csr.read32(reg::kOmc0_00) >> 24;
  csr.write64(reg::kDescrEp, 0xF0);  // only scalar-core host-interrupt events
  csr.write64(reg::kMultiBoEp, 0);   // single bulk-OUT endpoint
  csr.write64(reg::kOutfeedChunkLength, speed == usb::LinkSpeed::kSuper ? 0x80 : 0x20);
  set_run_control(csr, 1);

  csr.write64(reg::kUsbFatalErrIntControl, 1);
  for (uint32_t i = 0; i < 4; ++i) csr.write64(reg::kUsbTopLevelInt0Control + 0x10 * i, 1);
  csr.modify32(reg::kOmc0_d4, 1u << 31, 1u << 31);
  csr.modify32(reg::kRambistCtrl1, (7u << 16) | (7u << 20), 0);
  csr.modify32(reg::kScuCtr7, (1u << 16) | (1u << 17) | (3u << 18), 0);
  csr.write32(reg::kSlvAbmEn, 1);
  csr.write32(reg::kMstAbmEn, 1);
  csr.write32(reg::kSlvErrRespIsrMask, 3);
  csr.write32(reg::kMstErrRespIsrMask, 3);
  csr.modify32(reg::kOmc0_d8, 1u << 31, 1u << 31);
  return info;
}

void close_chip(usb::Csr& csr) {
  for (uint32_t i = 0; i < 4; ++i) csr.write64(reg::kUsbTopLevelInt0Control + 0x10 * i, 0);
  csr.modify32(reg::kOmc0_d4, 1u << 31, 0);
  csr.modify32(reg::kRambistCtrl1, 7u << 20, 7u << 20);
  csr.modify32(reg::kScuCtr7, 3u << 18, 3u << 18);
  csr.write32(reg::kSlvAbmEn, 0);
  csr.write32(reg::kMstAbmEn, 0);
  csr.write32(reg::kSlvErrRespIsrMask, 0);
  csr.write32(reg::kMstErrRespIsrMask, 0);
  csr.modify32(reg::kOmc0_d8, 1u << 31, 0);
  csr.write64(reg::kUsbFatalErrIntControl, 0);
  set_run_control(csr, 2);
  enter_reset(csr);
}

}  // namespace tinycoral::runtime
