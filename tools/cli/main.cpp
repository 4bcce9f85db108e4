// tinycoral: the command line. Every subcommand reports a user's mistake as one line on stderr and
// exit code 2; a crash or a hang is a bug.
#include <iostream>
#include <string>

#include "commands.h"
#include "common/error.h"
#include "tinycoral/version.h"

namespace {

// The first argument, when it is no option, must name a command: CLI11 would otherwise take it
// as an extra argument, and `tinycoral nosuch --help` would print the main help and exit 0.
bool unknown_command(const CLI::App& app, int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return false;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (sub->check_name(argv[1])) return false;
  std::cerr << "tinycoral: error: unknown command '" << argv[1]
            << "' (see tinycoral --help for the commands)\n";
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tinycoral: run, inspect and build programs for the Coral Edge TPU"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("tinycoral ") + TINYCORAL_VERSION_STRING);
  tinycoral::cli::add_inspect_command(app);
  tinycoral::cli::add_disasm_command(app);
  tinycoral::cli::add_asm_command(app);
  tinycoral::cli::add_run_command(app);
  tinycoral::cli::add_devices_command(app);
  tinycoral::cli::add_compile_command(app);
  tinycoral::cli::add_compare_command(app);
  tinycoral::cli::add_generate_command(app);
  tinycoral::cli::add_serve_command(app);
  if (unknown_command(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  } catch (const tinycoral::Error& e) {
    std::cerr << "tinycoral: error: " << e.what() << "\n";
    return 2;
  } catch (const std::bad_alloc&) {
    std::cerr
        << "tinycoral: error: out of memory (the input asks for more than can be allocated)\n";
    return 2;
  } catch (const std::exception& e) {  // e.g. std::length_error: still one line, never an abort
    std::cerr << "tinycoral: error: " << e.what() << "\n";
    return 2;
  }
  return tinycoral::cli::exit_code;
}
