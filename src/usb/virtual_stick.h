// The virtual stick: a state machine that behaves like a Coral USB Accelerator on the wire, byte
// for byte (docs/driver.md "The virtual stick"). It starts in bootloader (DFU) mode, accepts a
// firmware download and re-appears in application mode after a port reset; it answers CSR requests
// from a register file with the reset values the open sequence reads; it parses the bulk-OUT byte
// stream into DMAs for the chip behind a chip::HostPort, and serves that chip's outputs (EP 0x81),
// events (EP 0x82) and interrupts (EP 0x83). It enforces the protocol's rules - above all the
// deadlock rule - and records every violation so that tests fail, and it injects the faults real
// sticks have, on demand. Thread-safe: the umockdev responder may call it from another thread.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "chip/host_port.h"
#include "usb/transport.h"

namespace tinycoral::usb {

// Faults a test switches on; each models something that hurts on real hardware.
struct StickFaults {
  // A bulk OUT that starts while output bytes are unread breaks the deadlock rule; hardware wedges
  // (no transfer of any kind answers any more). Off: only the violation is recorded.
  bool wedge_on_deadlock = true;
  int time_out_controls = 0;        // the next N control transfers time out, then it recovers
  int stall_bulk_transfers = 0;     // the next N bulk transfers answer STALL
  bool off_bus = false;             // the stick has left the bus: everything fails with kNoDevice
  bool fail_dfu = false;            // the bootloader rejects the download (errWRITE)
  bool hang_next_program = false;   // the next program swallows its DMAs and never finishes
  bool fatal_next_program = false;  // the next program raises the fatal-error interrupt
  bool wedge_firmware = false;      // the firmware stops answering anything (until replugged)
  int output_byte_delta = 0;        // the next output DMA carries this many bytes more (or fewer)
  bool split_outputs = false;  // every output DMA arrives as two device DMAs, each ending short
};

class VirtualStick {
 public:
  enum class Mode : uint8_t { kBootloader, kApplication };

  // `chip` must outlive the stick. A stick starting in application mode has its firmware already.
  explicit VirtualStick(chip::HostPort& chip, Mode mode = Mode::kBootloader);

  // The wire. Control: kDone with the reply in `data` (IN) or the request applied (OUT); kStalled
  // for requests the stick does not know; kTimedOut when wedged; kNoDevice when off the bus.
  ControlResult control(const Setup& setup, std::span<uint8_t> data);
  // One bulk-OUT transfer: kDone (all bytes taken), kTimedOut (wedged: it never completes),
  // kStalled, or kNoDevice.
  TransferStatus bulk_out(uint8_t endpoint, std::span<const uint8_t> data);
  // One bulk/interrupt IN transfer of buffer.size() bytes: nullopt while the stick has nothing to
  // send (the transfer stays pending); otherwise the status and the bytes sent. A transfer never
  // spans two device DMAs (each ends with a short packet).
  struct InResult {
    TransferStatus status = TransferStatus::kDone;
    size_t actual = 0;
  };
  std::optional<InResult> bulk_in(uint8_t endpoint, std::span<uint8_t> buffer);
  // A USB port reset: a bootloader with a complete, good download comes back in application mode.
  void port_reset();
  // Unplug and plug in again: back to the bootloader, firmware and wedge gone.
  void replug();

  Mode mode() const;
  uint16_t vendor_id() const;
  uint16_t product_id() const;
  std::vector<uint8_t> device_descriptor() const;
  std::vector<uint8_t> config_descriptor() const;

  StickFaults& faults() { return faults_; }  // set before traffic (not synchronized)
  bool wedged() const;
  // Every rule the host broke, in order ("deadlock rule: ...", "framing: ..."). Tests assert empty.
  std::vector<std::string> violations() const;
  uint64_t register_value(uint32_t address) const;
  std::vector<uint8_t> firmware() const;  // what the last complete download stored
  int programs_started() const;           // instruction DMAs received while running
  int chip_resets() const;
  std::string chip_fault() const;  // why the chip behind the stick last faulted ("" if it did not)

 private:
  ControlResult bootloader_control(const Setup& setup, std::span<uint8_t> data);
  ControlResult app_control(const Setup& setup, std::span<uint8_t> data);
  void write_register(uint32_t address, uint64_t value);
  uint64_t read_register(uint32_t address) const;
  bool running() const;
  void reset_chip();
  void deliver_dma();
  void collect_chip_results();
  void violation(std::string what);
  void reset_registers();

  mutable std::mutex mutex_;
  chip::HostPort& chip_;
  StickFaults faults_;
  Mode mode_;
  bool wedged_ = false;

  // Bootloader.
  std::vector<uint8_t> download_;
  std::vector<uint8_t> firmware_;
  bool download_complete_ = false;
  bool dfu_error_ = false;
  uint8_t dfu_state_ = 2;

  // Application.
  std::map<uint32_t, uint64_t> registers_;
  // Bulk-OUT parser: the current DMA's header and payload so far.
  std::vector<uint8_t> header_;
  uint32_t dma_length_ = 0;
  uint8_t dma_tag_ = 0;
  std::vector<uint8_t> payload_;
  bool in_payload_ = false;
  bool program_hung_ = false;
  bool fatal_raised_ = false;
  std::deque<std::vector<uint8_t>> outputs_;  // device DMAs on EP 0x81, front partly sent
  size_t output_sent_ = 0;                    // bytes of outputs_.front() already sent
  std::deque<std::vector<uint8_t>> events_;   // 16-byte records on EP 0x82
  std::deque<uint32_t> interrupts_;           // 4-byte words on EP 0x83
  std::vector<std::string> violations_;
  int programs_started_ = 0;
  int chip_resets_ = 0;
  std::string chip_fault_;
};

}  // namespace tinycoral::usb
