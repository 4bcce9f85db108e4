#include "device_access.h"

#include "common/error.h"
#include "usb/libusb_transport.h"

namespace tinycoral::serve {

DeviceAccess system_devices() {
  return {.stick_present =
              [] {
                try {
                  return !usb::list_usb_sticks().empty();
                } catch (const Error&) {
                  return false;  // no usable libusb (a container without /dev/bus/usb)
                }
              },
          .open =
              [](const runtime::DeviceChoice& choice, const runtime::DeviceOptions& options) {
                return runtime::open_edgetpu(choice, options);
              }};
}

}  // namespace tinycoral::serve
