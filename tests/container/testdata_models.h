// The TFLite files of Google's test data that the container tests walk (sorted, so failures are
// reproducible). Header-only helper for tests/container.
#pragma once

#include <algorithm>
#include <filesystem>
#include <vector>

namespace tinycoral::testing {

inline std::vector<std::filesystem::path> tflite_files(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> out;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(root))
    if (entry.is_regular_file() && entry.path().extension() == ".tflite")
      out.push_back(entry.path());
  std::sort(out.begin(), out.end());
  return out;
}

inline bool is_edgetpu_file(const std::filesystem::path& p) {
  return p.filename().string().find("_edgetpu.tflite") != std::string::npos;
}

}  // namespace tinycoral::testing
