// Locating Google's test data (never committed): $TINYCORAL_TESTDATA, else ../shared/testdata
// beside the checkout. Tests that need it call TINYCORAL_REQUIRE_TESTDATA() and skip with a hint
// when absent; a TINYCORAL_TESTDATA naming a folder that does not exist is a mistake, so those
// tests fail saying so instead of skipping.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>

namespace tinycoral::testing {

std::optional<std::filesystem::path> testdata_dir();
std::string testdata_hint();
// "" unless TINYCORAL_TESTDATA is set to something that is not a folder; then the one-line error.
std::string testdata_error();
std::filesystem::path source_dir();  // the checkout's root
std::filesystem::path cli_path();    // the built `tinycoral` executable

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};
// Runs the CLI with `args` (shell-quoted by the caller where needed), capturing both streams.
CommandResult run_cli(const std::string& args);
// Runs a shell command line the same way.
CommandResult run_shell(const std::string& command_line);
std::filesystem::path cli_path();  // the built tinycoral executable

}  // namespace tinycoral::testing

#define TINYCORAL_REQUIRE_TESTDATA(var)                                       \
  if (const std::string var##_error = ::tinycoral::testing::testdata_error(); \
      !var##_error.empty())                                                   \
    GTEST_FAIL() << var##_error;                                              \
  auto var##_opt = ::tinycoral::testing::testdata_dir();                      \
  if (!var##_opt) GTEST_SKIP() << ::tinycoral::testing::testdata_hint();      \
  const std::filesystem::path var = *var##_opt
