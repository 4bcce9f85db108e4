// PLACEHOLDER until its owner lands the real command.
#include "commands.h"
#include "common/error.h"

namespace tinycoral::cli {
void add_asm_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("asm", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'asm' is not built yet"); });
}
}  // namespace tinycoral::cli
