// The requantize family: RELU, RELU6, RELU_N1_TO_1, QUANTIZE (dp 1, cfg0 0x05, reduce 0, NLU off;
// isa.md 2.1.5, 191/191 compiled instances, device-verified): each input word times the 4x4
// identity row gives acc[c] = x[c] - in_zp, then the output stage; one word out per word in.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run(const OpInstr& op, OpEnv& env) { run_engine(op, env, {OperandKind::kWordTimesRow}); }
}  // namespace

const ClassEntry kRequantize{1, 1, {0x05},  1,
                             0, 0, nullptr, {"requantize (RELU/QUANTIZE)", run, nullptr}};

}  // namespace tinycoral::chip::ops
