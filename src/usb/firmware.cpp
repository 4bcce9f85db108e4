// Firmware lookup: option, environment, standard folders; an error that says what to get and where.
#include "usb/firmware.h"

#include <cstdlib>

#include "common/error.h"
#include "common/file.h"
#include "usb/protocol.h"

namespace tinycoral::usb {
namespace fs = std::filesystem;

std::vector<fs::path> standard_firmware_folders() {
  std::vector<fs::path> folders;
  if (const char* home = std::getenv("HOME"))
    folders.push_back(fs::path(home) / ".local/share/tinycoral");
  folders.push_back("/usr/local/share/tinycoral");
  folders.push_back("/usr/share/tinycoral");
  return folders;
}

fs::path find_firmware(const std::string& option) {
  std::vector<fs::path> candidates;
  auto add = [&](const fs::path& p) {
    std::error_code ec;
    candidates.push_back(fs::is_directory(p, ec) ? p / kFirmwareName : p);
  };
  if (!option.empty()) add(option);
  if (const char* env = std::getenv("TINYCORAL_FIRMWARE"); env && *env) add(env);
  for (const fs::path& folder : standard_firmware_folders())
    candidates.push_back(folder / kFirmwareName);
  std::string looked;
  for (const fs::path& p : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  fail("the stick is in bootloader mode and needs the firmware file ", kFirmwareName,
       ", which was not found (looked at: ", looked,
       "). It is Google's and comes from google-coral/libedgetpu (driver/usb/", kFirmwareName,
       "); tinycoral does not ship it. Put it in one of those places, set TINYCORAL_FIRMWARE, or "
       "pass --firmware (see docs/driver.md)");
}

std::vector<uint8_t> load_firmware(const std::string& option) {
  return read_file(find_firmware(option));
}

}  // namespace tinycoral::usb
