// The runtime on the virtual stick (with the fake chip): inferences, parameter caching, segment
// scheduling, and every injected fault ending in recovery or a clear error - never a hang, a crash
// or a wrong output returned as right. The stick reports any broken protocol rule as a failure.
#include "runtime/edgetpu.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>

#include "common/error.h"
#include "common/file.h"
#include "runtime/program.h"
#include "usb/fake_chip.h"
#include "usb/test_programs.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::runtime {
namespace {

using namespace tinycoral::testing;

class EdgeTpuOnVirtualStick : public ::testing::Test {
 protected:
  EdgeTpuOnVirtualStick() {
    auto transport = std::make_unique<usb::VirtualTransport>(stick);
    tpu = std::make_unique<EdgeTpu>(std::move(transport), nullptr, nullptr);
    caching = std::make_shared<Program>(make_caching(4096));
    inference = std::make_shared<Program>(make_inference(1000, {300, 300}));
  }
  void TearDown() override {
    tpu.reset();
    EXPECT_TRUE(stick.violations().empty()) << stick.violations().front();
  }
  std::vector<uint8_t> input(uint8_t seed) {
    std::vector<uint8_t> in(1000);
    for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i * seed + 1);
    return in;
  }
  // Runs one inference and checks both outputs against what the chip must compute.
  void infer_and_check(uint8_t seed) {
    const auto in = input(seed);
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
  usb::VirtualStick stick{chip, usb::VirtualStick::Mode::kApplication};
  std::unique_ptr<EdgeTpu> tpu;
  std::shared_ptr<Program> caching, inference;
};

TEST_F(EdgeTpuOnVirtualStick, RunsTheCachingProgramOncePerToken) {
  infer_and_check(3);
  infer_and_check(5);
  infer_and_check(7);
  EXPECT_EQ(chip.programs, 4);  // 1 caching + 3 inferences
  // Another model with another token evicts the weights; coming back reloads them.
  auto other_caching = std::make_shared<Program>(make_caching(64, 0x999));
  auto other = std::make_shared<Program>(make_inference(1000, {300, 300}, 0x999));
  other->set_input(0, input(1));
  tpu->run(other_caching, other);
  EXPECT_EQ(chip.programs, 6);
  infer_and_check(9);
  EXPECT_EQ(chip.programs, 8);
  EXPECT_EQ(tpu->recoveries(), 0);
}

// Co-compiled models (Google's SSD pipeline segments) share one caching token: each loads its own
// weights once, and a model that has not run its caching program under the token still must.
TEST_F(EdgeTpuOnVirtualStick, CoCompiledModelsEachCacheTheirWeightsOnce) {
  auto sibling_caching = std::make_shared<Program>(make_caching(64));  // the same token 0x1234
  auto sibling = std::make_shared<Program>(make_inference(1000, {300, 300}));
  sibling->set_input(0, input(1));
  infer_and_check(3);
  EXPECT_EQ(chip.programs, 2);
  tpu->run(sibling_caching, sibling);
  EXPECT_EQ(chip.programs, 4);  // the sibling's caching program ran although the token is resident
  tpu->run(caching, inference);
  tpu->run(sibling_caching, sibling);
  EXPECT_EQ(chip.programs, 6);  // both loaded: inferences only
  // A new token evicts both.
  auto other_caching = std::make_shared<Program>(make_caching(64, 0x999));
  auto other = std::make_shared<Program>(make_inference(1000, {300, 300}, 0x999));
  other->set_input(0, input(1));
  tpu->run(other_caching, other);
  tpu->run(sibling_caching, sibling);
  EXPECT_EQ(chip.programs, 10);
}

TEST_F(EdgeTpuOnVirtualStick, CountsWhatCrossedTheWire) {
  tpu->reset_counters();
  infer_and_check(3);
  const auto& c = tpu->counters();
  // caching: 2 headers + 16 + 4096; inference: 2 headers + 16 + 1000.
  EXPECT_EQ(c.bulk_out_bytes, 4u * 8 + 16 + 4096 + 16 + 1000);
  EXPECT_EQ(c.bulk_in_bytes, 600u + 2 * 16);  // two outputs, two completion events
  EXPECT_EQ(c.control_transfers, 0u);         // no CSR traffic per inference
}

TEST_F(EdgeTpuOnVirtualStick, ReadsOutputsThatArriveAsSeveralDeviceDmas) {
  stick.faults().split_outputs = true;
  infer_and_check(3);
  infer_and_check(4);
}

TEST_F(EdgeTpuOnVirtualStick, RecoversFromAHungProgramAndPassesTheCanary) {
  infer_and_check(3);  // this inference becomes the canary
  const int resets = chip.resets;
  stick.faults().hang_next_program = true;
  infer_and_check(5);  // hangs, times out, is recovered, retried: the result must still be right
  EXPECT_EQ(tpu->recoveries(), 1);
  EXPECT_GT(chip.resets, resets);  // the chip was re-opened
  infer_and_check(6);
}

TEST_F(EdgeTpuOnVirtualStick, RecoversFromAFatalErrorInterrupt) {
  infer_and_check(3);
  stick.faults().fatal_next_program = true;
  infer_and_check(5);
  EXPECT_EQ(tpu->recoveries(), 1);
  EXPECT_EQ(stick.register_value(usb::reg::kHibErrorStatus), 0u);
}

TEST_F(EdgeTpuOnVirtualStick, RecoversFromAStall) {
  infer_and_check(3);
  stick.faults().stall_bulk_transfers = 1;
  infer_and_check(5);
  EXPECT_EQ(tpu->recoveries(), 1);
}

TEST_F(EdgeTpuOnVirtualStick, RecoversFromShortAndLongOutputs) {
  infer_and_check(3);
  stick.faults().output_byte_delta = -7;
  infer_and_check(5);
  stick.faults().output_byte_delta = 9;
  infer_and_check(6);
  EXPECT_EQ(tpu->recoveries(), 2);
}

TEST_F(EdgeTpuOnVirtualStick, AWedgedFirmwareAsksForAReplug) {
  infer_and_check(3);
  stick.faults().wedge_firmware = true;
  inference->set_input(0, input(5));
  try {
    tpu->run(caching, inference);
    FAIL() << "a wedged stick must not return outputs";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replug"), std::string::npos) << e.what();
  }
}

TEST_F(EdgeTpuOnVirtualStick, AStickThatLeftTheBusIsAClearError) {
  infer_and_check(3);
  stick.faults().off_bus = true;
  inference->set_input(0, input(5));
  try {
    tpu->run(caching, inference);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("left the bus"), std::string::npos) << e.what();
  }
}

