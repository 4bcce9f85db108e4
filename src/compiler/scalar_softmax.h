// Attention's softmax as a scalar-core program (issue 14; docs/llm.md "Attention in the chip's
// arithmetic", step 4): the int8 path's scalar_core_softmax (llm/int8_model.h) over score bytes in
// scalar memory, in the scalar core's float32 ALU and its special-function unit's exp2 and
// reciprocal (isa.md 2.11). Per head: m = the largest byte; for each position in order
// x = exp2(f32(b - m) * exp_mult), S += x, e = F2I(x * 255) as a byte; then 1 / S. The number of
// positions n is read from scalar memory, so one program serves every position of a sequence; the
// loops over positions are branches taken while p0 (t < n).
#pragma once

#include <vector>

#include "compiler/emitter.h"

namespace tinycoral::compiler {

struct ScalarSoftmax {
  // Head h's score bytes (the chip's uint8: int8 + 128; only differences matter) at word
  // scores_word + h * positions / 4, positions a multiple of 4; its exponentials' bytes replace
  // them in place.
  int heads = 0, positions = 0, scores_word = 0;
  std::vector<float> exp_mult;  // [head]: f32(s_score log2 e)
  int count_word = 0;           // n, the positions that count (1..positions), an int32
  int inv_word = 0;             // head h's 1 / S (float32) goes to word inv_word + h (its
                                // exp_mult waits there until then: one loop serves every head)
};

// The softmax's bundles; registers 12-27 and predicates 0, 3, 4 and 5 are its own. The loops take a
// word of four scores an iteration (docs/llm.md "The scores on the chip").
void emit_scalar_softmax(Emitter& e, const ScalarSoftmax& s);
// What the weighted sum over a value cache needs from the softmax (docs/llm.md "The weighted sum
// inside the scores' program"), computed after it on the scalar core: e's bytes past n zeroed in
// every head's row (the sum reads every position, and past n the row still holds scores), and
// the per-token multipliers m_j = f32(base_j (1 / S_h)), one FMUL each, as the host computes them.
struct ScalarValuePrep {
  int heads = 0, positions = 0, scores_word = 0, count_word = 0, inv_word = 0;  // as ScalarSoftmax
  int mult_word = 0;        // output j's multiplier goes to word mult_word + j
  std::vector<float> base;  // [output]
  std::vector<int> head;    // [output]: its head, or -1 for a padding row (multiplier 0)
};
// Registers 12-27 and predicate 5 are its own (the softmax's, free again after it).
void emit_scalar_value_prep(Emitter& e, const ScalarValuePrep& p);
// RoPE's per-token multipliers from RMSNorm's scale (docs/llm.md "The RoPE multipliers from r on
// the scalar core"): m_j = f32(base_j r), one FMUL each with base_j (a constant of the layer) as
// the immediate, the float32 product the host's rope_multiplier forms; r is the float32 at r_word.
// A padding output (no channel) gets 0, as the host's rows hold.
struct ScalarRopeMultipliers {
  int r_word = 0;
  int mult_word = 0;          // output j's multiplier goes to word mult_word + j
  std::vector<float> base;    // [output]
  std::vector<bool> padding;  // [output]
};
// Registers 16-18 and 20 are its own.
void emit_scalar_rope_multipliers(Emitter& e, const ScalarRopeMultipliers& m);
// The same products as a loop over constants already in scalar memory (docs/llm.md "The RoPE
// multipliers from r on the scalar core", the loop form): m_j = f32(smem[base_word + j] r) to
// word mult_word + j for j < n (n a multiple of 4; a padding output's constant is 0, so its m_j
// is 0 as r > 0), four outputs an iteration of a hardware loop (loads with post-increment, a
// register FMUL, stores with post-increment). base_word == mult_word computes them in place.
// Registers 16-26 are its own (r, the two addresses, four constants, four products).
void emit_scalar_rope_multipliers_loop(Emitter& e, int r_word, int mult_word, int base_word, int n);
// Pushes scalar-memory words [first, first + words) to the host output opened before (one load
// and one push per word, a hardware loop).
void emit_push_words(Emitter& e, int first, int words);

}  // namespace tinycoral::compiler
