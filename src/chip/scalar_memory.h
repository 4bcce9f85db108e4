// The scalar core's own memory (isa.md 2.11): its size, which the virtual Edge TPU enforces on the
// scalar core's loads and stores and the compiler's scalar-core routines lay their words out in.
#pragma once

#include <cstdint>

namespace tinycoral::chip {

constexpr uint32_t kScalarMemoryBytes = 16384;

}  // namespace tinycoral::chip
