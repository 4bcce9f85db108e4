// The partitioner against edgetpu_compiler's own decisions: for every CPU model in the test data
// that has Google's compiled twin beside it, the operators we leave on the CPU are the operators
// Google's file still runs on the CPU (by type and count), and we map something exactly when
// Google's file has an edgetpu-custom-op; and `compile_model` turns each into a readable output.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>

#include "common/file.h"
#include "compiler/compile.h"
#include "compiler/partition.h"
#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

namespace fs = std::filesystem;

// Models whose pipeline this test runs under the sanitizers: those of a few mapped operators (the
// single-layer models of at most 9, the LSTM, split_concat). The whole networks compile about
// twenty times slower there (9 of 21 models, most of this test's time), and each has its own
// *CompiledWhole test that compiles it and checks its outputs, so under the sanitizers they are
// compiled there; the normal build runs every model's pipeline here too.
#ifdef TINYCORAL_ASAN
constexpr size_t kMostMappedOpsToCompile = 16;
#else
constexpr size_t kMostMappedOpsToCompile = SIZE_MAX;
#endif

std::map<std::string, int> cpu_ops_of_google(const container::EdgeTpuModel& m) {
  std::map<std::string, int> out;
  for (const auto& op : m.model.subgraphs.at(0).operators) {
    const auto& code = m.model.code_of(op);
    if (code.custom_code == container::kEdgeTpuCustomCode) continue;
    const std::string name =
        code.builtin_code == static_cast<int32_t>(container::BuiltinOp::kCustom)
            ? code.custom_code
            : container::builtin_op_name(code.builtin_code);
    ++out[name];
  }
  return out;
}

TEST(PartitionVsGoogle, CpuOperatorsMatchEdgetpuCompilersOutputs) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  int pairs = 0, compiled = 0;
  for (const char* sub : {"gen2020", "gen2021", "libredgetpu"}) {
    if (!fs::is_directory(dir / sub)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir / sub)) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const fs::path& cpu : files) {
      const std::string stem = cpu.stem().string();
      if (cpu.extension() != ".tflite" || stem.ends_with("_edgetpu")) continue;
      const fs::path google = cpu.parent_path() / (stem + "_edgetpu.tflite");
      if (!fs::exists(google)) continue;
      SCOPED_TRACE(cpu.string());
      const Graph g = import_graph(container::read_tflite_file(cpu));
      const Partition p = partition(g);
      std::map<std::string, int> ours;
      for (const OpDecision& d : p.decisions) {
        if (!d.mapped) ++ours[g.ops.at(static_cast<size_t>(d.op)).name];
      }
      const auto theirs = container::read_edgetpu_model_file(google);
      EXPECT_EQ(ours, cpu_ops_of_google(theirs));
      EXPECT_EQ(p.mapped_ops.empty(), theirs.edgetpu_ops.empty());
      // And the whole pipeline gives every one of them an output that reads back, with as many
      // operators as the input when nothing was generated.
      ++pairs;
      if (p.mapped_ops.size() > kMostMappedOpsToCompile) continue;
      const CompileResult r = compile_model(read_file(cpu));
      const auto written = container::read_edgetpu_model(r.tflite);
      if (r.edgetpu_subgraphs == 0) {
        EXPECT_EQ(written.model.subgraphs.at(0).operators.size(), g.ops.size());
      }
      ++compiled;
    }
  }
  EXPECT_GT(pairs, 0);
  EXPECT_GT(compiled, 0);
  std::cout << pairs << " model pairs compared, " << compiled << " compiled\n";
}

}  // namespace
}  // namespace tinycoral::compiler
