// Convolutions on the MAC array, 1x1 and k x k (isa.md 2.1.5 "Conv"; device-verified in tinycoral):
// every step is one input word (4 input channels of one tap) times one 256-byte weight row (64
// output channels). Weights are resident or stream through a ring-filled FIFO (par_fifo rows per
// fill).
//  - K-chunked (reduce 0b1011): loops (a, taps, positions, chunks, groups); partial sums of every
//    position of the tile stay open across the chunks (the psum rows) and are emitted in the last
//    one.
//  - position-outer (reduce 0b111): loops (words, taps, 1, positions, groups), all of K per fill.
// cfg0 0xE7 (a wider output block) computes the same; only the `out` TTU differs.
#include "chip/ops/op_class_table.h"
#include "chip/ops/word_times_row.h"

namespace tinycoral::chip::ops {

// gen2021 ("grouper"): dp 2, cfg0 0xA5/0xA7, reduce 1: loop0 = input words, loop1 = positions,
// weights (with bias) from a FIFO; split_concat word 1157 concatenates two channels through a 2-row
// selection matrix this way (docs/chip_ops.md).
const ClassEntry kConv2021{1,   2, {0xA5, 0xA7}, 2,
                           0b1, 0, nullptr,      word_times_row_class("conv/FC FIFO (gen2021)")};
// gen2021 drops loops of one iteration: K-chunked conv = dp 3, cfg0 0xA7, reduce 0b101 with loops
// (a, positions, chunks, groups); and ops without a position loop (1-position tiles) use cfg0 0x63:
// depthwise (dp 1, reduce 1, loops (taps, channel words)) and K-chunked 1x1 (dp 2, reduce 0b11,
// loops (a, chunks, groups)), each loop outside loop0 moving to the next FIFO fill. Verified on
// Google's gen2021 MobileNet v1 0.25 (docs/chip_ops.md).
const ClassEntry kConvKChunked2021{
    1, 3, {0xA7}, 1, 0b101, 0, nullptr, word_times_row_class("conv K-chunked (gen2021)")};
const ClassEntry kDepthwiseNoPosition2021{
    1,   1, {0x63},  1,
    0b1, 0, nullptr, word_times_row_class_no_position("DEPTHWISE_CONV_2D 1-position (gen2021)")};
const ClassEntry kConvNoPosition2021{
    1,    2, {0x63},  1,
    0b11, 0, nullptr, word_times_row_class_no_position("conv K-chunked 1-position (gen2021)")};
const ClassEntry kConvKChunked{1,      4, {0xE5, 0xE7}, 2,
                               0b1011, 0, nullptr,      word_times_row_class("conv K-chunked")};
const ClassEntry kConvPositionOuter{
    1, 4, {0xE5, 0xE7}, 2, 0b111, 0, nullptr, word_times_row_class("conv position-outer")};

}  // namespace tinycoral::chip::ops
