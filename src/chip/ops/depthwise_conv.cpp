// DEPTHWISE_CONV_2D (dp 3, cfg0 0xE5, reduce 0b11). Established here, not in tinycoral (evidence in
// docs/chip_ops.md "Depthwise convolution"): loops (1, taps, positions, channel words); each step
// is one input word (4 channels at one tap) times one weight row whose columns 0..3 hold a 4x4
// diagonal (column c: the tap's weight for channel c at byte c, the weight zero point elsewhere, as
// stored in the parameter blob), so the ordinary MAC gives acc[c] += (x[c] - in_zp)(w_c - w_zp).
// One bias row of 4 channels and one FIFO fill of `taps` rows per channel word.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_depthwise_conv(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kWordTimesRow});
}
uint32_t depthwise_conv_fills(const OpInstr& op) { return fifo_fill_count(op); }
}  // namespace

const ClassEntry kDepthwiseConv{
    1,    3, {0xE5},  1,
    0b11, 0, nullptr, {"DEPTHWISE_CONV_2D", run_depthwise_conv, depthwise_conv_fills}};

}  // namespace tinycoral::chip::ops
