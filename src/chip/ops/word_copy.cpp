// Word copy / reformat (dp 4, cfg0 0x07, reduce 0; isa.md 2.1.5 "Copy / reformat ops"): moves words
// between narrow layouts through the identity row (mult 1, clamps +-inf, zero points 0), i.e. one
// input word times the identity row is one output word. Its progress/wait fields are the
// scheduler's.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_word_copy(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kWordTimesRow});
}
}  // namespace

// gen2021 ("grouper") encodes the same word copy as dp 1, cfg0 0 (split_concat words 593, 1100,
// 1120: `par` = the identity row at 8304, mult 1, clamps +-inf, zero points 0; docs/chip_ops.md).
const ClassEntry kWordCopy2021{1, 1, {0x00},  1,
                               0, 0, nullptr, {"word copy (gen2021)", run_word_copy, nullptr}};
const ClassEntry kWordCopy{1, 4, {0x07}, 1, 0, 0, nullptr, {"word copy", run_word_copy, nullptr}};

// gen2020's reformat before a split convolution (dp 4, cfg0 0, reduce 1 over a one-step loop0,
// in_tflags 0x15, mult 1, clamps +-inf, zero points 0): `par` is a 4x4 identity (columns 0-3 =
// byte lanes 0-3) that the program builds with four mesh fills and a narrowToWide just before,
// so one input word times it is the same word. PoseNet word 480 copies 62 of the 121 pixel words
// of each of tile 0's 89 input rows into the 63-word rows (one halo word) the first convolution
// reads; DeepLab words 915... the same. Evidence in docs/chip_ops.md "7-dimension reformat".
// gen2021 encodes it without the one-step loop0 as dp 0, cfg0 0, reduce 0 (cfg2 0x06, cfg3 0), its
// position loops flattened into loop1 (PoseNet word 479: loops (1, 5518) = 62 x 89 words, the same
// 7-level `in` walk and a 4x4 identity built at 0x1dd8). The row need not be an identity: the
// gen2021 MobileNet softmax (word 3655) replicates byte 0 of its input word into 4 lanes with a
// row of four (1, 0, 0, 0) columns, the same word-times-row step.
bool reformat2021(const OpInstr& op) { return op.cfg2 == 0x06 && op.cfg3 == 0; }
const ClassEntry kWordCopyReformat2021{
    1, 0, {0x00}, 1, 0, 0, reformat2021, {"word copy (reformat, gen2021)", run_word_copy, nullptr}};
const ClassEntry kWordCopyReformat{
    1, 4, {0x00}, 1, 1, 0, nullptr, {"word copy (7-dimension reformat)", run_word_copy, nullptr}};

}  // namespace tinycoral::chip::ops
