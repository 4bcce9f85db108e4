// The one seam between the driver and a stick: control transfers (synchronous) and bulk/interrupt
// transfers (asynchronous: submit, wait, cancel). Two implementations sit below it: libusb
// (libusb_transport.h) and the in-process virtual stick (virtual_transport.h). Everything above it
// (CSR access, DFU, bulk framing, the runtime) is shared and never knows which one it talks to.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "common/error.h"

namespace tinycoral::usb {

using Clock = std::chrono::steady_clock;
using Millis = std::chrono::milliseconds;

// The 8-byte USB setup packet without wLength (the data span gives it).
struct Setup {
  uint8_t request_type = 0;  // bmRequestType; bit 7 set = device-to-host
  uint8_t request = 0;       // bRequest
  uint16_t value = 0;        // wValue
  uint16_t index = 0;        // wIndex
};

enum class TransferStatus : uint8_t {
  kIdle,       // never submitted, or reaped
  kPending,    // submitted, not finished
  kDone,       // finished; `actual` bytes moved (an IN may end short)
  kTimedOut,   // the transport gave up waiting (libusb timeout)
  kStalled,    // the endpoint answered STALL
  kNoDevice,   // the stick left the bus
  kCancelled,  // cancel() took it back
  kError,      // any other failure; `error` says what
};
const char* transfer_status_name(TransferStatus status);

// A transfer that failed; status() tells a dead or wedged stick (timeout, no device) from a
// transient error worth retrying.
class UsbError : public Error {
 public:
  UsbError(TransferStatus status, const std::string& message) : Error(message), status_(status) {}
  TransferStatus status() const { return status_; }

 private:
  TransferStatus status_;
};

struct ControlResult {
  TransferStatus status = TransferStatus::kDone;
  size_t actual = 0;
  std::string error;
};

// One bulk or interrupt transfer. The caller owns it (and its buffer) and must keep both alive
// until the status is no longer kPending (cancel() then wait() guarantees that).
struct Transfer {
  uint8_t endpoint = 0;  // bit 7 set = IN
  uint8_t* data = nullptr;
  size_t length = 0;
  size_t actual = 0;
  TransferStatus status = TransferStatus::kIdle;
  std::string error;
  void* impl = nullptr;  // owned by the transport that last ran it
  bool is_in() const { return (endpoint & 0x80) != 0; }
};

// What moved over the wire, for `--json` and the benchmarks.
struct TransferCounters {
  uint64_t bulk_out_bytes = 0;
  uint64_t bulk_in_bytes = 0;
  uint64_t control_transfers = 0;
};

enum class LinkSpeed : uint8_t { kUnknown, kLow, kFull, kHigh, kSuper };

class Transport {
 public:
  virtual ~Transport() = default;

  // Control transfers. control_in returns the bytes received. Both throw UsbError on a stall, a
  // timeout or a vanished device, naming the request.
  size_t control_in(const Setup& setup, std::span<uint8_t> data, Millis timeout);
  void control_out(const Setup& setup, std::span<const uint8_t> data, Millis timeout);

  // Starts `transfer` (status becomes kPending). Completion is observed by wait_any().
  void submit(Transfer& transfer);
  // Makes progress on every submitted transfer; returns true once at least one transfer finished
  // since the last call, false when `deadline` passed (or, for a deterministic transport, when
  // nothing can change any more) with none finished.
  virtual bool wait_any(Clock::time_point deadline) = 0;
  // Asks for `transfer` back; afterwards it is no longer kPending once wait_any() has run (the
  // status is kCancelled unless it finished first).
  virtual void cancel(Transfer& transfer) = 0;
  // Forgets every transfer this transport still holds (before the caller frees them): cancels and
  // waits, bounded by `timeout`.
  virtual void cancel_all(Millis timeout) = 0;

  virtual LinkSpeed speed() const = 0;
  virtual std::string describe() const = 0;  // e.g. "usb 2-1.3 (18d1:9302)" or "virtual stick"

  const TransferCounters& counters() const { return counters_; }
  void reset_counters() { counters_ = {}; }

 protected:
  virtual ControlResult do_control(const Setup& setup, std::span<uint8_t> data, Millis timeout) = 0;
  virtual void do_submit(Transfer& transfer) = 0;
  // Implementations call this when a transfer finishes so the counters stay right.
  void count_finished(const Transfer& transfer);

 private:
  TransferCounters counters_;
};

// Submits one transfer and waits for it (cancelling it on timeout). Returns the final status.
TransferStatus transfer_sync(Transport& transport, Transfer& transfer, Millis timeout);

}  // namespace tinycoral::usb
