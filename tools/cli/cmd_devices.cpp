// PLACEHOLDER until its owner lands the real command.
#include "commands.h"
#include "common/error.h"

namespace tinycoral::cli {
void add_devices_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("devices", "(not built yet)");
  cmd->allow_extras();
  cmd->callback([] { fail("'devices' is not built yet"); });
}
}  // namespace tinycoral::cli
