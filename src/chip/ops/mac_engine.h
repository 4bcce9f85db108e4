// The op unit's main-loop engine shared by every arithmetic class (isa.md 2.1.3): it walks the main
// loop nest, advances the `in` and `par` TTUs once per step, accumulates one operand pair per step
// into up to 64 column accumulators, and emits an output group through the `out` TTU (one 4-byte
// word per step of `out`) each time all reduced loops complete. Classes differ only in what one
// step reads (OperandKind), how it combines (sum or max) and the output stage (requantize or
// spline); each class file in this folder states its choice and the evidence.
#pragma once

#include <cstdint>

#include "chip/tile.h"

namespace tinycoral::chip::ops {

enum class OperandKind : uint8_t {
  // `in` gives one 4-byte word x, `par` one 256-byte row W (64 columns x 4 bytes):
  // acc[c] += sum_b (x[b] - in_zp) * (W[c][b] - w_zp). FC, conv, depthwise (diagonal rows),
  // requantize and word copies (identity row).
  kWordTimesRow,
  // `in` gives one byte x, `par` one 64-byte lane (byte `unit % 4` of every column):
  // acc[c] += (x - in_zp) * (lane[c] - w_zp). MUL step 1, narrow (Cin <= 3) copies, MUL step 2.
  kByteTimesLane,
  // MUL step 1: like kByteTimesLane, but the lane byte of column 0 (operand b's byte) serves every
  // column: the wide FIFO holds one 4-byte word of b per row and every channel of the output word
  // is
  // the same product (isa.md 2.1.5 MUL).
  kByteTimesLaneBroadcast,
  // ADD's 16-bit mode: `in` gives two bytes zero-extended to 16 bits, `par` a row of 16-bit weights
  // (column c: weight for value 0 at bytes 0-1, for value 1 at bytes 2-3): acc[c] += x0*W0 + x1*W1.
  kHalfwordsTimesRow16,
  // Pooling: `in` unused, `par` one lane (one position, one channel per column): acc[c] op= lane[c]
  // - w_zp.
  kLaneOnly,
};

enum class Combine : uint8_t { kSum, kMax };
enum class OutputKind : uint8_t { kRequantize, kSpline };

struct EngineSpec {
  OperandKind operand = OperandKind::kWordTimesRow;
  Combine combine = Combine::kSum;
  OutputKind output = OutputKind::kRequantize;
  // Loops treated as reduced in addition to reduce_mask (MUL step 2 gathers 4 steps into one word
  // although its reduce_mask is 0, isa.md 2.1.3).
  uint8_t extra_reduce = 0;
  // Whether the loop nest has a position loop that re-reads one FIFO fill (see fifo_fill_count).
  // gen2021's cfg0 0x63 ops have none: every loop outside loop0 moves to the next fill.
  bool has_position_loop = true;
  // Whether a reduction interrupted within the op keeps its partial sums in the `psum` rows of
  // wide memory (keeps_partial_sums; the word-times-row classes, word_times_row.h).
  bool psum_rows = false;
};

void run_engine(const OpInstr& op, OpEnv& env, const EngineSpec& spec);

// Loop roles (docs/chip_ops.md "FIFO fills and bias groups"), as bit masks over the main loops:
//  - fill: with p = the innermost loop not reduced (the position loop, re-reading one fill), the
//    loops outside p; without a position loop, every loop outside loop0. A streamed FIFO moves to
//    its next fill whenever a fill loop advances.
//  - group: the non-reduced loops along which the parameters change (a fill loop, or a nonzero
//    `par` stride); the output group selects the bias row and the partial last group.
//  - slot: non-reduced loops inside the outermost reduced loop (partial sums kept open together).
struct LoopRoles {
  uint8_t fill = 0, group = 0, slot = 0;
};
LoopRoles loop_roles(const OpInstr& op, const EngineSpec& spec);
bool par_is_fifo(const OpInstr& op);
// Fills of the `par` FIFO the op consumes (OpClass::par_fifo_fills); 0 when parameters are
// resident.
uint32_t fifo_fill_count(const OpInstr& op, const EngineSpec& spec = {});
// Whether the op keeps partial sums in its psum rows (docs/chip_ops.md "Partial sums in wide
// memory"): spec.psum_rows, and a reduction stops and resumes within the op, because a reduced loop
// lies outside a slot loop (a K-chunked conv's chunks outside its positions) or, with psum_tflags
// bit 7 set, moves the FIFO to its next fill (a one-position K-chunked conv's chunks).
bool keeps_partial_sums(const OpInstr& op, const EngineSpec& spec);
// Fails the op unless every 256-byte row that a wide-memory walk of extent `e` (64-byte units)
// touches lies inside wide memory; `what` names the walk in the message.
void check_wide_walk(const OpTtu::Extent& e, OpEnv& env, const char* what);

// Output channels (accumulator columns) the engine computes in one group.
constexpr uint32_t kColumns = 64;

// Where the int32 bias of column c of output group g sits in the tile's bias store: byte
// kBiasStoreBase + 4 * (g * (out_ch + 1) + c). The base is the bias load's narrow word address 0x40
// (isa.md 2.5); groups are packed in arrival order (64-channel groups give the 256-byte rows the
// bias-load instruction writes).
constexpr uint32_t kBiasStoreBase = 0x40 * 4;

}  // namespace tinycoral::chip::ops
