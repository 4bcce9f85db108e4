// `--device`: which Edge TPU runs the chip part of a model. auto = a real stick when one is plugged
// in, else the virtual stick (and it says which); usb / usb:N = a real stick (the first / the Nth
// of `tinycoral devices`); sim = the virtual stick backed by the virtual Edge TPU, over the same
// wire protocol; cpu = no Edge TPU (the host interpreter runs everything it can).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "chip/virtual_edge_tpu.h"
#include "runtime/edgetpu.h"

namespace tinycoral::chip {
class HostPort;
}

namespace tinycoral::runtime {

struct DeviceChoice {
  enum class Kind { kAuto, kUsb, kSim, kCpu };
  Kind kind = Kind::kAuto;
  int index = -1;  // usb:N
};
// Throws Error for anything but auto, usb, usb:N, sim, cpu.
DeviceChoice parse_device(const std::string& text);

struct DeviceOptions {
  std::string firmware;  // --firmware: path of apex_latest_single_ep.bin (else env / folders)
  EdgeTpuOptions tpu;
  // The virtual Edge TPU behind the virtual stick when sim (or auto without a stick) is chosen; the
  // caller keeps it for tracing and statistics. A new one when null.
  std::shared_ptr<chip::VirtualEdgeTpu> sim_chip;
};

// Opens the Edge TPU `choice` names; null for cpu. `note` (if given) says what auto picked.
std::unique_ptr<EdgeTpu> open_edgetpu(const DeviceChoice& choice, const DeviceOptions& options,
                                      std::string* note = nullptr);
// The virtual stick (in application mode) backed by `chip`, or by a new virtual Edge TPU when null.
std::unique_ptr<EdgeTpu> open_virtual_edgetpu(const EdgeTpuOptions& options = {},
                                              std::shared_ptr<chip::HostPort> chip = nullptr);

}  // namespace tinycoral::runtime
