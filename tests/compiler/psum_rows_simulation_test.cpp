// Our K-chunked FIFO windows (docs/compiler.md "K-chunked FIFO windows") on a simulator that keeps
// partial sums in the psum rows (docs/chip_ops.md 2.1): the compiled program equals the CPU
// reference, and the same program with its psum walk broken (every position on one row) or its
// psum rows on its weight window gives other outputs or a clear fault, so a wrong psum layout
// cannot pass unseen.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"

namespace tinycoral::compiler {
namespace {

using testing::CompiledTwin;
using testing::random_bytes;
using testing::same_bytes;
using twins::ConvSpec;

// The K-chunked ops of the execution program (reduce 0b101 through a weight window), changed by
// `edit`; returns how many it changed.
template <typename Edit>
int edit_chunked_ops(container::Executable& exe, Edit edit) {
  int edited = 0;
  for (auto& bs : exe.bitstreams) {
    std::vector<isa::Instruction> program = isa::decode(bs.data);
    for (isa::Instruction& in : program)
      if (in.opcode() == isa::kTensorOp && in.value("reduce_mask") == 0b101 &&
          in.value("par.fifo") != 0) {
        edit(in);
        ++edited;
      }
    bs.data = isa::encode(program);
  }
  return edited;
}

chip::testing::Buffers run(const CompiledTwin& compiled, const container::Executable& exe,
                           const chip::testing::Buffers& inputs) {
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  return chip::testing::run_executable(chip, exe, inputs);
}

TEST(PsumRowsOnTheVirtualEdgeTpu, AWrongPsumLayoutOfOurKChunkedWindowsIsSeen) {
  // 1x1 512 -> 1024 over 8x8: its 2,048 weight rows come through K-chunked windows of 8 rows, each
  // tile's positions waiting in the psum rows after the window (WeightsBeyondTheWideMemories...).
  std::mt19937 random(20261205);
  const container::Model twin =
      twins::conv_twin(8, 8, 512, {{1024, 1, 1, true}, {64, 1, 1, true}}, random);
  const CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const chip::testing::Buffers inputs{{"x", random_bytes(8 * 8 * 512, random)}};
  host::Interpreter cpu = testing::edgetpu_reference(twin);
  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  EXPECT_TRUE(
      same_bytes(compiled.infer(chip, inputs), testing::reference_output(cpu, inputs.at("x"))));
  const chip::testing::Buffers right = run(compiled, *compiled.exes.execution, inputs);

  // Every position's partial sums on the walk's first row: each resumes from another's.
  container::Executable one_row = *compiled.exes.execution;
  int positions = 0;
  ASSERT_GT(edit_chunked_ops(one_row,
                             [&](isa::Instruction& in) {
                               positions =
                                   std::max(positions, static_cast<int>(in.value("psum.cnt1")) + 1);
                               for (int k = 1; k < 8; ++k)
                                 in.set("psum.inc" + std::to_string(k), 0);
                             }),
            0);
  ASSERT_GT(positions, 1) << "one position a tile: one row is right";
  EXPECT_NE(run(compiled, one_row, inputs), right);

  // The psum rows on the weight window: the op refuses to run.
  container::Executable on_window = *compiled.exes.execution;
  edit_chunked_ops(on_window, [](isa::Instruction& in) {
    in.set("psum.base", in.value("par.base"));
    in.set("psum.sel", in.value("par.sel"));
  });
  try {
    run(compiled, on_window, inputs);
    FAIL() << "psum rows on the window ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overlap the op's `par` rows"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tinycoral::compiler
