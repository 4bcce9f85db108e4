// The real libusb code path, URBs and all, end to end against the virtual stick: umockdev's
// preload library fakes /sys and /dev for this process, MockedStick publishes the virtual stick
// there as a USB device and UsbdevfsResponder plays the kernel's usbfs for it. Nothing below the
// libusb calls is ours: discovery, open, claim, control and bulk URBs, cancellation and the port
// reset all go through libusb-1.0 and its Linux backend.
//  - A bootloader-mode stick is brought up by LibusbTransport::open exactly as on hardware: DFU
//    upload, port reset, the stick re-enumerates as 18d1:9302 (a fresh libusb scan finds it), open
//    sequence, an inference through the virtual Edge TPU, close. A bootloader that rejects the
//    download gives the DFU error and stays on the bus as it was.
//  - An application-mode stick runs register reads and writes and a parameter-caching model with
//    two outputs, twice (the weights stay resident), through the runtime.
// ctest runs this binary with LD_PRELOAD set (tests/umockdev/CMakeLists.txt); run by hand, use
// `umockdev-wrapper build/tests/umockdev/tinycoral_umockdev_tests`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "copy_program.h"
#include "mocked_stick.h"
#include "runtime/edgetpu.h"
#include "usb/csr.h"
#include "usb/fake_chip.h"
#include "usb/libusb_transport.h"
#include "usb/protocol.h"
#include "usb/test_programs.h"
#include "usb/virtual_stick.h"

namespace tinycoral::testing {
namespace {

using usb::LibusbTransport;
using usb::VirtualStick;

// A firmware image in a temporary file (random bytes: the virtual bootloader only stores them).
class FirmwareFile {
 public:
  explicit FirmwareFile(size_t size) : bytes_(size) {
    std::mt19937 rng(5);
    for (uint8_t& b : bytes_) b = static_cast<uint8_t>(rng());
    path_ = std::filesystem::temp_directory_path() /
            ("tinycoral-umockdev-firmware-" + std::to_string(::getpid()) + ".bin");
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes_.data()), std::streamsize(bytes_.size()));
  }
  ~FirmwareFile() { std::filesystem::remove(path_); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::string path() const { return path_.string(); }

 private:
  std::vector<uint8_t> bytes_;
  std::filesystem::path path_;
};

TEST(Umockdev, BootloaderStickIsFlashedOverDfuThenRunsAnInference) {
  chip::VirtualEdgeTpu chip;
  VirtualStick stick(chip);  // starts in bootloader mode, like a freshly plugged stick
  MockedStick mocked(stick, 1);
  ASSERT_TRUE(mocked.problems().empty()) << mocked.problems().front();
  const auto sticks = usb::list_usb_sticks();
  ASSERT_EQ(sticks.size(), 1u);
  EXPECT_TRUE(sticks[0].bootloader());
  EXPECT_EQ(sticks[0].port_path, "1-1");

  const FirmwareFile firmware(10783);  // not a multiple of the DFU block size
  usb::UsbOpenOptions options;
  options.firmware = firmware.path();
  std::unique_ptr<LibusbTransport> transport = LibusbTransport::open(0, options);
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kApplication);
  EXPECT_EQ(stick.firmware(), firmware.bytes());
  EXPECT_EQ(mocked.enumerations(), 2);  // it left the bus and came back in application mode
  EXPECT_EQ(transport->info().product_id, usb::kAppProductId);
  EXPECT_EQ(transport->info().port_path, "1-1");
  const int dfu_urbs = mocked.urbs_submitted();
  EXPECT_GT(dfu_urbs, 10783 / 256);  // one control transfer per DFU block at least

