// Faults over the real libusb path: what recovery does on hardware - cancel URBs in flight
// (DISCARDURB), clear a halted endpoint, drain the IN pipes, re-open the chip - goes through
// libusb and its Linux backend here, not through the in-process transport. Each fault must end in
// a recovery whose outputs are right, or in a clear error, within the timeout.
#include <gtest/gtest.h>

#include <chrono>

#include "common/error.h"
#include "mocked_stick.h"
#include "runtime/edgetpu.h"
#include "usb/fake_chip.h"
#include "usb/libusb_transport.h"
#include "usb/test_programs.h"
#include "usb/virtual_stick.h"

namespace tinycoral::testing {
namespace {

using usb::VirtualStick;

class UmockdevFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(mocked.problems().empty()) << mocked.problems().front();
    runtime::EdgeTpuOptions options;
    options.timeout = usb::Millis(300);  // a hung program is noticed quickly
    tpu = std::make_unique<runtime::EdgeTpu>(usb::LibusbTransport::open(0, {}), nullptr, nullptr,
                                             options);
  }
  void TearDown() override {
    tpu.reset();
    EXPECT_TRUE(stick.violations().empty()) << stick.violations().front();
    EXPECT_TRUE(mocked.problems().empty()) << mocked.problems().front();
  }
  // One inference; both outputs must be what the chip computes.
  void infer_and_check(uint8_t seed) {
    std::vector<uint8_t> in(1000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * seed + 1);
    inference->set_input(0, in);
    tpu->run(caching, inference);
    const uint32_t resident = byte_sum(caching->executable().parameters);
    for (uint32_t k = 0; k < 2; ++k) {
      std::vector<uint8_t> out(300);
      inference->get_output(k, out);
      ASSERT_EQ(out, expected_output(in, k, 300, resident)) << "output " << k;
    }
  }

  FakeChip chip;
  VirtualStick stick{chip, VirtualStick::Mode::kApplication};
  MockedStick mocked{stick, 3};
  std::unique_ptr<runtime::EdgeTpu> tpu;
  std::shared_ptr<runtime::Program> caching =
      std::make_shared<runtime::Program>(make_caching(4096));
  std::shared_ptr<runtime::Program> inference =
      std::make_shared<runtime::Program>(make_inference(1000, {300, 300}));
};

TEST_F(UmockdevFaults, AHungProgramIsCancelledAndRecovered) {
  infer_and_check(3);  // the canary
  const int resets = chip.resets;
  stick.faults().hang_next_program = true;
  const auto start = std::chrono::steady_clock::now();
  infer_and_check(5);  // hangs; its IN URBs are discarded; re-open, canary, retry
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(tpu->recoveries(), 1);
  EXPECT_GT(chip.resets, resets);
  EXPECT_GT(mocked.urbs_discarded(), 0) << "the hung program's IN URBs were cancelled";
  infer_and_check(6);
}

TEST_F(UmockdevFaults, AStallIsClearedAndRecovered) {
  infer_and_check(3);
  stick.faults().stall_bulk_transfers = 1;
  infer_and_check(5);
  EXPECT_EQ(tpu->recoveries(), 1);
}

TEST_F(UmockdevFaults, AWedgedFirmwareIsAClearErrorNotAHang) {
  infer_and_check(3);
  stick.faults().wedge_firmware = true;
  inference->set_input(0, std::vector<uint8_t>(1000, 1));
  const auto start = std::chrono::steady_clock::now();
  try {
    tpu->run(caching, inference);
    FAIL() << "a wedged firmware returned outputs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replug"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
  // Closing does not wait out control timeouts on a stick known not to answer.
  const auto closing = std::chrono::steady_clock::now();
  tpu.reset();
  EXPECT_LT(std::chrono::steady_clock::now() - closing, std::chrono::seconds(3));
}

TEST_F(UmockdevFaults, AStickThatLeftTheBusIsAClearError) {
  infer_and_check(3);
  stick.faults().off_bus = true;  // URBs end with -ENODEV, as usbfs reports a vanished device
  inference->set_input(0, std::vector<uint8_t>(1000, 1));
  try {
    tpu->run(caching, inference);
    FAIL() << "a stick that left the bus returned outputs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left the bus"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinycoral::testing
