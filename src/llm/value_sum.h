// Attention's weighted sum with WeightedSum::kValueCache as one FULLY_CONNECTED program per layer
// (int8_model.h; docs/llm.md "The weighted sum on the chip"): outputs are heads x head_size (head h
// at h * hs_padded, its group(s) reading head h's exponentials), K is the positions, the weights
// are the v~ cache (position t is column t) and each output's multiplier is the per-token
// f32(base_j (1 / S_h)). Each token's program first streams every multiplier and the columns up
// to its own (value_sum_prefix; compiler::generate_fc_batch with a parameter write), then sums.
#pragma once

#include <cstdint>
#include <vector>

#include "compiler/fc_codegen.h"

namespace tinycoral::llm {

struct ValueSumShape {
  int heads = 0, kv_heads = 0, head_size = 0, positions = 0;  // positions: seq_len
  int hs_padded() const { return (head_size + 63) / 64 * 64; }
  int k() const { return (positions + 63) / 64 * 64; }  // the FC's K
  int outputs() const { return heads * hs_padded(); }
  int row_bytes() const { return heads * k(); }  // the input: head h's e at h * k()
};

// The layer with zero weights, the output stage of wo's input (zero point 0, clamps +-127) and
// multipliers 0; e is the input (uint8, zero point 0). `in_at` gets each group's input place.
compiler::FcLayer value_sum_layer(const ValueSumShape& s, std::vector<int>& in_at);
// Position t's v~ (kv_dim bytes) as column t of every head's outputs.
void set_value_column(const ValueSumShape& s, int t, const int8_t* v, compiler::FcLayer& l);
// Head h's multipliers f32(base[h * hs + i] inv_sum[h]), one float32 product as
// weighted_sum_head computes it.
void set_value_multipliers(const ValueSumShape& s, const float* base, const float* inv_sum,
                           compiler::FcLayer& l);
// The layer cut to its first whole_groups(n) positions: a group's parameter stream for fewer
// positions is a prefix of its stream for all (multipliers, the weights' zero points, then the
// weights four positions at a time), so caching this one at the same placement writes every
// multiplier and the columns of positions < n, and leaves the rest as they are.
compiler::FcLayer value_sum_prefix(const compiler::FcLayer& l, int n);
// The program's input row from e (heads rows of `e_stride` bytes, positions >= n zeroed).
void value_sum_input(const ValueSumShape& s, const uint8_t* e, size_t e_stride, int n,
                     uint8_t* row);

}  // namespace tinycoral::llm