  {
    runtime::EdgeTpu tpu(std::move(transport), nullptr, nullptr);  // the open sequence
    auto program = std::make_shared<runtime::Program>(copy_executable());
    std::vector<uint8_t> input(kCopyBytes);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 37 + 11);
    program->set_input(0, input);
    tpu.run(nullptr, program);
    std::vector<uint8_t> output(kCopyBytes);
    program->get_output(0, output);
    EXPECT_EQ(output, input) << "the virtual Edge TPU's copy program, read back over libusb";
    // The output, then the program's 16-byte completion event.
    EXPECT_EQ(tpu.counters().bulk_in_bytes, kCopyBytes + 16u);
  }  // the close sequence
  EXPECT_EQ((stick.register_value(usb::reg::kScuCtrl3) >> usb::kForceSleepShift) & 3,
            usb::kForceSleepReset);
  EXPECT_EQ(stick.programs_started(), 1);
  EXPECT_TRUE(stick.violations().empty()) << stick.violations().front();
  EXPECT_TRUE(mocked.problems().empty()) << mocked.problems().front();
}

TEST(Umockdev, ARejectedDfuDownloadIsAClearErrorAndTheStickStaysInTheBootloader) {
  FakeChip chip;
  VirtualStick stick(chip);
  stick.faults().fail_dfu = true;  // the bootloader answers errWRITE
  MockedStick mocked(stick, 4);
  ASSERT_TRUE(mocked.problems().empty()) << mocked.problems().front();
  const FirmwareFile firmware(3000);
  usb::UsbOpenOptions options;
  options.firmware = firmware.path();
  try {
    LibusbTransport::open(0, options);
    FAIL() << "a rejected firmware upload opened the stick";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("DFU"), std::string::npos) << what;
    EXPECT_NE(what.find("replug"), std::string::npos) << what;
  }
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kBootloader);
  EXPECT_EQ(mocked.enumerations(), 1);  // it never left the bus
  EXPECT_TRUE(mocked.problems().empty()) << mocked.problems().front();
}

TEST(Umockdev, ApplicationModeStickRunsACachedModelTwice) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  MockedStick mocked(stick, 2);
  ASSERT_TRUE(mocked.problems().empty()) << mocked.problems().front();
  auto transport = LibusbTransport::open(0, {});
  EXPECT_EQ(transport->speed(), usb::LinkSpeed::kHigh);
  usb::Csr csr(*transport, usb::Millis(2000));
  EXPECT_EQ(csr.read32(usb::reg::kScuCtrl0), 0x941u);
  csr.write64(usb::reg::kTileConfig0, 0x7F);
  EXPECT_EQ(csr.read64(usb::reg::kTileConfig0), 0x7Fu);
  {
    runtime::EdgeTpu tpu(std::move(transport), nullptr, nullptr);
    auto caching = std::make_shared<runtime::Program>(make_caching(5000));
    auto inference = std::make_shared<runtime::Program>(make_inference(3000, {1500, 1500}));
    const uint32_t resident = byte_sum(caching->executable().parameters);
    for (int round = 0; round < 2; ++round) {
      std::vector<uint8_t> in(3000);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * 13 + round);
      inference->set_input(0, in);
      tpu.run(caching, inference);
      for (uint32_t k = 0; k < 2; ++k) {
        std::vector<uint8_t> out(1500);
        inference->get_output(k, out);
        EXPECT_EQ(out, expected_output(in, k, 1500, resident)) << "round " << round;
      }
    }
    EXPECT_EQ(chip.programs, 3) << "the caching program ran once, the inference twice";
    // Payloads (parameters once, inputs twice, three 16-byte programs), each DMA behind an 8-byte
    // header; back come four outputs and one 16-byte event per program.
    EXPECT_EQ(tpu.counters().bulk_out_bytes, 5000u + 2 * 3000u + 3 * 16u + 6 * 8u);
    EXPECT_EQ(tpu.counters().bulk_in_bytes, 4 * 1500u + 3 * 16u);
  }
  EXPECT_EQ((stick.register_value(usb::reg::kScuCtrl3) >> usb::kForceSleepShift) & 3,
            usb::kForceSleepReset);
  EXPECT_TRUE(stick.violations().empty()) << stick.violations().front();
  EXPECT_TRUE(mocked.problems().empty()) << mocked.problems().front();
}

}  // namespace
}  // namespace tinycoral::testing
