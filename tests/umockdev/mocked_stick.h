// A umockdev testbed holding one virtual stick as a USB device on bus 1: the sysfs entry libusb's
// udev scan reads (descriptors, bus and device numbers, speed) and the /dev/bus/usb node whose
// ioctls a UsbdevfsResponder answers. After a port reset that changes the stick's identity (a
// completed DFU download), the stick re-enumerates like real hardware: the old device node goes
// away (its open handles get ENODEV) and the stick appears again at the same port with a new
// device number and its application-mode descriptors, where a fresh libusb scan finds it.
// Needs umockdev's preload library in the process (LD_PRELOAD; ctest sets it).
#pragma once

#include <umockdev.h>

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "usb/virtual_stick.h"
#include "usbdevfs_responder.h"

namespace tinycoral::testing {

class MockedStick {
 public:
  // Publishes `stick` at port `port` (1..9) of bus 1.
  MockedStick(usb::VirtualStick& stick, int port);
  ~MockedStick();
  MockedStick(const MockedStick&) = delete;
  MockedStick& operator=(const MockedStick&) = delete;

  int enumerations() const;  // 1 + how often the stick re-enumerated
  int urbs_submitted() const;
  int urbs_discarded() const;  // URBs libusb cancelled while the stick held them
  // Setup problems and usbdevfs requests nobody answered; tests assert it is empty.
  std::vector<std::string> problems() const;

 private:
  struct Node {
    std::string sysfs_path, dev;
    uint16_t vendor_id = 0, product_id = 0;
    UMockdevIoctlBase* handler = nullptr;
    std::unique_ptr<UsbdevfsResponder> responder;
  };
  // Adds the device in the stick's current identity and serves its node (mutex_ held).
  void publish();
  void reenumerate();  // on the worker thread, from USBDEVFS_RESET
  void problem(std::string what);

  usb::VirtualStick& stick_;
  const int port_;
  UMockdevTestbed* testbed_ = nullptr;
  mutable std::mutex mutex_;
  std::vector<Node> nodes_;  // every identity the stick had; the last one is on the bus
  std::vector<std::string> problems_;
};

}  // namespace tinycoral::testing
