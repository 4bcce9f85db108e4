// In-process URB semantics over the virtual stick.
#include "usb/virtual_transport.h"

namespace tinycoral::usb {

VirtualTransport::~VirtualTransport() { cancel_all(Millis(0)); }

ControlResult VirtualTransport::do_control(const Setup& setup, std::span<uint8_t> data, Millis) {
  ControlResult result = stick_.control(setup, data);
  pump();
  return result;
}

void VirtualTransport::finish(Transfer& transfer, TransferStatus status, size_t actual) {
  transfer.actual = actual;
  transfer.status = status;
  ++finished_;
  count_finished(transfer);
}

void VirtualTransport::do_submit(Transfer& transfer) {
  if (!transfer.is_in()) {
    // A wedged stick never takes the OUT: it stays pending until cancelled, as on a real bus.
    const TransferStatus status = stick_.bulk_out(
        transfer.endpoint, std::span<const uint8_t>(transfer.data, transfer.length));
    if (status == TransferStatus::kTimedOut) {
      pending_[transfer.endpoint].push_back(&transfer);
    } else {
      finish(transfer, status, status == TransferStatus::kDone ? transfer.length : 0);
    }
  } else {
    pending_[transfer.endpoint].push_back(&transfer);
  }
  pump();
}

void VirtualTransport::pump() {
  for (auto& [endpoint, queue] : pending_) {
    if (!(endpoint & 0x80)) continue;
    while (!queue.empty()) {
      Transfer& t = *queue.front();
      const auto result = stick_.bulk_in(endpoint, std::span<uint8_t>(t.data, t.length));
      if (!result) break;
      queue.pop_front();
      finish(t, result->status, result->actual);
    }
  }
}

bool VirtualTransport::wait_any(Clock::time_point) {
  pump();
  if (finished_ != reported_) {
    reported_ = finished_;
    return true;
  }
  return false;  // nothing can change without new host traffic: the same as a timeout
}

void VirtualTransport::cancel(Transfer& transfer) {
  auto it = pending_.find(transfer.endpoint);
  if (it == pending_.end()) return;
  auto& queue = it->second;
  for (auto q = queue.begin(); q != queue.end(); ++q) {
    if (*q == &transfer) {
      queue.erase(q);
      finish(transfer, TransferStatus::kCancelled, 0);
      return;
    }
  }
}

void VirtualTransport::cancel_all(Millis) {
  for (auto& [endpoint, queue] : pending_) {
    while (!queue.empty()) {
      Transfer& t = *queue.front();
      queue.pop_front();
      finish(t, TransferStatus::kCancelled, 0);
    }
  }
}

}  // namespace tinycoral::usb
