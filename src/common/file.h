// Whole-file reading and writing with errors that name the file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

namespace tinycoral {

std::vector<uint8_t> read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, std::span<const uint8_t> bytes);

}  // namespace tinycoral
