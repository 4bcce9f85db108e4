// Where the stick's firmware (apex_latest_single_ep.bin, Google's, never shipped by tinycoral) is
// looked for: an explicit path, then $TINYCORAL_FIRMWARE (a file or a folder), then the standard
// install folders. See docs/driver.md "Firmware".
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace tinycoral::usb {

// The folders searched after the option and the environment variable, in order.
std::vector<std::filesystem::path> standard_firmware_folders();

// Returns the firmware file's path; throws Error naming the file, every place looked at, and where
// the file comes from (google-coral/libedgetpu) when none has it.
std::filesystem::path find_firmware(const std::string& option);

std::vector<uint8_t> load_firmware(const std::string& option);

}  // namespace tinycoral::usb
