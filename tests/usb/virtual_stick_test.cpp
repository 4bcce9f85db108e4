// The driver against the in-process virtual stick: DFU, CSR access, the open sequence, bulk
// framing, output reads, and the rules the stick enforces (deadlock rule, framing).
#include "usb/virtual_stick.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/error.h"
#include "usb/csr.h"
#include "usb/dfu.h"
#include "usb/fake_chip.h"
#include "usb/firmware.h"
#include "usb/protocol.h"
#include "usb/virtual_transport.h"

namespace tinycoral::usb {
namespace {

using testing::FakeChip;

std::vector<uint8_t> fake_firmware(size_t size = 10783) {
  std::mt19937 rng(42);
  std::vector<uint8_t> image(size);
  for (auto& b : image) b = static_cast<uint8_t>(rng());
  image[0] = 0x02;  // an 8051 LJMP, like the real image
  return image;
}

TEST(VirtualStickDfu, DownloadsVerifiesAndReappearsInApplicationMode) {
  FakeChip chip;
  VirtualStick stick(chip);
  VirtualTransport transport(stick);
  EXPECT_EQ(stick.vendor_id(), kDfuVendorId);
  EXPECT_EQ(stick.product_id(), kDfuProductId);
  const auto image = fake_firmware();
  dfu_download(transport, image, Millis(1000));
  // 43 blocks (42 full + 31 bytes) each with a status check, the zero-length block and its status,
  // the configuration descriptor and 43 upload reads for verification.
  EXPECT_EQ(transport.counters().control_transfers, 1u + 2 * 43 + 2 + 43);
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kBootloader);
  stick.port_reset();
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kApplication);
  EXPECT_EQ(stick.vendor_id(), kAppVendorId);
  EXPECT_EQ(stick.product_id(), kAppProductId);
  EXPECT_EQ(stick.firmware(), image);
}

TEST(VirtualStickDfu, RejectedDownloadIsAClearErrorAndTheStickStaysInTheBootloader) {
  FakeChip chip;
  VirtualStick stick(chip);
  stick.faults().fail_dfu = true;
  VirtualTransport transport(stick);
  try {
    dfu_download(transport, fake_firmware(), Millis(1000));
    FAIL() << "the download should have failed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("DFU download failed at block 0"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("replug"), std::string::npos) << e.what();
  }
  stick.port_reset();
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kBootloader);
}

TEST(VirtualStickDfu, ApplicationModeHasNoDfuInterface) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  VirtualTransport transport(stick);
  EXPECT_THROW(read_dfu_info(transport, Millis(100)), Error);
}

TEST(Csr, ReadsAndWritesBothWidthsLittleEndian) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  VirtualTransport transport(stick);
  Csr csr(transport);
  EXPECT_EQ(csr.read32(reg::kScuCtrl3), 0x80050410u);
  EXPECT_EQ(csr.read64(reg::kIdleRegister), 0x9000u);
  csr.write64(reg::kTileConfig0, 0x123456789abcdef0ull);
  EXPECT_EQ(stick.register_value(reg::kTileConfig0), 0x123456789abcdef0ull);
  EXPECT_EQ(csr.read64(reg::kTileConfig0), 0x123456789abcdef0ull);
  csr.write32(reg::kSlvAbmEn, 0xdeadbeef);
  EXPECT_EQ(csr.read32(reg::kSlvAbmEn), 0xdeadbeefu);
  EXPECT_EQ(transport.counters().control_transfers, 6u);
}

TEST(Csr, TransientTimeoutsAreNotRetriedButStallsAre) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  VirtualTransport transport(stick);
  Csr csr(transport);
  stick.faults().time_out_controls = 1;
  try {
    csr.read32(reg::kScuCtrl0);
    FAIL();
  } catch (const UsbError& e) {
    EXPECT_EQ(e.status(), TransferStatus::kTimedOut);
  }
  EXPECT_EQ(csr.read32(reg::kScuCtrl0), 0x941u);  // the stick answers again
}

TEST(Csr, PollGivesUpWithTheRegisterNamed) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  VirtualTransport transport(stick);
  Csr csr(transport);
  try {
    csr.poll64(reg::kTileConfig0, 0x7F, 0x7F, 5);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("48788"), std::string::npos) << e.what();
  }
}

TEST(Firmware, MissingFileNamesItAndWhereItComesFrom) {
  const auto empty = std::filesystem::temp_directory_path() / "tinycoral-no-firmware-here";
  std::filesystem::create_directories(empty);
  ::setenv("TINYCORAL_FIRMWARE", empty.c_str(), 1);
  try {
    find_firmware("");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("apex_latest_single_ep.bin"), std::string::npos) << what;
    EXPECT_NE(what.find("google-coral/libedgetpu"), std::string::npos) << what;
    EXPECT_NE(what.find(empty.string()), std::string::npos) << what;
  }
  { std::ofstream(empty / kFirmwareName) << "x"; }
  EXPECT_EQ(find_firmware(""), empty / kFirmwareName);
  ::unsetenv("TINYCORAL_FIRMWARE");
  EXPECT_EQ(find_firmware((empty / kFirmwareName).string()), empty / kFirmwareName);
  std::filesystem::remove_all(empty);
}

}  // namespace
}  // namespace tinycoral::usb
