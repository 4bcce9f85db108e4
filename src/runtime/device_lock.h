// One process per stick (docs/driver.md "One process per stick"): two drivers on the same
// endpoints hang the device, so opening a stick first takes an exclusive lock file that names the
// holder's pid. A second process gets an Error naming that pid instead of a wedged stick.
#pragma once

#include <filesystem>
#include <string>

namespace tinycoral::runtime {

class DeviceLock {
 public:
  // Locks `name` (e.g. "usb-2-1.3") in lock_folder() (or `folder` when given). Throws Error naming
  // the process that holds it.
  explicit DeviceLock(const std::string& name, const std::filesystem::path& folder = {});
  ~DeviceLock();
  DeviceLock(const DeviceLock&) = delete;
  DeviceLock& operator=(const DeviceLock&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
};

// $TINYCORAL_LOCK_DIR, else /run/lock if writable, else the system temp folder.
std::filesystem::path lock_folder();

}  // namespace tinycoral::runtime
