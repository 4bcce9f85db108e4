// flock-based stick lock with the holder's pid inside.
#include "runtime/device_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/error.h"

namespace tinycoral::runtime {
namespace fs = std::filesystem;

fs::path lock_folder() {
  if (const char* env = std::getenv("TINYCORAL_LOCK_DIR"); env && *env) return env;
  if (access("/run/lock", W_OK) == 0) return "/run/lock";
  return fs::temp_directory_path();
}

DeviceLock::DeviceLock(const std::string& name, const fs::path& folder) {
  path_ = (folder.empty() ? lock_folder() : folder) / ("tinycoral-" + name + ".lock");
  // O_NOFOLLOW and the checks below: a symlink or hard link planted at the lock path (the folder
  // may be shared, e.g. /tmp) must not make us truncate the file it points to.
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0666);
  if (fd_ < 0 && errno == ELOOP)
    fail("the lock file ", path_.string(), " is a symbolic link; remove it");
  if (fd_ < 0) fail("cannot create the lock file ", path_.string(), ": ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
    ::close(fd_);
    fd_ = -1;
    fail("the lock file ", path_.string(),
         " is not a plain file of its own (a device, FIFO or hard link); remove it");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    char pid[32] = {};
    const ssize_t n = ::pread(fd_, pid, sizeof pid - 1, 0);
    ::close(fd_);
    fd_ = -1;
    std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    // Anyone may write the file: print only its digits (no terminal escapes reach the user).
    if (holder.find_first_not_of("0123456789") != std::string::npos) holder.clear();
    fail("the stick ", name, " is in use by process ", holder.empty() ? "?" : holder,
         " (lock file ", path_.string(), "); only one process may drive a stick at a time");
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) < 0) {
    // The lock itself holds; only the pid note failed.
  }
}

DeviceLock::~DeviceLock() {
  if (fd_ >= 0) {
    if (::ftruncate(fd_, 0) != 0) {
    }
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
}

}  // namespace tinycoral::runtime
