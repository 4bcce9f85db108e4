// DFU 1.1 firmware upload to a stick in bootloader mode (1a6e:089a), as docs/driver.md "DFU upload"
// describes: find the DFU interface and block size in the configuration descriptor, download in
// blocks with a status check after each, end with a zero-length block, read the image back to
// verify. The caller then resets the port so the stick re-appears as 18d1:9302.
#pragma once

#include <cstdint>
#include <span>

#include "usb/transport.h"

namespace tinycoral::usb {

struct DfuInfo {
  uint8_t interface = 0;
  uint16_t transfer_size = 256;
  bool can_upload = true;
};

// Reads the configuration descriptor and finds the DFU interface (class 0xFE, subclass 1) and its
// functional descriptor. Throws Error when the device has none.
DfuInfo read_dfu_info(Transport& transport, Millis timeout);

// Downloads `firmware` and verifies it. Throws Error naming the block and the DFU status on
// failure.
void dfu_download(Transport& transport, std::span<const uint8_t> firmware, Millis timeout);

}  // namespace tinycoral::usb
