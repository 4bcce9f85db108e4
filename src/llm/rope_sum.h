// q~'s RoPE sum (int8_rope.h's rope_sum) as the FC the scores' program runs in front of the scores
// (compiler::FcScoresInput; docs/llm.md "RoPE's sum in the scores' program"): output j =
// requant((P1_j - 0) + (P2_j - 0)) with the per-token multiplier f32(base_j r), clamps +-127,
// zero point 0. Group g (outputs 64 g .. 64 g + 63) reads K = 128 bytes from byte 128 g of the
// input row: P1's and P2's 64 bytes of its channels side by side, weights 1 on both diagonals. The
// multipliers change with r, so the program writes them per token: each group's aux block's
// first row (its 64 float32 multipliers).
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/fc_codegen.h"
#include "compiler/fc_layer.h"
#include "llm/int8_rope.h"

namespace tinycoral::llm {

// The FC over n channels (outputs padded to whole groups; their multipliers 0 until written) and
// its groups' input places (in_at).
compiler::FcLayer rope_sum_layer(const QuantizedRope& q, int n, std::vector<int>& in_at);
// Its input row's first 2 whole_groups(n) bytes from the products of n channels (the rest 0).
void rope_sum_input(const int8_t* p1, const int8_t* p2, int n, int8_t* row);
// Its multiplier rows for r where `at` places its groups: f32(base_j r) as rope_sum forms them.
compiler::FcRowWrite rope_sum_multipliers(const QuantizedRope& q, int n, float r,
                                          const compiler::FcPlacement& at);

}  // namespace tinycoral::llm
