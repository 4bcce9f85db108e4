// The DFU download loop (docs/driver.md "DFU upload"). Every step is bounded: one control transfer
// per block with a timeout, and the verification read stops at the image size.
#include "usb/dfu.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/error.h"
#include "usb/protocol.h"

namespace tinycoral::usb {
namespace {

struct DfuStatus {
  uint8_t status = 0;
  uint8_t state = 0;
};

DfuStatus get_status(Transport& transport, uint8_t interface, Millis timeout) {
  std::array<uint8_t, 6> reply{};
  const size_t got =
      transport.control_in(Setup{kDfuIn, kDfuGetStatus, 0, interface}, reply, timeout);
  if (got != reply.size()) fail("DFU GETSTATUS returned ", got, " bytes, expected 6");
  return DfuStatus{reply[0], reply[4]};
}

}  // namespace

DfuInfo read_dfu_info(Transport& transport, Millis timeout) {
  std::vector<uint8_t> config(512);
  const size_t got = transport.control_in(
      Setup{kStdIn, kGetDescriptor, static_cast<uint16_t>(kDescConfig << 8), 0}, config, timeout);
  config.resize(got);
  // Walk the descriptors: an interface with class 0xFE/subclass 1, then its 0x21 functional one.
  bool in_dfu_interface = false;
  bool found = false;
  DfuInfo info;
  for (size_t at = 0; at + 2 <= config.size();) {
    const uint8_t length = config[at];
    const uint8_t type = config[at + 1];
    if (length < 2 || at + length > config.size()) break;
    if (type == 4 && length >= 9) {
      in_dfu_interface = config[at + 4] == 0 && config[at + 5] == 0xFE && config[at + 6] == 0x01;
      if (in_dfu_interface && !found) {
        info.interface = config[at + 2];
        found = true;
      }
    } else if (type == 0x21 && length >= 7 && in_dfu_interface) {
      info.can_upload = (config[at + 2] & 0x2) != 0;
      info.transfer_size = static_cast<uint16_t>(config[at + 5] | (config[at + 6] << 8));
    }
    at += length;
  }
  if (!found) fail("the bootloader's configuration descriptor has no DFU interface");
  if (info.transfer_size == 0 || info.transfer_size > 4096)
    fail("the bootloader reports a DFU block size of ", info.transfer_size, " bytes");
  return info;
}

void dfu_download(Transport& transport, std::span<const uint8_t> firmware, Millis timeout) {
  if (firmware.empty()) fail("the DFU firmware image is empty");
  const DfuInfo info = read_dfu_info(transport, timeout);
  const size_t block_size = info.transfer_size;
  uint16_t block = 0;
  for (size_t at = 0; at < firmware.size(); at += block_size, ++block) {
    const size_t n = std::min(block_size, firmware.size() - at);
    transport.control_out(Setup{kDfuOut, kDfuDnload, block, info.interface},
                          firmware.subspan(at, n), timeout);
    const DfuStatus status = get_status(transport, info.interface, timeout);
    if (status.status != 0 || status.state != kDfuDnloadIdle)
      fail("DFU download failed at block ", block, " (byte ", at, "): status ", int(status.status),
           ", state ", int(status.state), "; unplug and replug the stick and try again");
  }
  // The zero-length block ends the download; this bootloader goes straight back to dfuIDLE.
  transport.control_out(Setup{kDfuOut, kDfuDnload, block, info.interface}, {}, timeout);
  const DfuStatus final_status = get_status(transport, info.interface, timeout);
  if (final_status.status != 0 || final_status.state != kDfuIdle)
    fail("DFU download was not accepted: status ", int(final_status.status), ", state ",
         int(final_status.state), "; unplug and replug the stick and try again");

  if (!info.can_upload) return;
  // Verify: the read-back may be longer than the image, so only its prefix is compared.
  std::vector<uint8_t> readback;
  std::vector<uint8_t> chunk(block_size);
  const size_t max_blocks = firmware.size() / block_size + 2;
  for (uint16_t b = 0; readback.size() < firmware.size() && b < max_blocks; ++b) {
    const size_t got =
        transport.control_in(Setup{kDfuIn, kDfuUpload, b, info.interface}, chunk, timeout);
    readback.insert(readback.end(), chunk.begin(), chunk.begin() + static_cast<long>(got));
    if (got < block_size) break;
  }
  if (readback.size() < firmware.size() ||
      !std::equal(firmware.begin(), firmware.end(), readback.begin()))
    fail("DFU verification failed: the stick read back ", readback.size(),
         " bytes that differ from the ", firmware.size(), "-byte image");
}

}  // namespace tinycoral::usb
