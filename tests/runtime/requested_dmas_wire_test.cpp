// Device-requested DMAs on the wire (docs/driver.md "Device-requested DMAs"), without test data:
// a stand-in chip that behaves like the Keras LSTM's program - it writes two pieces to the host's
// scratch buffer, asks for them back, and only then produces its output - served by
// DmaEngine::run_requested through the virtual stick with descr_ep 0xFF.
#include <gtest/gtest.h>

#include <deque>

#include "chip/host_port.h"
#include "common/error.h"
#include "runtime/chip_control.h"
#include "usb/csr.h"
#include "usb/dma_engine.h"
#include "usb/protocol.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::usb {
namespace {

constexpr uint64_t kInput = 2ull << 40, kScratch = 4ull << 40, kOutput = 1ull << 40;
constexpr uint32_t kBytes = 24;

// Reports a descriptor for every DMA (the stick filters them by descr_ep). Input x (24 bytes):
// scratch gets x + 1 in two halves; once the scratch comes back, the output is scratch + 1, then
// interrupt 0.
class ScratchLoopChip final : public chip::HostPort {
 public:
  void reset() override { *this = ScratchLoopChip(); }
  void receive(chip::DmaTag tag, std::span<const uint8_t> payload) override {
    if (tag == chip::DmaTag::kInstructions) {
      stage_ = 1;
      events_.push_back({kInput, kBytes, 1});
      return;
    }
    if (stage_ == 1 && tag == chip::DmaTag::kInput) {
      for (size_t half = 0; half < 2; ++half) {
        events_.push_back({kScratch + 12 * half, 12, 3});
        std::vector<uint8_t> piece(payload.begin() + 12 * half, payload.begin() + 12 * (half + 1));
        for (auto& b : piece) ++b;
        outputs_.push_back(piece);
      }
      events_.push_back({kScratch, kBytes, 1});
      stage_ = 2;
    } else if (stage_ == 2 && tag == chip::DmaTag::kInput) {
      events_.push_back({kOutput, kBytes, 3});
      std::vector<uint8_t> out(payload.begin(), payload.end());
      for (auto& b : out) ++b;
      outputs_.push_back(out);
      events_.push_back({0, 0, 4});
      stage_ = 0;
    }
  }
  chip::RunState advance() override {
    return stage_ ? chip::RunState::kWaiting : chip::RunState::kIdle;
  }
  std::optional<std::vector<uint8_t>> take_output() override { return take(outputs_); }
  std::optional<chip::HostEvent> take_event() override { return take(events_); }
  std::string fault() const override { return {}; }

 private:
  template <typename T>
  static std::optional<T> take(std::deque<T>& q) {
    if (q.empty()) return std::nullopt;
    T front = std::move(q.front());
    q.pop_front();
    return front;
  }
  int stage_ = 0;
  std::deque<std::vector<uint8_t>> outputs_;
  std::deque<chip::HostEvent> events_;
};

class RequestedDmas : public ::testing::Test {
 protected:
  void SetUp() override { runtime::open_chip(csr, LinkSpeed::kSuper); }
  // The hinted part: instructions and the input (its descriptor must match); the rest is resolved
  // by address.
  RequestedProgram program() {
    RequestedProgram p;
    p.hinted = {{0, 0, code}, {1, kInput, input}};
    p.resolve = [this](const DeviceDescriptor& d) -> std::span<uint8_t> {
      for (auto [base, buffer] : {std::pair{kScratch, &scratch}, std::pair{kOutput, &output}})
        if (d.address >= base && d.address - base + d.length <= buffer->size())
          return std::span<uint8_t>(buffer->data() + (d.address - base), d.length);
      fail("no buffer at 0x", std::hex, d.address);
    };
    return p;
  }
  ScratchLoopChip chip;
  VirtualStick stick{chip, VirtualStick::Mode::kApplication};
  VirtualTransport transport{stick};
  Csr csr{transport};
  DmaEngine engine{transport, csr};
  std::vector<uint8_t> code = std::vector<uint8_t>(16, 0), input, scratch, output;
};

TEST_F(RequestedDmas, ServesTheScratchRoundTripInOrder) {
  for (uint32_t i = 0; i < kBytes; ++i) input.push_back(static_cast<uint8_t>(7 * i));
  scratch.assign(kBytes, 0);
  output.assign(kBytes, 0);
  csr.write64(reg::kDescrEp, 0xFF);
  engine.run_requested(program(), Millis(1000));
  for (uint32_t i = 0; i < kBytes; ++i) {
    EXPECT_EQ(scratch[i], uint8_t(7 * i + 1)) << i;
    EXPECT_EQ(output[i], uint8_t(7 * i + 2)) << i;
  }
  // Nothing sent twice (the hinted input's descriptor matched it), no OUT while an output was
  // pending (the stick would have reported it): instructions, input, scratch, each with a header.
  EXPECT_TRUE(stick.violations().empty());
  EXPECT_EQ(transport.counters().bulk_out_bytes, 3 * 8u + 16 + kBytes + kBytes);
}

TEST_F(RequestedDmas, WithoutDeviceDescriptorsTheProgramNeverFinishes) {
  input.assign(kBytes, 1);
  scratch.assign(kBytes, 0);
  output.assign(kBytes, 0);
  // descr_ep 0xF0: the stick reports interrupts only, so nobody asks for the scratch.
  EXPECT_THROW(engine.run_requested(program(), Millis(200)), UsbError);
}

TEST_F(RequestedDmas, ADescriptorNamingNoBufferIsAnError) {
  input.assign(kBytes, 1);
  scratch.assign(kBytes / 2, 0);  // too small for the second half
  output.assign(kBytes, 0);
  csr.write64(reg::kDescrEp, 0xFF);
  try {
    engine.run_requested(program(), Millis(1000));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no buffer at 0x4000000000c"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinycoral::usb
