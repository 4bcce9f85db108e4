// The real-hardware side of the transport seam: libusb-1.0. Finds sticks in both states (DFU
// bootloader 1a6e:089a and application mode 18d1:9302), brings a bootloader-mode stick up with a
// DFU firmware download, and carries control and bulk transfers for an open stick. Each scan uses
// a fresh libusb context, so a stick that re-enumerates after DFU is seen without hotplug support.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "usb/transport.h"

struct libusb_context;
struct libusb_device_handle;
struct libusb_transfer;

namespace tinycoral::usb {

struct UsbStickInfo {
  int index = 0;  // position in the scan: `usb:N`
  uint8_t bus = 0;
  std::string port_path;  // "2-1.3": bus, then the port chain
  uint16_t vendor_id = 0, product_id = 0;
  bool bootloader() const;
  std::string state() const;  // "bootloader (needs firmware)" or "ready"
};

// Every stick on the bus, bootloader and application mode alike, in bus/port order. Throws Error
// only when libusb itself cannot start.
std::vector<UsbStickInfo> list_usb_sticks();

struct UsbOpenOptions {
  std::string firmware;  // explicit firmware path (else env / standard folders)
  Millis control_timeout{6000};
  Millis reappear_timeout{10000};  // how long to wait for the stick after DFU
  bool allow_dfu = true;
};

class LibusbTransport final : public Transport {
 public:
  ~LibusbTransport() override;
  LibusbTransport(const LibusbTransport&) = delete;
  LibusbTransport& operator=(const LibusbTransport&) = delete;

  // Opens the stick at `index` of list_usb_sticks() (-1: the first). A bootloader-mode stick gets
  // the firmware first and is then waited for in application mode at the same port. Claims
  // interface 0, retrying while another process releases it.
  static std::unique_ptr<LibusbTransport> open(int index, const UsbOpenOptions& options);
  // The same for the stick `info` describes (one entry of list_usb_sticks()), without scanning
  // again: the caller opens the very stick it chose (and locked).
  static std::unique_ptr<LibusbTransport> open(const UsbStickInfo& info,
                                               const UsbOpenOptions& options);
  // Opens exactly this device (either mode) and claims `interface`: for DFU and tests.
  static std::unique_ptr<LibusbTransport> open_device(const UsbStickInfo& info, int interface);

  bool wait_any(Clock::time_point deadline) override;
  void cancel(Transfer& transfer) override;
  void cancel_all(Millis timeout) override;
  LinkSpeed speed() const override { return speed_; }
  std::string describe() const override { return description_; }

  const UsbStickInfo& info() const { return info_; }
  // USB port reset (used after DFU); the handle is unusable afterwards when the stick
  // re-enumerates.
  void reset_port();

 protected:
  ControlResult do_control(const Setup& setup, std::span<uint8_t> data, Millis timeout) override;
  void do_submit(Transfer& transfer) override;

 private:
  LibusbTransport() = default;
  struct InFlight;
  static void on_complete(::libusb_transfer* transfer);

  libusb_context* context_ = nullptr;
  libusb_device_handle* handle_ = nullptr;
  int interface_ = -1;
  UsbStickInfo info_;
  LinkSpeed speed_ = LinkSpeed::kUnknown;
  std::string description_;
  std::vector<InFlight*> in_flight_;
  uint64_t finished_ = 0, reported_ = 0;
};

}  // namespace tinycoral::usb
