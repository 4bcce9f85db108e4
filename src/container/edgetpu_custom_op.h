// The options of the "edgetpu-custom-op" TFLite custom operator: a FlexBuffers map whose key "4"
// (and the entries of key "7") hold DWN1 packages (driver.md 5.1, docs/container.md).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "container/executable.h"

namespace tinycoral::container {

inline constexpr std::string_view kEdgeTpuCustomCode = "edgetpu-custom-op";

// Parses the FlexBuffers options and every package in them. Throws Error for a malformed map, a
// missing key "4", a key "6" whose length disagrees with the package count, or a bad package.
// Non-fatal findings (e.g. a package's old min_runtime_version) are appended to `warnings` if
// given.
EdgeTpuCustomOp read_edgetpu_custom_op(std::span<const uint8_t> flexbuffer,
                                       std::vector<std::string>* warnings = nullptr);
// Serializes options and packages back into a FlexBuffers map (keys 1, 2 if set, 4, 5, and 6/7 when
// there is more than one package or chip ids are set).
std::vector<uint8_t> write_edgetpu_custom_op(const EdgeTpuCustomOp& op);

}  // namespace tinycoral::container
