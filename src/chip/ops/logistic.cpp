// LOGISTIC (isa.md 2.1.5, bit model exact on the device): the requantize op with NLU mode 1. x =
// clamp(f32(q - in_zp) * s_in, +-10.396732) goes through the spline loaded by the last 0x19, whose
// output is already in 1/256 steps; round half to even, + out_zp, saturate.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_logistic(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kSpline});
}
}  // namespace

const ClassEntry kLogistic{1, 1, {0x05}, 1, 0, 1, nullptr, {"LOGISTIC", run_logistic, nullptr}};
// gen2021 encodes it as its requantize (dp 1, cfg0 0x65) with NLU mode 1: the SSD's convert_scores
// (segment 3 words 6750/6767: in_zp 234, mult 0.0575 = s_in, clamps +-10.396732, the same spline
// loaded by the 0x19 at word 6737; docs/chip_ops.md 4.6).
const ClassEntry kLogistic2021{1, 1, {0x65},  1,
                               0, 1, nullptr, {"LOGISTIC (gen2021)", run_logistic, nullptr}};

}  // namespace tinycoral::chip::ops
