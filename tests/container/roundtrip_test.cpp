// Read -> write -> read gives the same content, for every TFLite file of the test data (TFLite
// level and, for compiled models, the custom-op options, packages and executables).
#include <gtest/gtest.h>

#include "common/file.h"
#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/package.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "support/testdata.h"
#include "testdata_models.h"

namespace tinycoral::container {
namespace {

TEST(RoundTrip, EveryTestdataModelReadsWritesAndReadsBackEqual) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const auto files = testing::tflite_files(dir);
  ASSERT_FALSE(files.empty());
  int compiled = 0;
  for (const auto& path : files) {
    SCOPED_TRACE(path.string());
    const EdgeTpuModel first = read_edgetpu_model_file(path);
    const EdgeTpuModel second = read_edgetpu_model(write_edgetpu_model(first));
    EXPECT_TRUE(first == second);
    // The plain TFLite level (options bytes passed through untouched).
    const Model model = read_tflite_file(path);
    EXPECT_TRUE(read_tflite(write_tflite(model)) == model);
    if (testing::is_edgetpu_file(path)) {
      ASSERT_FALSE(first.edgetpu_ops.empty());
      ++compiled;
      for (const auto& op : first.edgetpu_ops) {
        for (const Package& p : op.options.packages) {
          EXPECT_TRUE(read_package(write_package(p)) == p);
          for (const Executable& e : p.executables)
            EXPECT_TRUE(read_executable(write_executable(e)) == e);
        }
      }
    } else {
      EXPECT_TRUE(first.edgetpu_ops.empty());
    }
  }
  EXPECT_GE(compiled, 10);
}

}  // namespace
}  // namespace tinycoral::container
