// The psum rows (docs/chip_ops.md "Partial sums in wide memory") are at work in Google's programs:
// their K-chunked ops keep each position's partial sums at the row their `psum` walk gives, so the
// same program with every such walk collapsed onto its first row (each position then resumes from
// another's sums) computes other outputs. With the model off (no op keeping partial sums, or the
// sums kept anywhere but the walk's rows) the two programs would agree. Skipped without the test
// data.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "chip/sim_runner.h"
#include "chip/tile.h"
#include "container/tflite_reader.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

// `exe` with the psum walk of every op whose class keeps partial sums collapsed onto its first
// row; `collapsed` counts those ops.
container::Executable with_one_psum_row(const container::Executable& exe, int& collapsed) {
  container::Executable out = exe;
  for (auto& bs : out.bitstreams) {
    std::vector<isa::Instruction> program = isa::decode(bs.data);
    for (isa::Instruction& in : program) {
      if (!isa::is_tensor_op(in.opcode())) continue;
      const OpInstr op = decode_op(in);
      const OpClass* cls = ops::classify(op);
      if (!cls || !cls->keeps_partial_sums || !cls->keeps_partial_sums(op)) continue;
      // (An increment's low bits are the mode fields: hmode for level 0, mode k for level k + 1;
      // mode7 is not part of an increment.)
      in.set("psum.hmode", 0);
      for (int k = 0; k < 8; ++k) in.set("psum.inc" + std::to_string(k), 0);
      for (int k = 0; k < 7; ++k) in.set("psum.mode" + std::to_string(k), 0);
      ++collapsed;
    }
    bs.data = isa::encode(program);
  }
  return out;
}

testing::Buffers run_once(const testing::PackageExecutables& exes, const container::Executable& exe,
                          const testing::Buffers& inputs) {
  VirtualEdgeTpu chip;
  if (exes.caching) testing::run_executable(chip, *exes.caching, {});
  return testing::run_executable(chip, exe, inputs);
}

TEST(PsumRowsInGooglesPrograms, TheirKChunkedOpsOutputsDependOnThePsumWalk) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  // One program of each compiler generation with K-chunked ops, and how many op words keep sums.
  for (const auto& [name, keeping] :
       {std::pair{"gen2021/mobilenet_v1_0.25_128_quant_edgetpu.tflite", 8},
        std::pair{"gen2020/mobilenet_v1_0.5_160_quant_edgetpu.tflite", 39}}) {
    const container::EdgeTpuModel model = container::read_edgetpu_model_file(dir / name);
    const testing::PackageExecutables exes = testing::executables_of(model);
    ASSERT_NE(exes.execution, nullptr) << name;
    int collapsed = 0;
    const container::Executable one_row = with_one_psum_row(*exes.execution, collapsed);
    EXPECT_EQ(collapsed, keeping) << name << ": op words keeping partial sums";
    const testing::Buffers inputs = testing::random_inputs(*exes.execution, 20261205);
    EXPECT_NE(run_once(exes, *exes.execution, inputs), run_once(exes, one_row, inputs)) << name;
  }
}

}  // namespace
}  // namespace tinycoral::chip
