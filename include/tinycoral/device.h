// Devices that run models: a Coral USB Accelerator ("usb:N"), the virtual Edge TPU ("sim": a
// bit-exact simulator of the chip behind the stick's USB protocol) and the CPU alone ("cpu").
//
//   for (const tinycoral::DeviceInfo& d : tinycoral::list_devices()) std::cout << d.name << "\n";
//   tinycoral::Device tpu = tinycoral::Device::open("sim");
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tinycoral/export.h"

namespace tinycoral {

enum class DeviceKind { kUsb, kVirtual, kCpu };

struct DeviceInfo {
  DeviceKind kind = DeviceKind::kCpu;
  std::string name;         // what Device::open takes: "usb:0", "sim", "cpu"
  std::string description;  // e.g. "port 2-1.3, ready", "virtual Edge TPU"
};

// Every Coral USB Accelerator on the bus (in bus/port order), then "sim" and "cpu", which are
// always there. A machine without usable USB lists just those two.
TINYCORAL_API std::vector<DeviceInfo> list_devices();

struct DeviceOptions {
  // Path of the stick's firmware (apex_latest_single_ep.bin), needed when a stick is still in
  // bootloader mode; empty: $TINYCORAL_FIRMWARE, then the standard folders (docs/driver.md).
  std::string firmware;
};

// An open device. Copies share it; it closes when the last copy (and the last Interpreter using
// it) is gone. A real stick is locked for this process while open. Not thread-safe: use one
// device from one thread at a time.
class TINYCORAL_API Device {
 public:
  // `name`: "auto" (the first stick if one is plugged in, else the virtual Edge TPU), "usb" (the
  // first stick), "usb:N", "sim" or "cpu". Throws Error for another name or a stick that cannot be
  // opened.
  static Device open(const std::string& name = "auto", const DeviceOptions& options = {});

  // What was opened: "usb:N", "sim" or "cpu" (never "auto").
  const std::string& name() const;
  std::string description() const;
  // Whether it has an Edge TPU (usb or sim): then the Edge TPU part of compiled models runs on it.
  bool has_edgetpu() const;

  struct Impl;  // internal
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  explicit Device(std::shared_ptr<Impl> impl);
  std::shared_ptr<Impl> impl_;
};

}  // namespace tinycoral
