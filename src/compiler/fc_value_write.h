// A new position's value vector written into the value cache by the chip itself (issue 14 step
// B.1, docs/llm.md "The value written by the chip"). The weighted sum's FC reads the cache as its
// weights with the positions as K: weight row kq of a group holds positions 4 kq .. 4 kq + 3, word
// c being output (channel) c with position 4 kq + b in byte b (stored + 128). So a position is byte
// pos % 4 of 64 words, a byte scatter no instruction is known to do. A transposing narrowToWide
// (tail bit 799, the pooling relays') does the transpose instead: from 4 position vectors in narrow
// memory, 4 positions innermost, it writes a row whose word c holds channel c of the 4 positions.
// Each group keeps one resident staging row S (position b of the current quad at bytes 64 b ..
// 64 b + 63) and per token
//   1. S into narrow memory (a quad buffer Q of 64 words),
//   2. the new vector (its 64 bytes at the start of S, where the parameter stream put them, or a
//      narrowToWide from where an earlier op left them in narrow memory) into Q at word
//      16 (pos % 4),
//   3. Q back into S (plain: the quad for the next token),
//   4. Q transposed into cache row pos / 4.
// Lanes of positions after pos in that row hold stale bytes of S; the sum meets them with e = 0.
// Only step 2's narrow address and step 4's wide address depend on pos: they are marked, so one
// program serves every position with those two fields rewritten (runtime::Program::patch_field).
// Correct by simulation only (docs/llm.md names the device unknowns).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"

namespace tinycoral::compiler {

struct FcValueWrite {
  // Each cache group's staging row (tile, wide unit) and its streamed bytes: the new position's
  // 64 stored bytes (the layer's column + 128, fc_parameters' bytes) from the row's start, then
  // 192 bytes that are never read (128).
  FcRowWrite vectors;
  std::vector<int> cache_units;  // each group's weight row 0 (positions 0..3), its tile's unit
  int rows = 0;                  // weight rows per group (K / 4)
  int position = 0;              // the position the marked fields hold
  // Where the vectors come from instead (non-empty: one entry per group): the narrow byte (a
  // multiple of 4) of the group's tile where its 64 bytes lie, e.g. among the pieces an FC's
  // outputs left there over the ring (a head of 48 channels from byte 48 h: the next head's bytes
  // then fill its padding channels, whose multipliers are 0). `vectors.bytes` is not streamed.
  std::vector<int> from_byte;
  // Narrow byte of the quad buffers (groups on one tile side by side, 256 bytes each); the
  // generator sets it.
  int narrow_at = 0;
};

// Position `position`'s column of every 64-output group of `layer` where `placement` puts it, each
// group staging in the row at wide unit staging_units[g] of its tile (resident, a multiple of 4,
// outside every group's parameters: the caller keeps it for this write alone).
FcValueWrite fc_value_write(const FcLayer& layer, const FcPlacement& placement,
                            const std::vector<int>& staging_units, int position);
// Narrow bytes the quad buffers take on a tile, from narrow byte 0.
int fc_value_write_narrow_bytes(const FcValueWrite& w);
// Before the vectors reach the staging rows (the parameter stream that brings w.vectors, or
// emit_value_vectors_from_narrow; nothing else in narrow memory at the quads, from_byte's vectors
// included): every staging row into its quad buffer, fenced.
void emit_value_copies(Emitter& e, const FcValueWrite& w);
// With `from_byte`, after emit_value_copies and once the vectors lie there: each group's 16 words
// from there into its staging row's start, fenced (in place of the stream); then
// emit_value_landings.
void emit_value_vectors_from_narrow(Emitter& e, const FcValueWrite& w);
// After that stream has landed: steps 2-4, fenced (the scalar core waits for them). Marks, per
// group in order, step 2's n.addr; then, per group in order, step 4's w.addr.
void emit_value_landings(Emitter& e, const FcValueWrite& w);
// The values of those marked fields for position `pos`, in mark order.
std::vector<int64_t> fc_value_write_fields(const FcValueWrite& w, int pos);
// Narrow words from a quad's start to position pos's slot in it (its 16 words): each landing's
// marked n.addr moves by this, each row's w.addr by fc_weight_row_unit.
constexpr int fc_value_slot_word(int pos) { return 16 * (pos % 4); }

// Where each cache group finds its vector once a chain's tail has broadcast v~'s pieces (issue 14
// step B.3, docs/llm.md "v~ on the chip"). v's follower leaves kv_dim's channels in 64-channel
// pieces (piece i: channels 64 i .., v's padding outputs past kv_dim) on their own tiles; the tail
// sends every piece to each cache group's tile side by side from narrow byte `base` (piece i at
// base + 64 i: ffn_broadcast's to_byte), so channel c lies at base + c on all of them. The cache
// groups follow the heads (head h's whole_groups(head_size) groups in order, reading its kv head's
// channels), so group j of head h takes from_byte = base + head_size (h / (n_heads / n_kv_heads))
// + 64 j: a head may straddle two pieces, and kv_dim's groups need no per-head layout. A window
// may reach past its head (the next head's channels, v's padding or bytes past the pieces land in
// the group's padding channels, which the sum's zero multipliers ignore); `end` is the narrow byte
// (a multiple of 64) past the pieces and every window, the room the caller keeps there.
struct ValueVectorsSideBySide {
  std::vector<int> from_byte;  // FcValueWrite::from_byte, one per cache group
  int end = 0;
};
ValueVectorsSideBySide value_vectors_side_by_side(int n_heads, int n_kv_heads, int head_size,
                                                  int base);

}  // namespace tinycoral::compiler
