// What a tinycoral::Device holds: its name and, unless it is the CPU, the open Edge TPU that
// interpreters on it delegate their Edge TPU part to.
#pragma once

#include <memory>
#include <string>

#include "runtime/edgetpu.h"
#include "tinycoral/device.h"

namespace tinycoral {

struct Device::Impl {
  std::string name;                       // "usb:N", "sim" or "cpu"
  std::shared_ptr<runtime::EdgeTpu> tpu;  // null for the CPU
};

}  // namespace tinycoral
