#include "support/testdata.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace tinycoral::testing {

std::filesystem::path source_dir() { return TINYCORAL_SOURCE_DIR; }
std::filesystem::path cli_path() { return TINYCORAL_CLI; }

std::optional<std::filesystem::path> testdata_dir() {
  if (const char* env = std::getenv("TINYCORAL_TESTDATA"); env && *env) {
    if (std::filesystem::is_directory(env)) return std::filesystem::path(env);
    return std::nullopt;
  }
  const auto beside = source_dir().parent_path() / "shared" / "testdata";
  if (std::filesystem::is_directory(beside)) return beside;
  return std::nullopt;
}

std::string testdata_error() {
  const char* env = std::getenv("TINYCORAL_TESTDATA");
  if (env == nullptr || *env == '\0' || std::filesystem::is_directory(env)) return "";
  return std::string("TINYCORAL_TESTDATA=") + env +
         " is not a folder: point it at the test data (scripts/download_testdata.sh) or unset it";
}

std::string testdata_hint() {
  return "Google's test data is not here: set TINYCORAL_TESTDATA to a folder made by "
         "scripts/download_testdata.sh, or place it at ../shared/testdata beside the checkout";
}

static std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

CommandResult run_cli(const std::string& args) {
  return run_shell("'" + cli_path().string() + "' " + args);
}

CommandResult run_shell(const std::string& command_line) {
  char out_name[] = "/tmp/tinycoral_cli_out_XXXXXX";
  char err_name[] = "/tmp/tinycoral_cli_err_XXXXXX";
  const int out_fd = mkstemp(out_name);
  const int err_fd = mkstemp(err_name);
  close(out_fd);
  close(err_fd);
  const std::string command = command_line + " >" + out_name + " 2>" + err_name + " </dev/null";
  const int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = slurp(out_name);
  result.err = slurp(err_name);
  std::remove(out_name);
  std::remove(err_name);
  return result;
}

}  // namespace tinycoral::testing
