// Shared parts of the transport seam: counting, and the synchronous helper built on submit/wait.
#include "usb/transport.h"

#include <vector>

namespace tinycoral::usb {

const char* transfer_status_name(TransferStatus status) {
  switch (status) {
    case TransferStatus::kIdle:
      return "idle";
    case TransferStatus::kPending:
      return "pending";
    case TransferStatus::kDone:
      return "done";
    case TransferStatus::kTimedOut:
      return "timed out";
    case TransferStatus::kStalled:
      return "stalled";
    case TransferStatus::kNoDevice:
      return "device gone";
    case TransferStatus::kCancelled:
      return "cancelled";
    case TransferStatus::kError:
      return "error";
  }
  return "?";
}

namespace {
void check_control(const Setup& setup, const ControlResult& result, const std::string& where) {
  if (result.status == TransferStatus::kDone) return;
  throw UsbError(result.status,
                 cat("control request 0x", std::hex, int(setup.request_type), "/",
                     int(setup.request), " (value 0x", setup.value, ", index 0x", setup.index,
                     ") on ", where, ": ", transfer_status_name(result.status),
                     result.error.empty() ? "" : " (" + result.error + ")"));
}
}  // namespace

size_t Transport::control_in(const Setup& setup, std::span<uint8_t> data, Millis timeout) {
  ++counters_.control_transfers;
  const ControlResult result = do_control(setup, data, timeout);
  check_control(setup, result, describe());
  return result.actual;
}

void Transport::control_out(const Setup& setup, std::span<const uint8_t> data, Millis timeout) {
  ++counters_.control_transfers;
  // do_control never writes into an OUT buffer; one entry point keeps both implementations small.
  const ControlResult result = do_control(
      setup, std::span<uint8_t>(const_cast<uint8_t*>(data.data()), data.size()), timeout);
  check_control(setup, result, describe());
}

void Transport::submit(Transfer& transfer) {
  transfer.actual = 0;
  transfer.error.clear();
  transfer.status = TransferStatus::kPending;
  do_submit(transfer);
}

void Transport::count_finished(const Transfer& transfer) {
  if (transfer.is_in())
    counters_.bulk_in_bytes += transfer.actual;
  else
    counters_.bulk_out_bytes += transfer.actual;
}

TransferStatus transfer_sync(Transport& transport, Transfer& transfer, Millis timeout) {
  transport.submit(transfer);
  const auto deadline = Clock::now() + timeout;
  while (transfer.status == TransferStatus::kPending) {
    if (!transport.wait_any(deadline)) break;
  }
  if (transfer.status == TransferStatus::kPending) {
    transport.cancel(transfer);
    // A cancel completes quickly on a live stick; bound the wait anyway.
    const auto cancel_deadline = Clock::now() + Millis(500);
    while (transfer.status == TransferStatus::kPending && transport.wait_any(cancel_deadline)) {
    }
    if (transfer.status == TransferStatus::kPending ||
        transfer.status == TransferStatus::kCancelled)
      transfer.status = TransferStatus::kTimedOut;
  }
  return transfer.status;
}

}  // namespace tinycoral::usb