TEST_F(EdgeTpuOnVirtualStick, AHangThatComesBackIsNotRetriedForever) {
  infer_and_check(3);
  // Every program from now on hangs: recovery's canary hangs too, so the run must fail clearly.
  stick.faults().hang_next_program = true;
  inference->set_input(0, input(5));
  auto always_hang = [&] { stick.faults().hang_next_program = true; };
  always_hang();
  // The fake stick re-arms only once; emulate "keeps hanging" by wedging the program path.
  stick.faults().stall_bulk_transfers = 1000;
  try {
    tpu->run(caching, inference);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replug"), std::string::npos) << e.what();
  }
}

TEST(EdgeTpuOpen, AFirmwareThatDoesNotAnswerIsAClearError) {
  FakeChip chip;
  usb::VirtualStick stick(chip, usb::VirtualStick::Mode::kApplication);
  stick.faults().time_out_controls = 1000;
  try {
    EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("replug"), std::string::npos) << e.what();
  }
}

TEST(EdgeTpuOpen, ATransientTimeoutDuringRunIsRecovered) {
  FakeChip chip;
  usb::VirtualStick stick(chip, usb::VirtualStick::Mode::kApplication);
  EdgeTpu tpu(std::make_unique<usb::VirtualTransport>(stick), nullptr, nullptr);
  auto program = std::make_shared<Program>(make_inference(10, {10}, 0));
  std::vector<uint8_t> in(10, 1);
  program->set_input(0, in);
  tpu.run(nullptr, program);
  stick.faults().hang_next_program = true;
  stick.faults().time_out_controls = 1;  // the first "is it alive" probe times out as well
  try {
    tpu.run(nullptr, program);
    FAIL() << "a stick that does not answer the probe must be reported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wedged"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(stick.violations().empty());
}

TEST(DeviceLock, ASecondHolderGetsAnErrorNamingTheFirstPid) {
  const auto folder = std::filesystem::temp_directory_path();
  const std::string name = "test-" + std::to_string(::getpid());
  {
    DeviceLock first(name, folder);
    try {
      DeviceLock second(name, folder);
      FAIL();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("process " + std::to_string(::getpid())),
                std::string::npos)
          << e.what();
    }
  }
  DeviceLock again(name, folder);  // released with the first
  std::filesystem::remove(again.path());
}

TEST(DeviceLock, APlantedSymlinkIsRefusedAndItsTargetKept) {
  const auto folder = std::filesystem::temp_directory_path();
  const std::string name = "symlink-" + std::to_string(::getpid());
  const auto target = folder / ("tinycoral-victim-" + std::to_string(::getpid()));
  write_file(target, std::vector<uint8_t>{'k', 'e', 'e', 'p'});
  const auto link = folder / ("tinycoral-" + name + ".lock");
  std::filesystem::create_symlink(target, link);
  try {
    DeviceLock lock(name, folder);
    FAIL() << "a symlink at the lock path must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("symbolic link"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_file(target), (std::vector<uint8_t>{'k', 'e', 'e', 'p'}));
  std::filesystem::remove(link);
  std::filesystem::remove(target);
}

TEST(DeviceLock, TheHoldersTextReachesTheUserOnlyAsDigits) {
  const auto folder = std::filesystem::temp_directory_path();
  const std::string name = "escape-" + std::to_string(::getpid());
  DeviceLock first(name, folder);
  // Someone rewrote the holder's note with a terminal escape sequence.
  const std::string evil = "\x1b]0;owned\x07\x1b[2J123\n";
  write_file(first.path(), std::vector<uint8_t>(evil.begin(), evil.end()));
  try {
    DeviceLock second(name, folder);
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.find('\x1b'), std::string::npos) << what;
    EXPECT_NE(what.find("process ?"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace tinycoral::runtime
