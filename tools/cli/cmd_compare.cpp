// `tinycoral compare A B`: two compiled models side by side, executable by executable: the first
// differing instruction with the ISA table's field names, then relocations and parameters byte by
// byte. Exit code 0 when identical, 1 when they differ, 2 for a file that does not read.
#include <iostream>

#include "commands.h"
#include "common/error.h"
#include "compiler/compare.h"
#include "container/edgetpu_model.h"

namespace tinycoral::cli {

void add_compare_command(CLI::App& app) {
  struct Options {
    std::string a, b;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "compare", "Compare two compiled models instruction by instruction and byte by byte");
  cmd->add_option("a", opts->a, "first *_edgetpu.tflite")->required();
  cmd->add_option("b", opts->b, "second *_edgetpu.tflite")->required();
  cmd->callback([opts] {
    const auto a = container::read_edgetpu_model_file(opts->a);
    const auto b = container::read_edgetpu_model_file(opts->b);
    if (a.edgetpu_ops.empty())
      fail(opts->a, ": no edgetpu-custom-op (nothing compiled to compare)");
    if (b.edgetpu_ops.empty())
      fail(opts->b, ": no edgetpu-custom-op (nothing compiled to compare)");
    const compiler::CompareReport report = compiler::compare_models(a, b);
    std::cout << "A: " << opts->a << "\nB: " << opts->b << "\n" << report.text();
    exit_code = report.identical() ? 0 : 1;
  });
}

}  // namespace tinycoral::cli
