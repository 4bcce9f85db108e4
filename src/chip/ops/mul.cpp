// MUL of two tensors, two ops (isa.md 2.1.5 "MUL"; verified offline and bit-exact on the device):
//  - step 1 (dp 4, cfg0 0x60, reduce 0): one byte of a (`in`) times one lane of b's FIFO (`par`),
//    in_zp = z_a, w_zp = z_b; every channel of the output word = requant((a - z_a)(b - z_b)).
//  - step 2 (dp 2, cfg0 0, reduce 0): lane-select pack: loop0's 4 steps read intermediate words
//    against the identity row's lanes 0..3, so byte k of the output word is intermediate word k's
//    value; mult 1, no clamps.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_mul_product(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kByteTimesLaneBroadcast});
}
void run_pack(const OpInstr& op, OpEnv& env) {
  EngineSpec spec{OperandKind::kByteTimesLane};
  spec.extra_reduce = 0b1;  // the 4 lanes of loop0 build one word
  run_engine(op, env, spec);
}
uint32_t mul_fills(const OpInstr& op) { return fifo_fill_count(op); }
bool step1(const OpInstr& op) { return op.cfg3 == 7; }
}  // namespace

const ClassEntry kMulProduct{1, 4, {0x60}, 1,
                             0, 0, step1,  {"MUL step 1 (product)", run_mul_product, mul_fills}};
const ClassEntry kMulPack{1, 2, {0x00}, 1, 0, 0, nullptr, {"MUL step 2 (pack)", run_pack, nullptr}};

}  // namespace tinycoral::chip::ops
