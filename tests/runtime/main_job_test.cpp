// The README's main job (scripts/demo.sh) on the built CLI: with Google's test data it classifies
// cat.bmp and bird.bmp with the compiled MobileNet on --device auto, which is the virtual Edge TPU
// here, and compiles dense_256 with `tinycoral compile` and runs it next to Google's program (the
// same output, `compare` says identical); without test data it assembles and disassembles the
// example program. It then writes a story with `generate` (a random llama2.c checkpoint unless
// TINYCORAL_CHECKPOINT names one).
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

using tinycoral::testing::run_shell;

std::string demo_command(const std::string& testdata) {
  return "cd '" + testing::source_dir().string() + "' && TINYCORAL_TESTDATA='" + testdata +
         "' TINYCORAL_CHECKPOINT= TINYCORAL_CLI='" + testing::cli_path().string() +
         "' bash scripts/demo.sh";
}

TEST(MainJob, ClassifiesCatAndBirdOnTheBestAvailableDevice) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto r = run_shell(demo_command(data.string()));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // Every bitstream found round-trips, however many the test data holds.
  static const std::regex kCheck(R"((\d+) bitstreams, (\d+) byte-identical)");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, kCheck)) << r.out;
  EXPECT_GT(std::stoi(m[1]), 0) << r.out;
  EXPECT_EQ(m[1], m[2]) << r.out;
  EXPECT_NE(r.out.find("283 0.257812 tiger cat"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("20 0.441406 chickadee"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("could not run it"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Model compiled successfully"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ours and Google's agree: 256 output bytes identical"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("instructions identical, parameters identical\nidentical\n"),
            std::string::npos)
      << r.out;
  // Without TINYCORAL_CHECKPOINT: a story from a random llama2.c checkpoint, said to be one.
  EXPECT_NE(r.out.find("this is a random checkpoint"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\nOnce upon a time"), std::string::npos) << r.out;
}

TEST(MainJob, WithoutTestDataAssemblesTheExample) {
  const auto r = run_shell(demo_command("/nonexistent-tinycoral-testdata"));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("no test data"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 bitstreams, 1 byte-identical"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tinycoral::runtime
