#include "common/file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "common/error.h"

namespace tinycoral {

std::vector<uint8_t> read_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail(path.string(), ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open: ", std::strerror(errno));
  in.seekg(0, std::ios::end);
  const auto size = in.tellg();
  if (size < 0) fail(path.string(), ": cannot determine the file size");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    fail(path.string(), ": read failed");
  return bytes;
}

void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail(path.string(), ": cannot create: ", std::strerror(errno));
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) fail(path.string(), ": write failed");
}

}  // namespace tinycoral
