// One output column of resident FC weights rewritten by the chip itself (issue 14: the llm path's
// new key, docs/llm.md "The key written by the chip"). In the FC layout an output is a column, one
// 4-byte word in each of its group's K / 4 wide weight rows, and a narrowToWide writes rows from
// their start. So each group's tile copies its weight rows into narrow memory, the column's words
// arrive with the program's parameters in the group's first weight row, a wideToNarrow whose
// narrow walk steps one row (64 words) per word scatters them into the column of the copy, and the
// copy goes back over the rows. The host sends 256 bytes per group instead of the whole group.
// Correct by simulation; whether a device reads resident parameter rows back into narrow memory
// is open (docs/llm.md).
#pragma once

#include <vector>

#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"

namespace tinycoral::compiler {

struct FcColumnWrite {
  // Each group's first weight row (tile, wide unit) and its bytes as streamed: the column's K / 4
  // words (w + 128, fc_parameters' bytes) from the row's start, the rest 128 (a zero weight).
  FcRowWrite words;
  int rows = 0;    // weight rows per group (the weights' K / 4, FcLayer::op_k)
  int column = 0;  // the output within each group (0..63)
  // Where the words come from instead (non-empty: one entry per group): the byte among the
  // output pieces of the FC in front of the scores (FcScoresInput, fc_batch_codegen.h; piece i's
  // bytes at 64 i) where the column's words start, a multiple of 4 (the llm path's key sum on the
  // chip: a kv head's key, from a group boundary or inside one). The pieces reach every scores
  // tile over the ring and a narrowToWide puts a wide row's worth from there into the group's
  // first weight row, so `words.bytes` is not streamed.
  std::vector<int> from_byte;
  // The rows whose column the words replace (0: all `rows`); the rows past them keep their
  // column (a key of head_size < K: its padding rows stay zero weights, and the bytes after the
  // head's among the pieces, the next head's key, are never scattered). The scores rely on those
  // zeros staying: a head's q read may run past head_size into the padding rows (the next head's
  // q~ bytes), so nothing but the caching run may write them.
  int scattered_rows = 0;
  int scattered() const { return scattered_rows ? scattered_rows : rows; }
  // Narrow byte of the copies (the generator sets it: 0 where the words are streamed, past the
  // query row and the FC's outputs where they come from that FC).
  int narrow_at = 0;
};

// Column `column` of every 64-output group of `layer` where `placement` puts it.
FcColumnWrite fc_column_write(const FcLayer& layer, const FcPlacement& placement, int column);
// Narrow bytes the copies take on a tile, from narrow byte 0 (groups on one tile side by side).
int fc_column_write_narrow_bytes(const FcColumnWrite& w);
// Before the parameter stream that brings w.words (nothing else in narrow memory from byte 0):
// every group's weight rows into narrow memory, fenced.
void emit_column_copies(Emitter& e, const FcColumnWrite& w);
// With `from_byte`, after the FC in front of the scores broadcast its pieces (piece i at narrow
// byte 64 i of every scores tile): each group's words from there into its first weight row,
// fenced; then emit_column_scatters.
void emit_column_words_from_narrow(Emitter& e, const FcColumnWrite& w);
// After that stream has landed: the words into their column of each copy, then the copies back
// over the rows, fenced (the scalar core waits for it). Each group's scatter's n.addr (its copy's
// narrow word + column) is marked (Emitter::mark), in group order: nothing else in these
// instructions depends on the column.
void emit_column_scatters(Emitter& e, const FcColumnWrite& w);

}  // namespace tinycoral::compiler
