// Plays the Linux kernel's usbfs for one mocked device node: answers the usbdevfs ioctls libusb
// issues (SUBMITURB, REAPURBNDELAY, DISCARDURB, CLAIMINTERFACE, RESET, ...) from a VirtualStick, so
// that the real libusb code path, URBs and all, runs against the virtual stick under umockdev.
// It runs on umockdev's testbed worker thread (the "handle-ioctl" signal); URBs are answered in
// submission order per endpoint, IN URBs stay pending until the stick has something to send, and a
// reaped URB goes back to libusb as the pointer it submitted (usbfs hands back the caller's own
// struct usbdevfs_urb, with status, actual_length and an IN buffer filled in).
#pragma once

#include <umockdev.h>

#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "usb/virtual_stick.h"

namespace tinycoral::testing {

// Owns one reference to a UMockdevIoctlData (a GObject).
class IoctlDataRef {
 public:
  IoctlDataRef() = default;
  explicit IoctlDataRef(UMockdevIoctlData* owned) : data_(owned) {}
  IoctlDataRef(IoctlDataRef&& other) noexcept : data_(std::exchange(other.data_, nullptr)) {}
  IoctlDataRef& operator=(IoctlDataRef&& other) noexcept {
    std::swap(data_, other.data_);
    return *this;
  }
  IoctlDataRef(const IoctlDataRef&) = delete;
  IoctlDataRef& operator=(const IoctlDataRef&) = delete;
  ~IoctlDataRef() {
    if (data_) g_object_unref(data_);
  }
  UMockdevIoctlData* get() const { return data_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  UMockdevIoctlData* data_ = nullptr;
};

class UsbdevfsResponder {
 public:
  explicit UsbdevfsResponder(usb::VirtualStick& stick) : stick_(stick) {}
  UsbdevfsResponder(const UsbdevfsResponder&) = delete;
  UsbdevfsResponder& operator=(const UsbdevfsResponder&) = delete;

  // Connects to `handler`'s "handle-ioctl" signal; the responder must outlive the connection.
  void serve(UMockdevIoctlBase* handler);

  // Called (on the worker thread) after USBDEVFS_RESET reset the stick's port: the device may
  // have changed identity (DFU -> application) and need re-enumerating.
  std::function<void()> on_reset;
  // The device left the bus (re-enumerated): every further ioctl fails with ENODEV, as usbfs does
  // on a file descriptor of a device that is gone.
  void disconnect() { gone_ = true; }

  int urbs_submitted() const { return urbs_; }
  int urbs_discarded() const { return discarded_; }
  // Requests the responder does not know, as "0x<request>"; tests assert none came.
  std::vector<std::string> unknown_requests() const;

 private:
  struct Urb {
    IoctlDataRef urb;     // the caller's struct usbdevfs_urb (local copy, synced back on reap)
    IoctlDataRef buffer;  // its data buffer (null when the URB has none)
  };
  static gboolean on_ioctl(UMockdevIoctlBase* handler, UMockdevIoctlClient* client, gpointer self);
  bool handle(UMockdevIoctlClient* client);
  int submit(UMockdevIoctlData* arg);
  void submit_control(Urb urb);
  void submit_bulk_out(Urb urb);
  bool discard(gulong client_urb);
  bool reap(UMockdevIoctlData* arg);
  void pump();
  void finish(Urb urb, int status, int actual);

  usb::VirtualStick& stick_;
  // Worker-thread state.
  std::deque<Urb> pending_in_;  // IN URBs waiting for data, in submission order
  std::deque<Urb> never_done_;  // URBs a wedged stick never answers (until discarded)
  std::deque<Urb> reapable_;    // finished, in completion order
  std::atomic<bool> gone_{false};
  std::atomic<int> urbs_{0}, discarded_{0};
  mutable std::mutex mutex_;  // guards unknown_
  std::vector<std::string> unknown_;
};

}  // namespace tinycoral::testing
