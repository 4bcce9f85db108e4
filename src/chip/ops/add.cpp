// ADD in the 16-bit mode (dp 5, cfg0 0x09, reduce 0b11; isa.md 2.1.5, bit-exact on the device incl.
// .5 ties): each step reads two input bytes (zero-extended) and one row of 16-bit weights built by
// the program (w1 for operand 1, w2 for operand 2 on the right columns), so after loop0 (half) and
// loop1 (operand) acc[c] = w1*a_c + w2*b_c; plus `offset` = -(w1 z1 + w2 z2), then requantization.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kHalfwordsTimesRow16});
}
}  // namespace

const ClassEntry kAdd16{1, 5, {0x09}, 1, 0b11, 0, nullptr, {"ADD (16-bit)", run, nullptr}};

}  // namespace tinycoral::chip::ops
