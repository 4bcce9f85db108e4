// Google's programs without a comparable twin output: the four SSD pipeline segments must run to
// the end and give the same bytes twice (docs/chip.md "Status"; their detection on cat.bmp,
// Google's G035, is checked through the runtime in tests/runtime/google_expectations_sim_test.cpp).
#include <gtest/gtest.h>

#include <string>

#include "chip/sim_runner.h"
#include "container/tflite_reader.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// Its claim is the repetition, checked in the normal build. Under the sanitizers (about 16 s
// there) the segments run once each in EveryCompiledModel and through the runtime in G035.
#ifndef TINYCORAL_ASAN
TEST(GoogleProgramsOnTheChip, SsdSegmentsRunTwiceIdentically) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  for (int segment = 0; segment < 4; ++segment) {
    const std::string name = "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_" +
                             std::to_string(segment) + "_of_4_edgetpu.tflite";
    SCOPED_TRACE(name);
    const auto compiled = container::read_edgetpu_model_file(data / name);
    const auto exes = testing::executables_of(compiled);
    ASSERT_NE(exes.execution, nullptr);
    const auto inputs = testing::random_inputs(*exes.execution, 1);
    VirtualEdgeTpu chip;
    if (exes.caching) testing::run_executable(chip, *exes.caching, {});
    const auto first = testing::run_executable(chip, *exes.execution, inputs);
    const auto second = testing::run_executable(chip, *exes.execution, inputs);
    EXPECT_EQ(chip.fault(), "");
    ASSERT_EQ(first.size(), exes.execution->output_layers.size());
    EXPECT_EQ(first, second);
  }
}
#endif

}  // namespace
}  // namespace tinycoral::chip
