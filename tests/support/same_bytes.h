// The tests' and benches' byte-for-byte comparison of the chip's (or the runtime's) output with
// the CPU reference's. Tests: EXPECT_TRUE(same_bytes(got, want)) << "inference " << i; on a
// difference it says how many bytes differ, so that one wrong byte and a wrong layout read
// differently. Benches count them with differing_bytes.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>

namespace tinycoral::compiler::testing {

// The bytes of `want` that `got` does not hold (all of them when the sizes differ).
inline size_t differing_bytes(std::span<const uint8_t> got, std::span<const uint8_t> want) {
  if (got.size() != want.size()) return want.size();
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
  return differ;
}

inline ::testing::AssertionResult same_bytes(std::span<const uint8_t> got,
                                             std::span<const uint8_t> want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << got.size() << " bytes, the reference has " << want.size();
  const size_t differ = differing_bytes(got, want);
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differ << " of " << want.size() << " bytes differ";
}

}  // namespace tinycoral::compiler::testing
