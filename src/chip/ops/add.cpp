// ADD in the 16-bit mode (dp 5, cfg0 0x09, reduce 0b11; isa.md 2.1.5, bit-exact on the device incl.
// .5 ties): each step reads two input bytes (zero-extended) and one row of 16-bit weights built by
// the program (w1 for operand 1, w2 for operand 2 on the right columns), so after loop0 (half) and
// loop1 (operand) acc[c] = w1*a_c + w2*b_c; plus `offset` = -(w1 z1 + w2 z2), then requantization.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_add(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kHalfwordsTimesRow16});
}
}  // namespace

// Google's gen2020 programs encode the same op with dp 2 (MobileNet v2: 31 ops, cfg1 0x1CD, cfg2
// 0x16, loops (half, operand, words, columns, rows), `in` stride 2 bytes, 4 weight rows); their
// constants satisfy mult = s1 / (w1 s_y), offset = -(w1 z1 + w2 z2) with w2/w1 = s2/s1 to 5 digits
// against the CPU twin (docs/chip_ops.md "ADD").
const ClassEntry kAdd16Gen2020{1,    2, {0x09},  1,
                               0b11, 0, nullptr, {"ADD (16-bit, gen2020)", run_add, nullptr}};
const ClassEntry kAdd16{1, 5, {0x09}, 1, 0b11, 0, nullptr, {"ADD (16-bit)", run_add, nullptr}};
// edgetpu_compiler 16.0 (and Google's gen2021 DeepLab) encode it with dp 4, cfg1 0x1ad: the same
// fields otherwise (loops half, operand, positions; `in` 16-bit steps; 4 weight rows built by mesh
// fills, looming word 499: w1 0x5b4f, w2 0x4fd5).
const ClassEntry kAdd16Dp4{1,    4, {0x09},  1,
                           0b11, 0, nullptr, {"ADD (16-bit, dp 4)", run_add, nullptr}};

}  // namespace tinycoral::chip::ops
