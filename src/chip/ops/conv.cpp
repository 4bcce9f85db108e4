// Convolutions on the MAC array, 1x1 and k x k (isa.md 2.1.5 "Conv"; device-verified in tinycoral):
// every step is one input word (4 input channels of one tap) times one 256-byte weight row (64
// output channels). Weights are resident or stream through a ring-filled FIFO (par_fifo rows per
// fill).
//  - K-chunked (reduce 0b1011): loops (a, taps, positions, chunks, groups); partial sums of every
//    position of the tile stay open across the chunks (the psum rows) and are emitted in the last
//    one.
//  - position-outer (reduce 0b111): loops (words, taps, 1, positions, groups), all of K per fill.
// cfg0 0xE7 (a wider output block) computes the same; only the `out` TTU differs.
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
// Partial sums of interrupted reductions go to the psum rows (docs/chip_ops.md "Partial sums in
// wide memory").
EngineSpec conv_spec() {
  EngineSpec spec{OperandKind::kWordTimesRow};
  spec.psum_rows = true;
  return spec;
}
void run_conv(const OpInstr& op, OpEnv& env) { run_engine(op, env, conv_spec()); }
uint32_t conv_fills(const OpInstr& op) { return fifo_fill_count(op); }
bool conv_psum(const OpInstr& op) { return keeps_partial_sums(op, conv_spec()); }
EngineSpec no_position() {
  EngineSpec spec = conv_spec();
  spec.has_position_loop = false;
  return spec;
}
void run_conv_no_position(const OpInstr& op, OpEnv& env) { run_engine(op, env, no_position()); }
uint32_t conv_fills_no_position(const OpInstr& op) { return fifo_fill_count(op, no_position()); }
bool conv_psum_no_position(const OpInstr& op) { return keeps_partial_sums(op, no_position()); }
}  // namespace

// gen2021 ("grouper"): dp 2, cfg0 0xA5/0xA7, reduce 1: loop0 = input words, loop1 = positions,
// weights (with bias) from a FIFO; split_concat word 1157 concatenates two channels through a 2-row
// selection matrix this way (docs/chip_ops.md).
const ClassEntry kConv2021{
    1,   2, {0xA5, 0xA7}, 2,
    0b1, 0, nullptr,      {"conv/FC FIFO (gen2021)", run_conv, conv_fills, conv_psum}};
// gen2021 drops loops of one iteration: K-chunked conv = dp 3, cfg0 0xA7, reduce 0b101 with loops
// (a, positions, chunks, groups); and ops without a position loop (1-position tiles) use cfg0 0x63:
// depthwise (dp 1, reduce 1, loops (taps, channel words)) and K-chunked 1x1 (dp 2, reduce 0b11,
// loops (a, chunks, groups)), each loop outside loop0 moving to the next FIFO fill. Verified on
// Google's gen2021 MobileNet v1 0.25 (docs/chip_ops.md).
const ClassEntry kConvKChunked2021{
    1,     3, {0xA7},  1,
    0b101, 0, nullptr, {"conv K-chunked (gen2021)", run_conv, conv_fills, conv_psum}};
const ClassEntry kDepthwiseNoPosition2021{
    1,
    1,
    {0x63},
    1,
    0b1,
    0,
    nullptr,
    {"DEPTHWISE_CONV_2D 1-position (gen2021)", run_conv_no_position, conv_fills_no_position,
     conv_psum_no_position}};
const ClassEntry kConvNoPosition2021{1,
                                     2,
                                     {0x63},
                                     1,
                                     0b11,
                                     0,
                                     nullptr,
                                     {"conv K-chunked 1-position (gen2021)", run_conv_no_position,
                                      conv_fills_no_position, conv_psum_no_position}};
const ClassEntry kConvKChunked{
    1, 4, {0xE5, 0xE7}, 2, 0b1011, 0, nullptr, {"conv K-chunked", run_conv, conv_fills, conv_psum}};
const ClassEntry kConvPositionOuter{
    1,     4, {0xE5, 0xE7}, 2,
    0b111, 0, nullptr,      {"conv position-outer", run_conv, conv_fills, conv_psum}};

}  // namespace tinycoral::chip::ops
