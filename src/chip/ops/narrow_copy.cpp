// Narrow copy (dp 3, cfg0 0x07, reduce 1, cfg3 7): the first-layer reformat of 3-channel images
// (isa.md 2.1.2; gen2020 MobileNet words 50 and 158). loop0 walks the input bytes of one position
// (`in` stride 1 byte) and `par` the lanes of a constant row (stride 1 unit), so each step is one
// byte times one lane and output column c collects input byte c (a selection row), requantized with
// mult 1 and infinite clamps: a byte-granular gather into 4-byte words.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_narrow_copy(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kByteTimesLane});
}
uint32_t narrow_copy_fills(const OpInstr& op) { return fifo_fill_count(op); }
}  // namespace

const ClassEntry kNarrowCopy{1,   3, {0x07},  1,
                             0b1, 0, nullptr, {"narrow copy", run_narrow_copy, narrow_copy_fills}};

}  // namespace tinycoral::chip::ops
