// Subcommands of `tinycoral`. Each lives in its own cmd_<name>.cpp and registers itself on the app;
// its callback throws tinycoral::Error for anything the user got wrong (main prints it, exit code
// 2).
#pragma once

#include <CLI/CLI.hpp>

namespace tinycoral::cli {

// Set by a subcommand whose outcome is a verdict rather than an error (e.g. `disasm --check` found
// a mismatch): main returns it.
inline int exit_code = 0;

void add_inspect_command(CLI::App& app);
void add_disasm_command(CLI::App& app);
void add_asm_command(CLI::App& app);
void add_run_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_compile_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_generate_command(CLI::App& app);
void add_serve_command(CLI::App& app);

}  // namespace tinycoral::cli
