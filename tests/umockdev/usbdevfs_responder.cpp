#include "usbdevfs_responder.h"

#include <linux/ioctl.h>
#include <linux/usbdevice_fs.h>

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <set>

namespace tinycoral::testing {
namespace {

usbdevfs_urb* fields(const IoctlDataRef& urb) {
  return reinterpret_cast<usbdevfs_urb*>(urb.get()->data);
}

// The errno usbfs reports in a URB's status for each way a transfer ends.
int urb_status(usb::TransferStatus status) {
  switch (status) {
    case usb::TransferStatus::kDone:
      return 0;
    case usb::TransferStatus::kStalled:
      return -EPIPE;
    case usb::TransferStatus::kNoDevice:
      return -ENODEV;
    default:
      return -EPROTO;
  }
}

// Resolves the pointer at `offset` of `parent` to a local copy of `len` bytes of the caller's
// memory (null for a null pointer or an empty buffer).
IoctlDataRef resolve(UMockdevIoctlData* parent, size_t offset, size_t len) {
  GError* error = nullptr;
  UMockdevIoctlData* data = umockdev_ioctl_data_resolve(parent, offset, len, &error);
  if (error) g_error_free(error);
  return IoctlDataRef(data);
}

}  // namespace

void UsbdevfsResponder::serve(UMockdevIoctlBase* handler) {
  g_signal_connect(handler, "handle-ioctl", G_CALLBACK(&UsbdevfsResponder::on_ioctl), this);
}

std::vector<std::string> UsbdevfsResponder::unknown_requests() const {
  std::lock_guard lock(mutex_);
  return unknown_;
}

gboolean UsbdevfsResponder::on_ioctl(UMockdevIoctlBase*, UMockdevIoctlClient* client,
                                     gpointer self) {
  return static_cast<UsbdevfsResponder*>(self)->handle(client) ? TRUE : FALSE;
}

bool UsbdevfsResponder::handle(UMockdevIoctlClient* client) {
  const gulong request = umockdev_ioctl_client_get_request(client);
  UMockdevIoctlData* arg = umockdev_ioctl_client_get_arg(client);
  if (gone_) {
    umockdev_ioctl_client_complete(client, -1, ENODEV);
    return true;
  }
  switch (request) {
    case USBDEVFS_GET_CAPABILITIES: {
      // One URB per bulk transfer of any length, as on a current kernel.
      IoctlDataRef caps = resolve(arg, 0, sizeof(uint32_t));
      const uint32_t value = USBDEVFS_CAP_BULK_CONTINUATION | USBDEVFS_CAP_NO_PACKET_SIZE_LIM |
                             USBDEVFS_CAP_ZERO_PACKET;
      if (!caps) break;
      std::memcpy(caps.get()->data, &value, sizeof value);
      umockdev_ioctl_client_complete(client, 0, 0);
      return true;
    }
    case USBDEVFS_CLAIMINTERFACE:
    case USBDEVFS_RELEASEINTERFACE:
    case USBDEVFS_SETINTERFACE:
    case USBDEVFS_SETCONFIGURATION:
    case USBDEVFS_CLEAR_HALT:
      umockdev_ioctl_client_complete(client, 0, 0);
      return true;
    case USBDEVFS_RESET:
      stick_.port_reset();
      if (on_reset) on_reset();
      umockdev_ioctl_client_complete(client, 0, 0);
      return true;
    case USBDEVFS_SUBMITURB: {
      const int error = submit(arg);
      umockdev_ioctl_client_complete(client, error ? -1 : 0, error);
      return true;
    }
    case USBDEVFS_DISCARDURB: {
      // The argument is the URB pointer itself, not a pointer to it.
      gulong client_urb = 0;
      std::memcpy(&client_urb, arg->data, sizeof client_urb);
      const bool found = discard(client_urb);
      umockdev_ioctl_client_complete(client, found ? 0 : -1, found ? 0 : EINVAL);
      return true;
    }
    case USBDEVFS_REAPURB:  // never blocks here: the worker thread must not stall
    case USBDEVFS_REAPURBNDELAY: {
      const bool reaped = reap(arg);
      umockdev_ioctl_client_complete(client, reaped ? 0 : -1, reaped ? 0 : EAGAIN);
      return true;
    }
    default:
      break;
  }
  {
    std::lock_guard lock(mutex_);
    char text[32];
    std::snprintf(text, sizeof text, "0x%lx", static_cast<unsigned long>(request));
    unknown_.push_back(text);
  }
  umockdev_ioctl_client_complete(client, -1, ENOTTY);
  return true;
}

int UsbdevfsResponder::submit(UMockdevIoctlData* arg) {
  Urb urb{resolve(arg, 0, sizeof(usbdevfs_urb)), {}};
  if (!urb.urb) return EFAULT;
  const usbdevfs_urb* u = fields(urb.urb);
  if (u->buffer_length < 0) return EINVAL;
  urb.buffer = resolve(urb.urb.get(), offsetof(usbdevfs_urb, buffer), size_t(u->buffer_length));
  ++urbs_;
  if (u->type == USBDEVFS_URB_TYPE_CONTROL) {
    if (!urb.buffer || u->buffer_length < 8) return EINVAL;
    submit_control(std::move(urb));
  } else if (u->type == USBDEVFS_URB_TYPE_BULK || u->type == USBDEVFS_URB_TYPE_INTERRUPT) {
    if (u->endpoint & 0x80)
      pending_in_.push_back(std::move(urb));
    else
      submit_bulk_out(std::move(urb));
  } else {
    return EINVAL;  // the stick has no isochronous endpoints
  }
  pump();
  return 0;
}

void UsbdevfsResponder::submit_control(Urb urb) {
  // The buffer holds the 8-byte setup packet, then the data stage.
  uint8_t* s = urb.buffer.get()->data;
  const usb::Setup setup{s[0], s[1], uint16_t(s[2] | s[3] << 8), uint16_t(s[4] | s[5] << 8)};
  const size_t length = std::min(size_t(s[6] | s[7] << 8), size_t(urb.buffer.get()->data_len - 8));
  const usb::ControlResult r = stick_.control(setup, std::span<uint8_t>(s + 8, length));
  if (r.status == usb::TransferStatus::kTimedOut) {
    never_done_.push_back(std::move(urb));  // libusb times it out and discards it
    return;
  }
  const bool in = setup.request_type & 0x80;
  const int actual = r.status != usb::TransferStatus::kDone ? 0 : int(in ? r.actual : length);
  finish(std::move(urb), urb_status(r.status), actual);
}

void UsbdevfsResponder::submit_bulk_out(Urb urb) {
  const usbdevfs_urb* u = fields(urb.urb);
  const std::span<const uint8_t> bytes =
      urb.buffer ? std::span<const uint8_t>(urb.buffer.get()->data, size_t(u->buffer_length))
                 : std::span<const uint8_t>();
  const usb::TransferStatus s = stick_.bulk_out(u->endpoint, bytes);
  if (s == usb::TransferStatus::kTimedOut) {
    never_done_.push_back(std::move(urb));
    return;
  }
  const int actual = s == usb::TransferStatus::kDone ? u->buffer_length : 0;
  finish(std::move(urb), urb_status(s), actual);
}

void UsbdevfsResponder::pump() {
  // Per endpoint in order: once one IN URB waits, the later ones on that endpoint wait too.
  std::set<unsigned> waiting;
  for (auto it = pending_in_.begin(); it != pending_in_.end();) {
    const usbdevfs_urb* u = fields(it->urb);
    if (waiting.count(u->endpoint)) {
      ++it;
      continue;
    }
    const std::span<uint8_t> buffer =
        it->buffer ? std::span<uint8_t>(it->buffer.get()->data, size_t(u->buffer_length))
                   : std::span<uint8_t>();
    const auto result = stick_.bulk_in(u->endpoint, buffer);
    if (!result) {
      waiting.insert(u->endpoint);
      ++it;
      continue;
    }
    if (result->status == usb::TransferStatus::kTimedOut) {  // wedged: never answers
      never_done_.push_back(std::move(*it));
    } else {
      finish(std::move(*it), urb_status(result->status), int(result->actual));
    }
    it = pending_in_.erase(it);
  }
}

void UsbdevfsResponder::finish(Urb urb, int status, int actual) {
  usbdevfs_urb* u = fields(urb.urb);
  u->status = status;
  u->actual_length = actual;
  reapable_.push_back(std::move(urb));
}

bool UsbdevfsResponder::discard(gulong client_urb) {
  for (auto* queue : {&pending_in_, &never_done_}) {
    for (auto it = queue->begin(); it != queue->end(); ++it) {
      if (it->urb.get()->client_addr == client_urb) {
        // usbfs unlinks the URB; it is reaped with -ENOENT like a killed one.
        finish(std::move(*it), -ENOENT, 0);
        ++discarded_;
        queue->erase(it);
        return true;
      }
    }
  }
  return false;  // already finished (or never submitted): usbfs says EINVAL
}

bool UsbdevfsResponder::reap(UMockdevIoctlData* arg) {
  pump();
  if (reapable_.empty()) return false;
  // The argument points at the caller's `void*`; it gets the caller's own URB pointer. set_ptr
  // makes umockdev write the URB (and its buffer) back to the caller's memory and store the
  // caller-side address in that slot when the ioctl completes.
  IoctlDataRef slot = resolve(arg, 0, sizeof(void*));
  if (!slot) return false;
  Urb urb = std::move(reapable_.front());
  reapable_.pop_front();
  umockdev_ioctl_data_set_ptr(slot.get(), 0, urb.urb.get());
  return true;
}

}  // namespace tinycoral::testing
