// The `tinycoral` command itself: an unknown command is named and exits 2 (also with --help after
// it), --version prints one line.
#include <gtest/gtest.h>

#include "support/testdata.h"

namespace tinycoral {
namespace {

using testing::run_cli;

TEST(CliMain, UnknownCommandSaysSoAndExits2) {
  for (const char* args : {"nosuch", "nosuch --help", "nosuch model.tflite"}) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_EQ(r.err,
              "tinycoral: error: unknown command 'nosuch' (see tinycoral --help for the "
              "commands)\n")
        << args;
    EXPECT_EQ(r.out, "") << args;
  }
}

TEST(CliMain, VersionIsOneLine) {
  const auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, "tinycoral 0.1.0\n");
}

TEST(CliMain, KnownCommandsStillParse) {
  const auto r = run_cli("devices --help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("devices"), std::string::npos);
}

}  // namespace
}  // namespace tinycoral
