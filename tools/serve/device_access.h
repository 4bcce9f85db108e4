// How the web app reaches Edge TPUs. By default through the runtime's device selection (a real
// stick over libusb, or the virtual stick); a test gives its own, to pull a stick out in the middle
// of a request and plug it in again (tests/serve/pulled_stick_test.cpp).
#pragma once

#include <functional>
#include <memory>

#include "runtime/device_select.h"
#include "runtime/edgetpu.h"

namespace tinycoral::serve {

struct DeviceAccess {
  // Whether a real stick is plugged in: `auto` writes stories on it then, else on the CPU (the
  // rule of `tinycoral generate`).
  std::function<bool()> stick_present;
  // Opens what `choice` names, as runtime::open_edgetpu (null for cpu).
  std::function<std::unique_ptr<runtime::EdgeTpu>(const runtime::DeviceChoice&,
                                                  const runtime::DeviceOptions&)>
      open;
};

// The runtime's: libusb's scan and runtime::open_edgetpu.
DeviceAccess system_devices();

// The device a session on `tpu` is: "cpu" (null), "sim" (the virtual stick) or "usb".
inline const char* device_name(const runtime::EdgeTpu* tpu) {
  return !tpu ? "cpu" : tpu->is_virtual() ? "sim" : "usb";
}

}  // namespace tinycoral::serve
