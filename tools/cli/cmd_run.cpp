// PLACEHOLDER until its owner lands the real command.
#include "commands.h"
#include "common/error.h"

namespace tinycoral::cli {
void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'run' is not built yet"); });
}
}  // namespace tinycoral::cli
