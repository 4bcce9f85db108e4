// Whole-file reading and writing with errors that name the file. Reading is bounded: only regular
// files are read (a FIFO or a device would block or never end), and a file larger than `max_bytes`
// is refused before a byte of it is read (common/limits.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "common/limits.h"

namespace tinycoral {

std::vector<uint8_t> read_file(const std::filesystem::path& path,
                               uint64_t max_bytes = limits::kMaxModelFileBytes);
// Writes and closes the file; a failed write (a full disk) or close is an Error.
void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace tinycoral
