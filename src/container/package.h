// DWN1 packages: Package -> MultiExecutable -> Executable, each a flatbuffer nested in a byte
// vector of the one around it (driver.md 5.1-5.5, docs/container.md). Every nested buffer is
// verified before it is read.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "container/executable.h"

namespace tinycoral::container {

// The newest runtime version we (and libedgetpu) accept in a package; newer fails (driver.md 5.1).
inline constexpr int32_t kMaxRuntimeVersion = 14;

// Throws Error for a bad identifier, a failed verification, min_runtime_version > 14, a multi-chip
// package (virtual_chip_id -1), an empty multi executable or an executable with batch_size < 1.
// Non-fatal findings (min_runtime_version <= 9) are appended to `warnings` if given.
Package read_package(std::span<const uint8_t> bytes, std::vector<std::string>* warnings = nullptr);
std::vector<uint8_t> write_package(const Package& package);

// One Executable flatbuffer (no file identifier), as held in
// MultiExecutable.serialized_executables.
Executable read_executable(std::span<const uint8_t> bytes);
std::vector<uint8_t> write_executable(const Executable& executable);

}  // namespace tinycoral::container
