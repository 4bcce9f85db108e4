// The requantize family: RELU, RELU6, RELU_N1_TO_1, QUANTIZE (dp 1, cfg0 0x05, reduce 0, NLU off;
// isa.md 2.1.5, 191/191 compiled instances, device-verified): each input word times the 4x4
// identity row gives acc[c] = x[c] - in_zp, then the output stage; one word out per word in.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
void run_requantize(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, {OperandKind::kWordTimesRow});
}
uint32_t requantize_fills(const OpInstr& op) { return fifo_fill_count(op); }
}  // namespace

// gen2021 ("grouper"): dp 1, cfg0 0x65, reduce 0 with a parameter row from a FIFO (par_fifo 1) and
// a bias (cfg4): split_concat's channel extractions (words 626, 802) whose parameter blocks hold a
// zero bias and a selection row (column 0 = (0,1,0,0) picks byte 1), with in_zp = out_zp = 128,
// mult 1, clamps [-128, 127] -- the same word-times-row step (docs/chip_ops.md).
const ClassEntry kRequantize2021{
    1, 1, {0x65}, 1, 0, 0, nullptr, {"requantize (gen2021)", run_requantize, requantize_fills}};
const ClassEntry kRequantize{
    1, 1, {0x05}, 1, 0, 0, nullptr, {"requantize (RELU/QUANTIZE)", run_requantize, nullptr}};
// The same step inside a deeper loop nest (dp 2, cfg0 0x05, reduce 1 over a one-step loop0,
// loops (1, positions, words)): gen2020 PoseNet words 7181-7303 rescale the two 32-channel
// displacement convolutions (in_zp 65 and 170, mult 1.023 and 0.977) into the 64 channels of
// quant_mid_offsets through the 4x4 identity the program builds at 0x2014 (docs/chip_ops.md).
// And as dp 4, cfg0 0x05, reduce 0 (gen2021 Keras LSTM word 45 and 150, the SSD segments' word
// 45): the streamed input copy, each staged chunk of 5 input words times the 4x4 identity at
// 0x207c (mesh fills 0x1, 0x100, 0x10000, 0x1000000 at words 13-31), mult 1, clamps +-inf.
const ClassEntry kRequantizeDp4{1, 4, {0x05},  1,
                                0, 0, nullptr, {"requantize (dp 4 copy)", run_requantize, nullptr}};
// gen2021 with a single main loop: dp 0, cfg0 0x25, reduce 0, NLU off (cfg1 0x02d, cfg2 0x06).
// The SSD's box and class heads (segment 3 words 755, 1217, ...) rescale each head's conv output
// in place into the concatenation's scale: in_zp = the conv's out_zp, mult = s_conv / s_concat,
// clamps [-out_zp, 255 - out_zp], `par` the identity row at 0x207c (docs/chip_ops.md 4.6).
const ClassEntry kRequantizeDp0{1, 0, {0x25},  1,
                                0, 0, nullptr, {"requantize (dp 0)", run_requantize, nullptr}};
const ClassEntry kRequantizeNested{
    1, 2, {0x05}, 1, 1, 0, nullptr, {"requantize (nested loops)", run_requantize, nullptr}};

}  // namespace tinycoral::chip::ops
