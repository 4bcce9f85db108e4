// Reads a libFuzzer input as a stream of choices (structure-aware fuzzing): each take() consumes
// bytes and yields 0 when they run out, so every input, however short, builds something.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace tinycoral::fuzz {

class FuzzInput {
 public:
  explicit FuzzInput(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  uint8_t byte() { return at_ < bytes_.size() ? bytes_[at_++] : 0; }
  uint32_t u32() {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{byte()} << (8 * i);
    return v;
  }
  // A value in [lo, hi].
  int32_t range(int32_t lo, int32_t hi) {
    return lo + static_cast<int32_t>(u32() % static_cast<uint32_t>(hi - lo + 1));
  }
  // Mostly small values, sometimes any 32-bit value (the edges where arithmetic overflows).
  int32_t wild(int32_t lo, int32_t hi) {
    return byte() < 240 ? range(lo, hi) : static_cast<int32_t>(u32());
  }
  std::span<const uint8_t> rest() { return bytes_.subspan(at_); }

 private:
  std::span<const uint8_t> bytes_;
  size_t at_ = 0;
};

}  // namespace tinycoral::fuzz
