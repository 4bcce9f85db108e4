// The whole-model tests' last check: Google's own check of its compiled model, run on ours.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "host/interpreter.h"
#include "support/google_expectations.h"

namespace tinycoral::compiler::testing {

// Google's row `google_row` of its expectations, run on our compiled file `tflite` through the
// interpreter with `tpu_options`: it passes, or the test is skipped with the reason it could not
// run (call it last: a skip ends the test).
inline void expect_googles_check_passes(const std::filesystem::path& data,
                                        const std::string& google_row,
                                        const std::vector<uint8_t>& tflite,
                                        const host::InterpreterOptions& tpu_options) {
  std::string why;
  const std::optional<host::CheckResult> result = host::run_expectation_on_ours(
      data, google_row, tflite, host::interpreter_device(tpu_options), why);
  if (!result) GTEST_SKIP() << why;
  std::cout << google_row << " on our file: " << result->detail << "\n";
  EXPECT_EQ(result->status, host::CheckStatus::kPass) << result->detail;
}

}  // namespace tinycoral::compiler::testing
