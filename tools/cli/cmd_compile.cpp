// `tinycoral compile MODEL.tflite [MORE.tflite...] -o OUT_DIR [-s] [--json]`: edgetpu_compiler's
// command line. Writes OUT_DIR/NAME_edgetpu.tflite and OUT_DIR/NAME_edgetpu.log (the operation
// table) for every model; -s also prints the table, --json prints one summary object per model.
// A model nothing of which maps still gets an output (all operators on the CPU) and a log saying
// why; a malformed model is an error (exit 2). Several models are compiled one by one (Google's
// compiler co-compiles them to share the parameter cache; we do not yet).
#include <chrono>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "compiler/compile.h"
#include "compiler/operation_log.h"
#include "compiler/version.h"

namespace tinycoral::cli {

namespace fs = std::filesystem;

void add_compile_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> models;
    std::string out_dir = ".";
    bool show_operations = false;
    bool json = false;
    // edgetpu_compiler's other flags, accepted so that scripts keep working (see the callback).
    int min_runtime_version = 0, timeout_sec = 0, num_segments = 0, delegate_search_step = 0;
    bool multiple_subgraphs = false, search_delegate = false;
    std::string intermediate_tensors;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "compile", "Compile CPU TFLite models for the Edge TPU (a drop-in for edgetpu_compiler)");
  cmd->add_option("models", opts->models, "quantized TFLite models")->required();
  cmd->add_option("-o,--out_dir", opts->out_dir, "output directory (default: .)");
  cmd->add_flag("-s,--show_operations", opts->show_operations, "print the operation table");
  cmd->add_flag("--json", opts->json, "print a JSON summary per model");
  cmd->add_option("-m,--min_runtime_version", opts->min_runtime_version,
                  "accepted for edgetpu_compiler compatibility (packages say 14)");
  cmd->add_option("-t,--timeout_sec", opts->timeout_sec, "accepted and ignored");
  cmd->add_flag("-a,--enable_multiple_subgraphs", opts->multiple_subgraphs,
                "accepted; one Edge TPU subgraph is built");
  cmd->add_flag("-d,--search_delegate", opts->search_delegate, "accepted and ignored");
  cmd->add_option("-k,--delegate_search_step", opts->delegate_search_step, "accepted and ignored");
  cmd->add_option("-n,--num_segments", opts->num_segments, "accepted; one segment is built");
  cmd->add_option("-i,--intermediate_tensors", opts->intermediate_tensors, "accepted and ignored");
  cmd->callback([opts] {
    auto ignored = [](bool given, const char* flag, const char* what) {
      if (given) std::cerr << "tinycoral compile: warning: " << flag << " " << what << "\n";
    };
    ignored(opts->multiple_subgraphs, "-a", "is not supported yet: one Edge TPU subgraph is built");
    ignored(opts->num_segments > 1, "-n", "is not supported yet: one segment is built");
    ignored(opts->min_runtime_version != 0 && opts->min_runtime_version != 14, "-m",
            "is ignored: packages say min_runtime_version 14");
    ignored(opts->search_delegate || opts->delegate_search_step != 0, "-d/-k",
            "are ignored: the partition follows edgetpu_compiler's default rules");
    ignored(!opts->intermediate_tensors.empty(), "-i", "is ignored");
    std::error_code ec;
    fs::create_directories(opts->out_dir, ec);
    if (!fs::is_directory(opts->out_dir))
      fail(opts->out_dir, ": cannot create the output directory");
    nlohmann::json summaries = nlohmann::json::array();
    if (!opts->json)
      std::cout << "Edge TPU Compiler version " << compiler::kCompilerVersion << "\n";
    for (const std::string& path : opts->models) {
      const auto started = std::chrono::steady_clock::now();
      const std::vector<uint8_t> bytes = read_file(path);
      const compiler::CompileResult r =
          with_context(path, [&] { return compiler::compile_model(bytes); });
      const std::string stem = fs::path(path).stem().string();
      const fs::path out = fs::path(opts->out_dir) / (stem + "_edgetpu.tflite");
      const fs::path log = fs::path(opts->out_dir) / (stem + "_edgetpu.log");
      write_file(out, r.tflite);
      const std::string log_text = compiler::operation_log(path, out.string(), r.rows);
      write_file(log,
                 std::span(reinterpret_cast<const uint8_t*>(log_text.data()), log_text.size()));
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      if (opts->json) {
        nlohmann::json ops = nlohmann::json::array();
        for (const auto& row : r.rows) {
          ops.push_back({{"operator", row.op},
                         {"count", row.count},
                         {"mapped", row.mapped},
                         {"status", row.status}});
        }
        summaries.push_back({{"input", path},
                             {"output", out.string()},
                             {"log", log.string()},
                             {"edgetpu_subgraphs", r.edgetpu_subgraphs},
                             {"operations", r.graph.ops.size()},
                             {"operators", ops}});
        continue;
      }
      std::cout << "\nModel compiled successfully in " << static_cast<int64_t>(ms) << " ms.\n\n";
      std::cout << "Input model: " << path << "\n";
      std::cout << "Input size: " << bytes.size() << " bytes\n";
      std::cout << "Output model: " << out.string() << "\n";
      std::cout << "Output size: " << r.tflite.size() << " bytes\n";
      std::cout << "Number of Edge TPU subgraphs: " << r.edgetpu_subgraphs << "\n";
      std::cout << "Total number of operations: " << r.graph.ops.size() << "\n";
      std::cout << "Operation log: " << log.string() << "\n";
      if (opts->show_operations) {
        std::cout << "\n" << compiler::operator_table(r.rows);
      } else {
        std::cout << "See the operation log file for individual operation details.\n";
      }
    }
    if (opts->json) std::cout << summaries.dump(2) << "\n";
  });
}

}  // namespace tinycoral::cli
