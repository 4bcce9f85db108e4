#include "common/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace tinycoral {

namespace {
// Closes the descriptor when the read ends, however it ends.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};
}  // namespace

std::vector<uint8_t> read_file(const std::filesystem::path& path, uint64_t max_bytes) {
  // O_NONBLOCK: opening a FIFO with no writer must not wait for one (it is refused below).
  Fd f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)};
  if (f.fd < 0) fail(path.string(), ": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) fail(path.string(), ": cannot stat: ", std::strerror(errno));
  if (S_ISDIR(st.st_mode)) fail(path.string(), ": is a directory, not a file");
  if (!S_ISREG(st.st_mode))
    fail(path.string(), ": not a regular file (a FIFO, socket or device cannot be read)");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    fail(path.string(), ": ", size, " bytes, more than the limit of ", max_bytes,
         " bytes for this kind of file");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::read(f.fd, bytes.data() + at, bytes.size() - at);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail(path.string(), ": read failed: ", std::strerror(errno));
    if (n == 0) fail(path.string(), ": shrank while being read");
    at += static_cast<size_t>(n);
  }
  return bytes;
}

void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  std::FILE* out = std::fopen(path.c_str(), "wb");
  if (!out) fail(path.string(), ": cannot create: ", std::strerror(errno));
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), out);
  const int write_errno = errno;
  const bool flushed = std::fflush(out) == 0;
  const int flush_errno = errno;
  const bool closed = std::fclose(out) == 0;
  if (written != bytes.size()) fail(path.string(), ": write failed: ", std::strerror(write_errno));
  if (!flushed || !closed)
    fail(path.string(), ": write failed: ", std::strerror(flushed ? errno : flush_errno));
}

}  // namespace tinycoral
