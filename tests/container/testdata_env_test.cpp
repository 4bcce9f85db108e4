// The test data locator: TINYCORAL_TESTDATA naming a missing folder is an error the tests report
// (they fail with this message), while an unset variable only makes them skip.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "support/testdata.h"

namespace tinycoral::testing {
namespace {

// Sets TINYCORAL_TESTDATA for one scope and restores it afterwards.
class ScopedTestdataEnv {
 public:
  explicit ScopedTestdataEnv(const char* value) {
    if (const char* old = std::getenv("TINYCORAL_TESTDATA")) old_ = old;
    if (value)
      setenv("TINYCORAL_TESTDATA", value, 1);
    else
      unsetenv("TINYCORAL_TESTDATA");
  }
  ~ScopedTestdataEnv() {
    if (old_)
      setenv("TINYCORAL_TESTDATA", old_->c_str(), 1);
    else
      unsetenv("TINYCORAL_TESTDATA");
  }

 private:
  std::optional<std::string> old_;
};

TEST(TestdataLocator, AMissingFolderIsAnErrorNamingIt) {
  ScopedTestdataEnv env("/nonexistent/tinycoral-testdata");
  const std::string error = testdata_error();
  EXPECT_NE(error.find("TINYCORAL_TESTDATA=/nonexistent/tinycoral-testdata is not a folder"),
            std::string::npos)
      << error;
  EXPECT_FALSE(testdata_dir().has_value());
}

TEST(TestdataLocator, AnExistingFolderOrNoVariableIsNoError) {
  {
    ScopedTestdataEnv env("/");
    EXPECT_EQ(testdata_error(), "");
    EXPECT_EQ(testdata_dir(), std::filesystem::path("/"));
  }
  ScopedTestdataEnv env(nullptr);
  EXPECT_EQ(testdata_error(), "");
}

}  // namespace
}  // namespace tinycoral::testing
