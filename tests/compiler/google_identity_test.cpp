// Byte identity with edgetpu_compiler 16.0: compile the CPU twins of libredgetpu's single-layer
// models (dense: FULLY_CONNECTED; gabor: DEPTHWISE_CONV_2D, with and without the AVERAGE_POOL_2D
// after it; bright: SOFTMAX, two FULLY_CONNECTED and their CONCATENATION) and compare every
// executable's instructions, relocations, parameters, DMA hints and layers with Google's file
// beside them.
#include <gtest/gtest.h>

#include "common/file.h"
#include "compiler/compare.h"
#include "compiler/compile.h"
#include "container/edgetpu_model.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

class LibredgetpuTwin : public ::testing::TestWithParam<const char*> {};

TEST_P(LibredgetpuTwin, InstructionsAndParametersMatchGoogle) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const std::string name = GetParam();
  const auto cpu = read_file(dir / "libredgetpu" / (name + ".tflite"));
  const CompileResult r = compile_model(cpu);
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  for (const OpDecision& d : r.partition.decisions) EXPECT_TRUE(d.mapped) << d.reason;
  const auto ours = container::read_edgetpu_model(r.tflite);
  const auto google =
      container::read_edgetpu_model_file(dir / "libredgetpu" / (name + "_edgetpu.tflite"));
  const CompareReport report = compare_models(ours, google);
  EXPECT_TRUE(report.identical()) << report.text();
  ASSERT_EQ(report.executables.size(), 2u);
  // The boundary tensors are Google's: the uint8 input and output, nothing else.
  const auto& sub = ours.model.subgraphs.at(0);
  const auto& gsub = google.model.subgraphs.at(0);
  ASSERT_EQ(sub.tensors.size(), gsub.tensors.size());
  for (size_t i = 0; i < sub.tensors.size(); ++i) {
    EXPECT_EQ(sub.tensors[i].name, gsub.tensors[i].name);
    EXPECT_EQ(sub.tensors[i].shape, gsub.tensors[i].shape);
    EXPECT_EQ(sub.tensors[i].type, gsub.tensors[i].type);
    EXPECT_EQ(sub.tensors[i].quantization, gsub.tensors[i].quantization);
  }
}

INSTANTIATE_TEST_SUITE_P(Libredgetpu, LibredgetpuTwin,
                         ::testing::Values("dense_256", "dense_512", "gabor_64x64_7k_4o_2s",
                                           "gabor_64x64_p4", "bright_16x16", "bright_64x64"));

}  // namespace
}  // namespace tinycoral::compiler
