// The fuzzers' seed corpora (tests/data/fuzz/{tflite,package}_fuzz/) are files our own writer makes
// from the synthetic content in synthetic.h; never Google's files. This test checks that every seed
// still parses; DISABLED_Regenerate rewrites them (run with --gtest_also_run_disabled_tests
// --gtest_filter=FuzzSeeds.DISABLED_Regenerate after changing the writer or synthetic.h).
#include <gtest/gtest.h>

#include "common/file.h"
#include "container/edgetpu_model.h"
#include "container/package.h"
#include "container/tflite_writer.h"
#include "support/testdata.h"
#include "synthetic.h"

namespace tinycoral::container {
namespace {

namespace fs = std::filesystem;

fs::path seed_dir(const char* fuzzer) { return testing::source_dir() / "tests/data/fuzz" / fuzzer; }

TEST(FuzzSeeds, EverySeedParses) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(seed_dir("tflite_fuzz"))) {
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(read_edgetpu_model_file(entry.path()));
    ++count;
  }
  for (const auto& entry : fs::directory_iterator(seed_dir("package_fuzz"))) {
    SCOPED_TRACE(entry.path().string());
    const std::vector<uint8_t> bytes = read_file(entry.path());
    if (entry.path().extension() == ".executable")
      EXPECT_NO_THROW(read_executable(bytes));
    else
      EXPECT_NO_THROW(read_package(bytes));
    ++count;
  }
  EXPECT_GE(count, 5);
}

TEST(FuzzSeeds, DISABLED_Regenerate) {
  fs::create_directories(seed_dir("tflite_fuzz"));
  fs::create_directories(seed_dir("package_fuzz"));
  write_file(seed_dir("tflite_fuzz") / "synthetic_edgetpu.tflite",
             write_edgetpu_model(testing::synthetic_edgetpu_model()));
  Model cpu = testing::synthetic_model();
  cpu.operator_codes[0].custom_code = "SomeOtherCustomOp";  // a custom op that is not ours
  write_file(seed_dir("tflite_fuzz") / "synthetic_cpu.tflite", write_tflite(cpu));
  Model tiny;
  tiny.buffers = {Buffer{}};
  Subgraph g;
  g.tensors = {
      Tensor{"x", {1, 2}, {}, TensorType::kUInt8, 0, Quantization{{0.5f}, {3}, {}, {}, 0}}};
  g.inputs = {0};
  g.outputs = {0};
  tiny.subgraphs = {g};
  write_file(seed_dir("tflite_fuzz") / "tiny.tflite", write_tflite(tiny));
  write_file(seed_dir("package_fuzz") / "synthetic.package",
             write_package(testing::synthetic_package()));
  Package one = testing::synthetic_package();
  one.executables.resize(1);
  write_file(seed_dir("package_fuzz") / "one_executable.package", write_package(one));
  write_file(seed_dir("package_fuzz") / "execution_only.executable",
             write_executable(testing::synthetic_executable(ExecutableType::kExecutionOnly)));
}

}  // namespace
}  // namespace tinycoral::container
