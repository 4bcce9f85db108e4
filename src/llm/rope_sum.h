// RoPE's sums (int8_rope.h's rope_sum) as the FC the scores' program runs in front of the scores
// (compiler::FcScoresInput; docs/llm.md "RoPE's sum in the scores' program"): output j =
// requant((P1_j - 0) + (P2_j - 0)) with the per-token multiplier f32(base_j r), clamps +-127,
// zero point 0. Group g (outputs 64 g .. 64 g + 63) reads K = 128 bytes from byte 128 g of the
// input row: P1's 64 bytes of its outputs, then R's, R_i = P2_(i^1) (the pair-swapped P2, as the
// chain's products return it: RoPE's products in the chain), weights 1 on P1_o and R_(o^1). The
// multipliers change with r, so the program writes them per token: each group's aux block's
// first row (its 64 float32 multipliers). Its outputs are q~ and, with a key, k~ too
// (docs/llm.md "The key's sum on the chip"): the bytes of the key's column in the scores'
// weights (K = head_size padded to 64, the padding zero), each kv head's from a group boundary,
// or packed in kv_dim's groups (RopeSumShape).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"
#include "compiler/scalar_softmax.h"
#include "llm/int8_rope.h"

namespace tinycoral::llm {

// Which channel each output of the sum is: q's `q_channels` from output 0 (whole groups), then
// with kv_heads > 0 the key's channels from the next group boundary: each kv head's head_size
// from a group boundary of its own, or with `packed_keys` all kv_dim of them one after the other
// (the chain's 64-channel groups of k; a head may then start inside a group and straddle two).
struct RopeSumShape {
  int q_channels = 0;
  int kv_heads = 0, head_size = 0;
  bool packed_keys = false;
  int q_outputs() const;
  int key_outputs() const;  // the key's channels with their padding, in whole groups
  int outputs() const { return q_outputs() + key_outputs(); }
  // The output holding kv head h's first key channel.
  int key_at(int h) const;
  // Output o's channel: q's (o < q_outputs()), else the key's index in kv_dim; -1 for padding.
  int channel(int o) const;
};

// The FC (outputs padded to whole groups; their multipliers 0 until written) and its groups'
// input places (in_at). The rope only gives the layer its input scale; the multipliers carry q's
// and k's own.
compiler::FcLayer rope_sum_layer(const QuantizedRope& q, const RopeSumShape& s,
                                 std::vector<int>& in_at);
inline compiler::FcLayer rope_sum_layer(const QuantizedRope& q, int n, std::vector<int>& in_at) {
  return rope_sum_layer(q, RopeSumShape{n}, in_at);
}
// Every group of the sum has the same weights (ones on P1's diagonal and R's pair-swapped one; a
// padding output's
// multiplier is 0, so its weights do not matter), so the groups share one copy per tile
// (TileAllocator::place_sharing) and each keeps only its aux rows. The copies as one FC to cache:
// `copies` groups of those weights, multipliers 0.
compiler::FcLayer rope_sum_weight_copies(int copies);
// The aux rows of the groups `at` places (multipliers 0 until a token writes them, the weights'
// zero point), to cache with the copies.
// With `base` (one per output, the scores' program's mult_base), each group's 64 constants follow
// as a third row (compiler::FcScoresInput::base_rows, at unit + kMultBaseRowUnit), float32.
compiler::FcRowWrite rope_sum_aux_rows(const compiler::FcPlacement& at,
                                       const std::vector<float>& base = {});
// Its input row's first 2 outputs() bytes from the products (q's q_channels, the key's kv_heads x
// head_size; k_p1 and k_p2 unread without a key), P2 pair-swapped (R); the rest 0.
void rope_sum_input(const RopeSumShape& s, const int8_t* q_p1, const int8_t* q_p2,
                    const int8_t* k_p1, const int8_t* k_p2, int8_t* row);
// The same bytes with group g's 128 at byte slot[g] of `row` (slot[g] < 0: the group reads its
// products elsewhere, so the row has no place for them); the row's other bytes are left as they
// are.
void rope_sum_input(const RopeSumShape& s, const std::vector<int>& slot, const int8_t* q_p1,
                    const int8_t* q_p2, const int8_t* k_p1, const int8_t* k_p2, int8_t* row);
// The row places (in_at) of the sum's `groups` when the groups `elsewhere` (kept products: they
// read a resident row) take none: the others' 128-byte slots one after the other from byte 0,
// -1 for those elsewhere (each one of the groups, else an error). `end`: the bytes those slots
// take.
std::vector<int> rope_sum_slots(int groups, const std::vector<int>& elsewhere, int& end);
// The bytes of the scores' program's input row (before its count) with the sum in front: the
// longest of the scores' own row (`scores_row_bytes`), the sum's outputs (they land over it on the
// scores' tiles) and the slots of the groups that read the host's row (rope_sum_slots' `end`), at
// least one group's K, in whole 8 bytes.
int rope_scores_row_bytes(int scores_row_bytes, int sum_outputs, int slots_end);
inline void rope_sum_input(const int8_t* p1, const int8_t* p2, int n, int8_t* row) {
  rope_sum_input(RopeSumShape{n}, p1, p2, nullptr, nullptr, row);
}
// Its multiplier rows for r where `at` places its groups: f32(base_j r) as rope_sum forms them,
// q's channels from q, the key's from k (unread without a key).
compiler::FcRowWrite rope_sum_multipliers(const QuantizedRope& q, const QuantizedRope* k,
                                          const RopeSumShape& s, float r,
                                          const compiler::FcPlacement& at);
inline compiler::FcRowWrite rope_sum_multipliers(const QuantizedRope& q, int n, float r,
                                                 const compiler::FcPlacement& at) {
  return rope_sum_multipliers(q, nullptr, RopeSumShape{n}, r, at);
}

// The same multipliers made by the scalar core from r (compiler::emit_scalar_rope_multipliers):
// output o's base_o from q's or k's rotation as rope_sum_multipliers takes it, padding outputs
// marked, in output order (group g's 64 from word mult_word + 64 g, the bytes of
// rope_sum_multipliers' rows). The scalar-memory words (r_word, mult_word) are the caller's to set.
compiler::ScalarRopeMultipliers rope_sum_scalar_multipliers(const QuantizedRope& q,
                                                            const QuantizedRope* k,
                                                            const RopeSumShape& s);

}  // namespace tinycoral::llm
