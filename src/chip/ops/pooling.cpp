// Window ops that read the window from wide memory, one lane (one position x 64 channels) per step,
// through `par` (written there by a transposing narrowToWide; `in` unused). isa.md 2.2, 2.3;
// average pooling established here (docs/chip_ops.md "Average pooling").
//  - MAX_POOL_2D (opcode 2): max over the window of (lane - w_zp), + offset (-zp), mult ~1.
//  - average pool (opcode 1, cfg2 0xE, cfg3 6): sum of the window, times mult = 1/window, round
//    half to even (gen2020 MobileNet: 4x4 window, mult 0.0625).
//  - position SUM (opcode 3): sum of (lane - w_zp), requantized.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_max(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kLaneOnly, Combine::kMax});
}
void run_sum(const OpInstr& op, OpEnv& env) { run_engine(op, env, {OperandKind::kLaneOnly}); }
bool avg_fields(const OpInstr& op) { return op.cfg2 == 0xE && op.cfg3 == 6; }
}  // namespace

const ClassEntry kMaxPool{2, 4, {0x127}, 1, 0b11, 0, nullptr, {"MAX_POOL_2D", run_max, nullptr}};
const ClassEntry kAvgPool{1,    4, {0x127},    1,
                          0b11, 0, avg_fields, {"AVERAGE_POOL_2D", run_sum, nullptr}};
const ClassEntry kPositionSum{3,    4, {0x127}, 1,
                              0b11, 0, nullptr, {"position SUM", run_sum, nullptr}};

}  // namespace tinycoral::chip::ops
