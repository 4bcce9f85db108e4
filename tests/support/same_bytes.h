// The tests' byte-for-byte comparison of the chip's (or the runtime's) output with the CPU
// reference's: EXPECT_TRUE(same_bytes(got, want)) << "inference " << i; on a difference it says
// how many bytes differ, so that one wrong byte and a wrong layout read differently.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <span>

namespace tinycoral::compiler::testing {

inline ::testing::AssertionResult same_bytes(std::span<const uint8_t> got,
                                             std::span<const uint8_t> want) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure()
           << got.size() << " bytes, the reference has " << want.size();
  size_t differ = 0;
  for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
  if (differ == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << differ << " of " << want.size() << " bytes differ";
}

}  // namespace tinycoral::compiler::testing
