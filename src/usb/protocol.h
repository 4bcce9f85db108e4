// Numbers of the Coral USB Accelerator's host protocol: USB identities, endpoints, vendor and DFU
// requests, the CSRs the driver touches and their fields. Facts: docs/driver.md (and the reference
// fact sheet's sections 1-3).
#pragma once

#include <cstdint>

namespace tinycoral::usb {

// USB identities (docs/driver.md "Identities").
inline constexpr uint16_t kDfuVendorId = 0x1a6e, kDfuProductId = 0x089a;  // ROM bootloader
inline constexpr uint16_t kAppVendorId = 0x18d1, kAppProductId = 0x9302;  // firmware running

// Endpoints in single-endpoint mode.
inline constexpr uint8_t kEpBulkOut = 0x01;
inline constexpr uint8_t kEpOutput = 0x81;     // output activations, raw bytes
inline constexpr uint8_t kEpEvent = 0x82;      // 16-byte event records
inline constexpr uint8_t kEpInterrupt = 0x83;  // 4-byte interrupt words
inline constexpr size_t kEventBytes = 16;
inline constexpr size_t kInterruptBytes = 4;

// Bulk-OUT framing: an 8-byte header (u32 length, u8 tag, 3 zero bytes), then exactly `length`
// payload bytes in transfers of at most 1 MiB, never sharing a transfer with the next header.
inline constexpr size_t kBulkHeaderBytes = 8;
inline constexpr size_t kMaxBulkOutChunk = 1u << 20;
enum class Tag : uint8_t {
  kInstructions = 0,
  kInput = 1,
  kParameters = 2,
  kOutput = 3,
  kInterrupt0 = 4
};

// Vendor requests for CSR access: bRequest 0 = 64-bit, 1 = 32-bit; wValue = addr low 16 bits,
// wIndex = addr high 16 bits.
inline constexpr uint8_t kVendorIn = 0xC0, kVendorOut = 0x40;
inline constexpr uint8_t kCsr64 = 0, kCsr32 = 1;

// USB standard requests the driver and the virtual stick use.
inline constexpr uint8_t kStdIn = 0x80;
inline constexpr uint8_t kGetDescriptor = 6;
inline constexpr uint8_t kDescDevice = 1, kDescConfig = 2;

// DFU 1.1 class requests.
inline constexpr uint8_t kDfuOut = 0x21, kDfuIn = 0xA1;
enum DfuRequest : uint8_t {
  kDfuDetach = 0,
  kDfuDnload = 1,
  kDfuUpload = 2,
  kDfuGetStatus = 3,
  kDfuClrStatus = 4,
  kDfuGetState = 5,
  kDfuAbort = 6,
};
enum DfuState : uint8_t { kDfuIdle = 2, kDfuDnloadIdle = 5, kDfuError = 10 };
inline constexpr size_t kDfuBlockBytes = 256;  // wTransferSize of the bootloader

// The firmware image the bootloader needs (never shipped by tinycoral).
inline constexpr const char* kFirmwareName = "apex_latest_single_ep.bin";

// CSRs (docs/driver.md "Register map"). 0x1xxxx is accessed 32-bit, 0x4xxxx 64-bit.
namespace reg {
inline constexpr uint32_t kGcbbCredit0 = 0x1907c;
inline constexpr uint32_t kOmc0_00 = 0x1a000;
inline constexpr uint32_t kOmc0_d4 = 0x1a0d4;
inline constexpr uint32_t kOmc0_d8 = 0x1a0d8;
inline constexpr uint32_t kScuCtrl0 = 0x1a30c;
inline constexpr uint32_t kScuCtrl2 = 0x1a314;
inline constexpr uint32_t kScuCtrl3 = 0x1a318;
inline constexpr uint32_t kScuCtr7 = 0x1a33c;
inline constexpr uint32_t kSlvAbmEn = 0x1a500;
inline constexpr uint32_t kSlvErrRespIsrMask = 0x1a558;
inline constexpr uint32_t kMstAbmEn = 0x1a600;
inline constexpr uint32_t kMstErrRespIsrMask = 0x1a658;
inline constexpr uint32_t kRambistCtrl1 = 0x1a704;
inline constexpr uint32_t kDeepSleep = 0x40020;
inline constexpr uint32_t kOpRunControl = 0x400c0;
inline constexpr uint32_t kWideToNarrowRunControl = 0x40110;
inline constexpr uint32_t kNarrowToWideRunControl = 0x40150;
inline constexpr uint32_t kRingBusConsumer0RunControl = 0x40190;
inline constexpr uint32_t kRingBusConsumer1RunControl = 0x401d0;
inline constexpr uint32_t kRingBusProducerRunControl = 0x40210;
inline constexpr uint32_t kMeshBus0RunControl = 0x40250;
inline constexpr uint32_t kMeshBus1RunControl = 0x40298;
inline constexpr uint32_t kMeshBus2RunControl = 0x402e0;
inline constexpr uint32_t kMeshBus3RunControl = 0x40328;
inline constexpr uint32_t kScalarCoreRunControl = 0x44018;
inline constexpr uint32_t kAvDataPopRunControl = 0x44158;
inline constexpr uint32_t kParameterPopRunControl = 0x44198;
inline constexpr uint32_t kInfeedRunControl = 0x441d8;
inline constexpr uint32_t kOutfeedRunControl = 0x44218;
inline constexpr uint32_t kHibErrorStatus = 0x486f0;
inline constexpr uint32_t kHibFirstErrorStatus = 0x48700;
inline constexpr uint32_t kTileConfig0 = 0x48788;
inline constexpr uint32_t kIdleRegister = 0x4a000;
inline constexpr uint32_t kOutfeedChunkLength = 0x4c058;
inline constexpr uint32_t kUsbFatalErrIntControl = 0x4c060;
inline constexpr uint32_t kUsbFatalErrIntStatus = 0x4c068;
inline constexpr uint32_t kUsbTopLevelInt0Control = 0x4c070;  // 1..3 follow every 0x10
inline constexpr uint32_t kDescrEp = 0x4c148;
inline constexpr uint32_t kMultiBoEp = 0x4c160;

// Run-control registers in the order the open sequence starts them (scalar core and its DMA units,
// then - after re-selecting all tiles - the tile units).
inline constexpr uint32_t kScalarRunControls[] = {kScalarCoreRunControl, kAvDataPopRunControl,
                                                  kParameterPopRunControl, kInfeedRunControl,
                                                  kOutfeedRunControl};
inline constexpr uint32_t kTileRunControls[] = {kOpRunControl,
                                                kNarrowToWideRunControl,
                                                kWideToNarrowRunControl,
                                                kMeshBus0RunControl,
                                                kMeshBus1RunControl,
                                                kMeshBus2RunControl,
                                                kMeshBus3RunControl,
                                                kRingBusConsumer0RunControl,
                                                kRingBusConsumer1RunControl,
                                                kRingBusProducerRunControl};
}  // namespace reg

// scu_ctrl_3 fields.
inline constexpr uint32_t kForceSleepShift = 22, kPowerStateShift = 8;
inline constexpr uint32_t kForceSleepReset = 3, kForceSleepRun = 2;
inline constexpr uint32_t kPowerStateReset = 2, kPowerStateRun = 0;
// scu_ctrl_2 rg_gated_gcb [19:18]: 1 = hardware clock gated, 2 = forced on.
inline constexpr uint32_t kGatedGcbShift = 18;
inline constexpr uint32_t kTileBroadcast = 0x7F;

}  // namespace tinycoral::usb
