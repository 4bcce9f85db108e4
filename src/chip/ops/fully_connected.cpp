// FULLY_CONNECTED with resident weights (isa.md 2.1.5; tinycoral reproduces all 963 compiled FC
// ops, device-verified): loop0 walks the input words (K/4), loop3 the 64-output passes; every step
// is one input word times one 256-byte weight row; bias of the pass (cfg4) then requantization.
// Also Google's gen2020 MobileNet classifier (16 tiles x 64 outputs, docs/chip_ops.md).
#include "chip/ops/mac_engine.h"
#include "chip/ops/op_class_table.h"

namespace tinycoral::chip::ops {
namespace {
// Partial sums of interrupted reductions go to the psum rows (docs/chip_ops.md "Partial sums in
// wide memory"): gen2021's K-chunked convs are this class.
constexpr EngineSpec kSpec{
    OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kRequantize, 0, true, true};
void run_fully_connected(const OpInstr& op, OpEnv& env) { run_engine(op, env, kSpec); }
uint32_t fully_connected_fills(const OpInstr& op) { return fifo_fill_count(op); }
bool fully_connected_psum(const OpInstr& op) { return keeps_partial_sums(op, kSpec); }
// Without a position loop every loop outside loop0 moves the weight FIFO to its next fill.
constexpr EngineSpec kNoPosition{
    OperandKind::kWordTimesRow, Combine::kSum, OutputKind::kRequantize, 0, false, true};
void run_fully_connected_no_position(const OpInstr& op, OpEnv& env) {
  run_engine(op, env, kNoPosition);
}
uint32_t fully_connected_fills_no_position(const OpInstr& op) {
  return fifo_fill_count(op, kNoPosition);
}
bool fully_connected_psum_no_position(const OpInstr& op) {
  return keeps_partial_sums(op, kNoPosition);
}
}  // namespace

// gen2021 drops the one-iteration loops: FC = dp 1, cfg0 0x65, reduce 1, loops (K/4, passes)
// (Google's gen2021 MobileNet v1 classifier, same constants as gen2020's; docs/chip_ops.md).
const ClassEntry kFullyConnected2021{1,
                                     1,
                                     {0x65},
                                     1,
                                     0b1,
                                     0,
                                     nullptr,
                                     {"FULLY_CONNECTED (gen2021)", run_fully_connected,
                                      fully_connected_fills, fully_connected_psum}};
// A K too long for one pass of the FIFO reduces over two loops: dp 2, cfg0 0x65, reduce 0b11,
// loops (32 rows, 32 fills) for the 4096 softmax probabilities of bright_64x64 (word 2927, the
// x_sum/y_sum FULLY_CONNECTED; par.fifo 32), like gen2021's 1-position conv (conv.cpp, cfg0 0x63).
const ClassEntry kFullyConnectedLongK{
    1,
    2,
    {0x65},
    1,
    0b11,
    0,
    nullptr,
    {"FULLY_CONNECTED, two reduced loops", run_fully_connected_no_position,
     fully_connected_fills_no_position, fully_connected_psum_no_position}};
const ClassEntry kFullyConnected{
    1,       3,
    {0xA5},  1,
    0b101,   0,
    nullptr, {"FULLY_CONNECTED", run_fully_connected, fully_connected_fills, fully_connected_psum}};

}  // namespace tinycoral::chip::ops
