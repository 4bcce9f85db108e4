// LOGISTIC (isa.md 2.1.5, bit model exact on the device): the requantize op with NLU mode 1. x =
// clamp(f32(q - in_zp) * s_in, +-10.396732) goes through the spline loaded by the last 0x19, whose
// output is already in 1/256 steps; round half to even, + out_zp, saturate.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kSpline});
}
}  // namespace

const ClassEntry kLogistic{1, 1, {0x05}, 1, 0, 1, nullptr, {"LOGISTIC", run, nullptr}};

}  // namespace tinycoral::chip::ops
