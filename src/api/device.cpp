// The public Device (include/tinycoral/device.h) over runtime::open_edgetpu.
#include <cstdio>

#include "api/device_impl.h"
#include "common/error.h"
#include "runtime/device_select.h"
#include "usb/libusb_transport.h"

namespace tinycoral {

Device::Device(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::vector<DeviceInfo> list_devices() {
  std::vector<DeviceInfo> out;
  try {
    for (const usb::UsbStickInfo& s : usb::list_usb_sticks())
      out.push_back(
          {DeviceKind::kUsb, cat("usb:", s.index), cat("port ", s.port_path, ", ", s.state())});
  } catch (const Error&) {
    // No usable libusb (e.g. no /dev/bus/usb in a container): no sticks then.
  }
  out.push_back({DeviceKind::kVirtual, "sim",
                 "virtual Edge TPU (simulated chip behind the stick's protocol)"});
  out.push_back({DeviceKind::kCpu, "cpu", "the CPU alone (reference interpreter)"});
  return out;
}

Device Device::open(const std::string& name, const DeviceOptions& options) {
  const runtime::DeviceChoice choice = runtime::parse_device(name);
  runtime::DeviceOptions device_options;
  device_options.firmware = options.firmware;
  auto impl = std::make_shared<Impl>();
  impl->tpu = runtime::open_edgetpu(choice, device_options);
  if (!impl->tpu) {
    impl->name = "cpu";
  } else if (impl->tpu->is_virtual()) {
    impl->name = "sim";
  } else {
    const auto* stick = dynamic_cast<const usb::LibusbTransport*>(&impl->tpu->transport());
    impl->name = stick ? cat("usb:", stick->info().index) : "usb";
  }
  return Device(std::move(impl));
}

const std::string& Device::name() const { return impl_->name; }

std::string Device::description() const { return impl_->tpu ? impl_->tpu->description() : "cpu"; }

bool Device::has_edgetpu() const { return impl_->tpu != nullptr; }

}  // namespace tinycoral
