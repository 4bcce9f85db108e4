// FULLY_CONNECTED with resident weights (isa.md 2.1.5; tinycoral reproduces all 963 compiled FC
// ops, device-verified): loop0 walks the input words (K/4), loop3 the 64-output passes; every step
// is one input word times one 256-byte weight row; bias of the pass (cfg4) then requantization.
// Also Google's gen2020 MobileNet classifier (16 tiles x 64 outputs, docs/chip_ops.md).
#include "chip/ops/op_class_table.h"
#include "chip/ops/word_times_row.h"

namespace tinycoral::chip::ops {

// gen2021 drops the one-iteration loops: FC = dp 1, cfg0 0x65, reduce 1, loops (K/4, passes)
// (Google's gen2021 MobileNet v1 classifier, same constants as gen2020's; docs/chip_ops.md).
const ClassEntry kFullyConnected2021{
    1, 1, {0x65}, 1, 0b1, 0, nullptr, word_times_row_class("FULLY_CONNECTED (gen2021)")};
// A K too long for one pass of the FIFO reduces over two loops: dp 2, cfg0 0x65, reduce 0b11,
// loops (32 rows, 32 fills) for the 4096 softmax probabilities of bright_64x64 (word 2927, the
// x_sum/y_sum FULLY_CONNECTED; par.fifo 32), like gen2021's 1-position conv (conv.cpp, cfg0 0x63).
const ClassEntry kFullyConnectedLongK{
    1,    2, {0x65},  1,
    0b11, 0, nullptr, word_times_row_class_no_position("FULLY_CONNECTED, two reduced loops")};
const ClassEntry kFullyConnected{1,     3, {0xA5},  1,
                                 0b101, 0, nullptr, word_times_row_class("FULLY_CONNECTED")};

}  // namespace tinycoral::chip::ops
