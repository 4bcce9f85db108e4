// The open sequence and the bulk protocol against the in-process virtual stick: framing, output
// reads of multi-DMA outputs, and the rules the stick enforces (deadlock rule, framing, run state).
#include <gtest/gtest.h>

#include "common/error.h"
#include "runtime/chip_control.h"
#include "usb/csr.h"
#include "usb/dma_engine.h"
#include "usb/fake_chip.h"
#include "usb/protocol.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::usb {
namespace {

using testing::FakeChip;

std::vector<uint8_t> header(uint32_t length, uint8_t tag) {
  return {uint8_t(length),
          uint8_t(length >> 8),
          uint8_t(length >> 16),
          uint8_t(length >> 24),
          tag,
          0,
          0,
          0};
}

void send(VirtualStick& stick, const std::vector<uint8_t>& bytes) {
  ASSERT_EQ(stick.bulk_out(kEpBulkOut, bytes), TransferStatus::kDone);
}

TEST(OpenSequence, LeavesTheVirtualChipRunningWithInterruptsEnabled) {
  FakeChip chip;
  VirtualStick stick(chip, VirtualStick::Mode::kApplication);
  VirtualTransport transport(stick);
  Csr csr(transport);
  const runtime::ChipInfo info = runtime::open_chip(csr, LinkSpeed::kSuper);
  EXPECT_EQ(info.efuse_revision, 1u);
  for (uint32_t r : reg::kScalarRunControls)
    EXPECT_EQ(stick.register_value(r), 1u) << std::hex << r;
  for (uint32_t r : reg::kTileRunControls) EXPECT_EQ(stick.register_value(r), 1u) << std::hex << r;
  EXPECT_EQ(stick.register_value(reg::kOutfeedChunkLength), 0x80u);
  EXPECT_EQ(stick.register_value(reg::kDescrEp), 0xF0u);
  EXPECT_EQ((stick.register_value(reg::kScuCtrl3) >> kForceSleepShift) & 3, kForceSleepRun);
  EXPECT_EQ((stick.register_value(reg::kScuCtrl2) >> kGatedGcbShift) & 3, 1u);
  // The values the captured trace shows from a fresh chip.
  EXPECT_EQ(stick.register_value(reg::kOmc0_d4), 0x80000001u);
  EXPECT_EQ(stick.register_value(reg::kRambistCtrl1), 0x7Fu);
  EXPECT_EQ(stick.register_value(reg::kScuCtr7), 0x3Fu);
  EXPECT_EQ(stick.register_value(reg::kOmc0_d8), 0x80000000u);
  EXPECT_EQ(stick.register_value(reg::kUsbFatalErrIntControl), 1u);
  EXPECT_GE(chip.resets, 1);
  runtime::close_chip(csr);
  for (uint32_t r : reg::kScalarRunControls) EXPECT_EQ(stick.register_value(r), 0u);
  EXPECT_EQ((stick.register_value(reg::kScuCtrl3) >> kForceSleepShift) & 3, kForceSleepReset);
  EXPECT_TRUE(stick.violations().empty());
}

class RunningStick : public ::testing::Test {
 protected:
  void SetUp() override {
    Csr csr(transport);
    runtime::open_chip(csr, LinkSpeed::kSuper);
  }
  FakeChip chip;
  VirtualStick stick{chip, VirtualStick::Mode::kApplication};
  VirtualTransport transport{stick};
};

TEST_F(RunningStick, AcceptsHeadersAloneTogetherWithPayloadOrSplitAnywhere) {
  const auto program = FakeChip::program(6, 1, 6, 0);
  send(stick, header(16, 0));
  send(stick, program);
  auto h = header(6, 1);
  h.insert(h.end(), {1, 2, 3});  // header + part of the payload
  send(stick, h);
  send(stick, {4, 5});
  send(stick, {6});
  EXPECT_EQ(chip.programs, 1);
  uint8_t out[1024];
  const auto got = stick.bulk_in(kEpOutput, out);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->actual, 6u);  // one device DMA ends with a short packet
  EXPECT_EQ(std::vector<uint8_t>(out, out + 6), (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
  uint8_t event[16];
  ASSERT_TRUE(stick.bulk_in(kEpEvent, event));
  EXPECT_EQ(event[12], 4);
  EXPECT_TRUE(stick.violations().empty());
}

TEST_F(RunningStick, ReportsATransferThatCrossesIntoTheNextHeader) {
  auto bytes = header(16, 0);
  const auto program = FakeChip::program(2, 0, 0, 0);
  bytes.insert(bytes.end(), program.begin(), program.end());
  const auto next = header(2, 1);
  bytes.insert(bytes.end(), next.begin(), next.end());
  send(stick, bytes);
  ASSERT_EQ(stick.violations().size(), 1u);
  EXPECT_NE(stick.violations()[0].find("framing"), std::string::npos);
}

TEST_F(RunningStick, WedgesWhenABulkOutStartsWhileAnOutputIsUnread) {
  send(stick, header(16, 0));
  send(stick, FakeChip::program(1, 1, 2048, 0));
  send(stick, header(1, 1));
  send(stick, {9});
  // The output is waiting on EP 0x81; the next program's instructions break the rule.
  EXPECT_EQ(stick.bulk_out(kEpBulkOut, header(16, 0)), TransferStatus::kTimedOut);
  ASSERT_EQ(stick.violations().size(), 1u);
  EXPECT_NE(stick.violations()[0].find("deadlock rule"), std::string::npos);
  EXPECT_TRUE(stick.wedged());
  Csr csr(transport, Millis(10));
  EXPECT_THROW(csr.read32(reg::kScuCtrl0), UsbError);  // the firmware stopped answering
  uint8_t out[1024];
  EXPECT_FALSE(stick.bulk_in(kEpOutput, out));
  stick.port_reset();  // a port reset on a wedged stick: it vanishes
  EXPECT_EQ(stick.bulk_out(kEpBulkOut, header(1, 1)), TransferStatus::kNoDevice);
  stick.replug();
  EXPECT_EQ(stick.mode(), VirtualStick::Mode::kBootloader);
}

TEST_F(RunningStick, DmaBeforeTheOpenSequenceIsAViolation) {
  FakeChip other;
  VirtualStick fresh(other, VirtualStick::Mode::kApplication);
  ASSERT_EQ(fresh.bulk_out(kEpBulkOut, header(1, 1)), TransferStatus::kDone);
  const std::vector<uint8_t> one = {1};
  ASSERT_EQ(fresh.bulk_out(kEpBulkOut, one), TransferStatus::kDone);
  ASSERT_EQ(fresh.violations().size(), 1u);
  EXPECT_NE(fresh.violations()[0].find("not running"), std::string::npos);
}

TEST_F(RunningStick, EngineReadsAMultiDmaOutputToItsFullSize) {
  stick.faults().split_outputs = true;
  Csr csr(transport);
  DmaEngine engine(transport, csr);
  const auto program = FakeChip::program(3000, 2, 1500, 1);
  std::vector<uint8_t> input(3000);
  for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i);
  std::vector<uint8_t> out0(1500), out1(1500);
  Segment segment;
  segment.outs = {{Tag::kInstructions, program}, {Tag::kInput, input}};
  segment.outputs = {out0, out1};
  segment.events = {4};
  engine.run(segment, Millis(1000));
  for (size_t j = 0; j < 1500; ++j) {
    ASSERT_EQ(out0[j], uint8_t(input[j] + 1)) << j;
    ASSERT_EQ(out1[j], uint8_t(input[1500 + j] + 2)) << j;
  }
  EXPECT_TRUE(stick.violations().empty());
  EXPECT_EQ(transport.counters().bulk_in_bytes, 3000u + 16u);
  EXPECT_EQ(transport.counters().bulk_out_bytes, 8u + 16 + 8 + 3000);
}

TEST_F(RunningStick, EngineSplitsPayloadsIntoMebibyteTransfers) {
  Csr csr(transport);
  DmaEngine engine(transport, csr);
  const uint32_t size = (5u << 20) / 2;  // 2.5 MiB
  const auto program = FakeChip::program(size, 1, 16, 0);
  std::vector<uint8_t> input(size, 3), out(16);
  Segment segment{{{Tag::kInstructions, program}, {Tag::kInput, input}}, {out}, {4}};
  engine.run(segment, Millis(1000));
  EXPECT_EQ(out, std::vector<uint8_t>(16, 3));
  EXPECT_TRUE(stick.violations().empty());
}

TEST_F(RunningStick, EngineReportsExtraOutputBytes) {
  stick.faults().output_byte_delta = 5;
  Csr csr(transport);
  DmaEngine engine(transport, csr);
  const auto program = FakeChip::program(4, 1, 4, 0);
  std::vector<uint8_t> input(4, 1), out(4);
  Segment segment{{{Tag::kInstructions, program}, {Tag::kInput, input}}, {out}, {4}};
  try {
    engine.run(segment, Millis(1000));
    FAIL();
  } catch (const UsbError& e) {
    EXPECT_NE(std::string(e.what()).find("more than"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tinycoral::usb
