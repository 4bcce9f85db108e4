// Device selection and the two ways to build an EdgeTpu: a locked real stick, or the virtual stick.
#include "runtime/device_select.h"

#include <charconv>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "runtime/timed_host_port.h"
#include "usb/libusb_transport.h"
#include "usb/virtual_stick.h"
#include "usb/virtual_transport.h"

namespace tinycoral::runtime {

DeviceChoice parse_device(const std::string& text) {
  DeviceChoice c;
  if (text == "auto") return c;
  if (text == "sim") return {DeviceChoice::Kind::kSim, -1};
  if (text == "cpu") return {DeviceChoice::Kind::kCpu, -1};
  if (text == "usb") return {DeviceChoice::Kind::kUsb, -1};
  if (text.rfind("usb:", 0) == 0) {
    int n = -1;
    const char* first = text.data() + 4;
    const char* last = text.data() + text.size();
    const auto [end, ec] = std::from_chars(first, last, n);
    if (ec == std::errc() && end == last && n >= 0 && first != last)
      return {DeviceChoice::Kind::kUsb, n};
  }
  fail("unknown device '", text, "' (auto, usb, usb:N, sim or cpu)");
}

namespace {

// What the virtual stick needs alive as long as its transport: the chip and the stick.
struct VirtualBackend {
  std::shared_ptr<chip::HostPort> chip;
  std::unique_ptr<TimedHostPort> timed;
  std::unique_ptr<usb::VirtualStick> stick;
};

// The stick `index` names (-1: the first) among `sticks`, scanned once by the caller.
const usb::UsbStickInfo& pick_stick(const std::vector<usb::UsbStickInfo>& sticks, int index) {
  if (sticks.empty())
    fail(
        "no Coral USB Accelerator found (looked for 1a6e:089a and 18d1:9302); check the cable "
        "and `lsusb`, or use --device sim");
  const size_t pick = index < 0 ? 0 : static_cast<size_t>(index);
  if (pick >= sticks.size())
    fail("usb:", index, " does not exist: ", sticks.size(),
         " stick(s) found (see `tinycoral devices`)");
  return sticks[pick];
}

// Locks the stick, then opens that very stick (not whatever is at its index by then).
std::unique_ptr<EdgeTpu> open_usb(const usb::UsbStickInfo& stick, const DeviceOptions& options) {
  // Lock before touching the stick: two drivers on the same endpoints hang it.
  auto lock = std::make_unique<DeviceLock>("usb-" + stick.port_path);
  usb::UsbOpenOptions open_options;
  open_options.firmware = options.firmware;
  auto transport = usb::LibusbTransport::open(stick, open_options);
  return std::make_unique<EdgeTpu>(std::move(transport), nullptr, std::move(lock), options.tpu);
}

}  // namespace

std::unique_ptr<EdgeTpu> open_virtual_edgetpu(const EdgeTpuOptions& options,
                                              std::shared_ptr<chip::HostPort> chip) {
  auto backend = std::make_shared<VirtualBackend>();
  backend->chip = chip ? std::move(chip) : std::make_shared<chip::VirtualEdgeTpu>();
  backend->timed = std::make_unique<TimedHostPort>(*backend->chip);
  backend->stick =
      std::make_unique<usb::VirtualStick>(*backend->timed, usb::VirtualStick::Mode::kApplication);
  auto transport = std::make_unique<usb::VirtualTransport>(*backend->stick);
  const TimedHostPort* timer = backend->timed.get();
  EdgeTpuOptions sim_options = options;
  sim_options.simulated = true;
  auto tpu = std::make_unique<EdgeTpu>(std::move(transport), backend, nullptr, sim_options);
  tpu->set_chip_timer(timer);
  if (auto* sim = dynamic_cast<const chip::VirtualEdgeTpu*>(backend->chip.get()))
    tpu->set_clock_source([sim] { return sim->stats().clock; });
  const usb::VirtualStick* stick = backend->stick.get();
  tpu->set_diagnosis([stick] {
    const std::string fault = stick->chip_fault();
    return fault.empty() ? std::string() : "virtual Edge TPU: " + fault;
  });
  return tpu;
}

std::unique_ptr<EdgeTpu> open_edgetpu(const DeviceChoice& choice, const DeviceOptions& options,
                                      std::string* note) {
  switch (choice.kind) {
    case DeviceChoice::Kind::kCpu:
      return nullptr;
    case DeviceChoice::Kind::kSim:
      return open_virtual_edgetpu(options.tpu, options.sim_chip);
    case DeviceChoice::Kind::kUsb: {
      const std::vector<usb::UsbStickInfo> sticks = usb::list_usb_sticks();
      return open_usb(pick_stick(sticks, choice.index), options);
    }
    case DeviceChoice::Kind::kAuto: {
      std::vector<usb::UsbStickInfo> sticks;
      try {
        sticks = usb::list_usb_sticks();
      } catch (const Error&) {
        // No usable libusb (e.g. no /dev/bus/usb in a container): no real stick then.
      }
      if (!sticks.empty()) {
        if (note) *note = "auto: using the Coral USB Accelerator at " + sticks[0].port_path;
        return open_usb(sticks[0], options);
      }
      if (note) *note = "auto: no Coral USB Accelerator found, using the virtual stick (sim)";
      return open_virtual_edgetpu(options.tpu, options.sim_chip);
    }
  }
  return nullptr;
}

}  // namespace tinycoral::runtime
