// Moves one segment of a program's DMAs over the wire (docs/driver.md "Data path"): bulk-OUT DMAs
// framed as [8-byte header][payload in <= 1 MiB transfers], outputs read from EP 0x81 until each
// has its full size (a device DMA ends with a short packet and one output may come as several),
// completion events from EP 0x82, interrupts from EP 0x83. The caller (the runtime's scheduler)
// cuts programs into segments so that no OUT is ever submitted while an output is pending; within
// a segment the output read is posted before the first OUT, so the device can always drain.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <vector>

#include "usb/csr.h"
#include "usb/protocol.h"
#include "usb/transport.h"

namespace tinycoral::usb {

struct OutDma {
  Tag tag = Tag::kInput;
  std::span<const uint8_t> payload;
};

// A run of OUTs followed by the INs that come before the next OUT in hint order.
struct Segment {
  std::vector<OutDma> outs;
  std::vector<std::span<uint8_t>> outputs;  // filled in order from the EP 0x81 byte stream
  std::vector<uint8_t> events;              // event tags to wait for (4 + interrupt type), in order
};

// A DMA descriptor the device reported on EP 0x82: tags 1/2 ask for host bytes, 3 announces output
// bytes, 4..7 are interrupts (docs/driver.md "Device-requested DMAs").
struct DeviceDescriptor {
  uint8_t tag = 0;
  uint64_t address = 0;  // the device address: a relocated buffer base plus an offset
  uint32_t length = 0;
};

// A program whose DMA hints are not fully deterministic, run the way libedgetpu runs one with
// descr_ep 0xFF: the hinted DMAs in order, each hinted transfer matched by the descriptor the
// device reports for it; every descriptor that matches no hint is a request of the device's own,
// served in the order reported, until the completion interrupt (tag 4).
struct RequestedProgram {
  struct Hinted {
    uint8_t tag = 0;       // 0-2 host to device, 3 output, 4-7 interrupt
    uint64_t address = 0;  // what the device's descriptor for it carries
    std::span<uint8_t> bytes;
  };
  std::vector<Hinted> hinted;
  // The host bytes a reported descriptor names (tag 1/2: the bytes to send; 3: where the output
  // goes); throws Error when it names none.
  std::function<std::span<uint8_t>(const DeviceDescriptor&)> resolve;
};

class DmaEngine {
 public:
  DmaEngine(Transport& transport, Csr& csr);
  ~DmaEngine();
  DmaEngine(const DmaEngine&) = delete;
  DmaEngine& operator=(const DmaEngine&) = delete;

  // Runs one segment; throws UsbError (timeout, stall, device gone: the stick needs recovery) or
  // Error (a fatal-error interrupt, a wrong byte count). Everything in flight is cancelled before
  // it throws, so the stick is never left with a pending OUT it cannot drain.
  void run(const Segment& segment, Millis timeout);
  // Runs a whole program whose hints stop short (descr_ep must be 0xFF); the same errors as run().
  void run_requested(const RequestedProgram& program, Millis timeout);
  // Cancels every transfer this engine holds (before close or recovery).
  void cancel_all();
  // Reads and discards whatever EP 0x81 and 0x82 still hold (recovery, docs/driver.md "Recovery");
  // returns the bytes drained.
  size_t drain(Millis per_read_timeout);

 private:
  void arm_listeners();
  void handle_interrupt();
  void take_output_bytes(size_t n, const Segment& segment, size_t& output_index, size_t& offset);
  // One round of completions on the interrupt and event endpoints and the output read (handed to
  // `on_output` with its byte count); false when the deadline passed.
  bool step(Clock::time_point deadline, const std::function<void(size_t)>& on_output);
  // Sends one OUT DMA (header, then the payload in <= 1 MiB transfers), stepping while it waits.
  void send(const OutDma& dma, Clock::time_point deadline, Millis timeout,
            const std::function<void(size_t)>& on_output);
  void post_output_read(size_t want);
  void abort_in_flight();

  Transport& transport_;
  Csr& csr_;
  Transfer event_transfer_;
  Transfer interrupt_transfer_;
  uint8_t event_buffer_[kEventBytes] = {};
  uint8_t interrupt_buffer_[kInterruptBytes] = {};
  std::deque<DeviceDescriptor> events_seen_;  // events that arrived and were not consumed yet
  std::vector<uint8_t> staging_;
  Transfer output_transfer_;
  Transfer out_transfer_;
  uint8_t header_[kBulkHeaderBytes] = {};
};

}  // namespace tinycoral::usb
