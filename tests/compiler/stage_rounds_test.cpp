// Correct by simulation: a stage whose images do not fit a tile at once computes each tile's band
// in rounds (Plan::rounds: PoseNet's 177 x 241 x 48 map). A 1x1 conv to 192 channels on a 128 x 128
// image writes 3 MB, all of the 16 tiles' narrow memory, so the chain compiles only with its first
// stage in rounds; the program equals the CPU reference in every byte on two inferences.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "support/conv_twin.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

TEST(StageRoundsOnTheVirtualEdgeTpu, MapsBeyondNarrowMemoryEqualTheCpuReference) {
  std::mt19937 random(2411);
  ConvSpec expand{192, 1, 1, true, true, true, Activation::kRelu6};
  ConvSpec dw{0, 3, 2, true, true, true, Activation::kRelu6};
  dw.depthwise = true;
  const ConvSpec project{16, 1, 1, true, true, true, Activation::kNone};
  const int h = 128, w = 128, cin = 16;
  const std::vector<ConvSpec> specs = {expand, dw, project};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.back().status);
  const auto compiled = container::read_edgetpu_model(r.tflite);
  const auto exes = chip::testing::executables_of(compiled);
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(twin, options);
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, *exes.caching, {});
  const auto& layer = exes.execution->output_layers.at(0);
  for (int inference = 0; inference < 2; ++inference) {
    std::vector<uint8_t> x(static_cast<size_t>(h) * w * cin);
    for (auto& b : x) b = static_cast<uint8_t>(random());
    cpu.set_input(0, x);
    cpu.invoke();
    const auto cpu_out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(cpu_out.begin(), cpu_out.end());
    EXPECT_GT(std::set<uint8_t>(want.begin(), want.end()).size(), 16u);
    const auto got = chip::testing::detile(
        layer, chip::testing::run_executable(chip, *exes.execution, {{"x", x}}).at(layer.name));
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got[i] != want[i];
    EXPECT_EQ(differ, 0u) << "inference " << inference << ": " << differ << " of " << want.size()
                          << " bytes differ";
  }
  EXPECT_EQ(chip.fault(), "");
}

}  // namespace
}  // namespace tinycoral::compiler
