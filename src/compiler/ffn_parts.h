// Pieces of the fused FFN programs shared by the batch-1 generator (fc_codegen.cpp) and the batched
// one (fc_batch_codegen.cpp): the gate on the tiles (LOGISTIC on the non-linear unit, two MULs),
// the broadcast of 64-byte pieces from tiles to tiles and their move into scalar memory.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "container/executable.h"

namespace tinycoral::compiler {

// Narrow byte addresses of the gate's buffers on every gate tile (words of 4 bytes each; products
// holds 4 words per word of the others).
struct FfnGateBuffers {
  int h1, h3, g, a, m, products;
};

// The identity row (4 words at narrow `identity`, copied to a wide row) and LOGISTIC's spline,
// once per program before ffn_gate.
void ffn_gate_setup(Emitter& e, uint32_t tiles, int identity);
// m = MUL(MUL(h1, LOGISTIC(h1)), h3) over `words` words in the FfnLayer's quantization (m in
// w2's input quantization), on `tiles`; ends with the last op's fence.
void ffn_gate(Emitter& e, uint32_t tiles, const FfnGateBuffers& buf, int words, const FfnLayer& f);

// Piece i (64 bytes at narrow word pieces[i].second of tile pieces[i].first) to narrow byte
// to_byte + stride i of every tile in `compute` (to_byte and stride multiples of 4, 0 < stride
// <= 64); then the fences before the ops. A stride below 64 lands piece i + 1 over piece i's
// tail: each receiving tile stores the pieces in program order (its narrow writes one after the
// other, as the pieces come over the ring).
void ffn_broadcast(Emitter& e, uint32_t compute, const std::vector<std::pair<int, int>>& pieces,
                   int& ring_ordinal, int to_byte = 0, int stride = 64);

// The same in 256-byte pieces, each 4 rows of 64 bytes: block i (64 words at narrow word
// from_word of its tile) to every tile in `compute`, its rows at narrow words to_word,
// to_word + stride_words, ... (the batched FFN's m: 4 rows of one hidden group into w2's X).
struct FfnBlock {
  int tile, from_word, to_word;
};
void ffn_broadcast_blocks(Emitter& e, uint32_t compute, const std::vector<FfnBlock>& blocks,
                          int stride_words, int& ring_ordinal);

// generate_ffn's stages after its input: the input pieces ((tile, narrow word), 64 bytes each, in
// K order) broadcast to w1/w3's tiles, their op, the gate, m to w2's tiles and w2's op; y's
// groups stay on their tiles (`y`: (tile, narrow byte) in group order, from y_at). It takes narrow
// bytes below narrow_end on every tile it uses; the pieces are read first, so they may lie
// anywhere. `ring_ordinal` counts the ring producers, continued.
struct FfnFromPieces {
  std::vector<std::pair<int, int>> y;
  int y_at = 0, narrow_end = 0;
};
FfnFromPieces emit_ffn_from_pieces(Emitter& e, const FfnLayer& f, const FcPlacement& up,
                                   const FcPlacement& down,
                                   const std::vector<std::pair<int, int>>& in_pieces,
                                   int& ring_ordinal);

// A program's outputs in the order their stages push them to the host: each output's layer and
// its DMA hint. Recorded where the stage is emitted, so a program holding more than one layer
// (issue 14 D.2b) lists them in its bitstream's order.
struct OutputList {
  std::vector<container::Layer> layers;
  std::vector<container::DmaHint> hints;
  void add(container::Layer layer, int bytes);
};
// An FC chain's output of n bytes (its last layer's grid): tile t's 64 outputs at byte 64 t.
container::Layer chain_output_layer(const FcLayer& last, int n);
// The EXECUTION_ONLY executable of `program`: `in`'s input (in.k bytes), then `outs` in order.
container::Executable execution_with_outputs(container::Bitstream program, const FcLayer& in,
                                             const OutputList& outs, int narrow_bytes);

// More program after an FFN chain's outputs, in the same program (generate_ffn_chain_softmax):
// the chain's input pop also takes `input_bytes` after the chain's own bytes and tables, from the
// next whole 256-byte packet on; the chain's outputs (and r) leave without the program's end, then
// `emit` writes the rest, the end included. It gets the chain's ring ordinal (the producers so far,
// which it continues) and FfnChainTailAt; it returns the narrow bytes per tile it uses. It records
// its outputs in *outputs as it emits them.
struct FfnChainTailAt {
  int input_at = 0;  // the byte of the pop where the tail's input starts
  // The narrow byte where the chain's table products lie on their tiles (FcTableProducts;
  // fc_product_bytes' bytes from there; -1 without products).
  int products_at = -1;
  // Narrow bytes per tile the chain used (its products and its multipliers from r included): a
  // tail that keeps the chain's outputs where they are puts its own bytes from here on.
  int narrow_end = 0;
  // Each follower's groups' outputs (tile, narrow byte), still there when the tail starts (the
  // chain's outputs are copied to their wide rows to leave); an FC chain's layers likewise.
  std::vector<std::vector<std::pair<int, int>>> follower_out;
  // An FcChain's input pieces (tile, narrow word) as its first layer read them from the host,
  // below every layer's bytes, so still there when the tail starts (an FfnChain's: none).
  std::vector<std::pair<int, int>> input_pieces;
  int tables_at = 0;              // the byte of the pop where the products' tables lie
  OutputList* outputs = nullptr;  // the program's, the chain's own first
};
struct FfnChainTail {
  int input_bytes = 0;
  // The byte of the tail's input where a 64-byte block with r at its bytes 4..7 lies (the
  // scores' count block), for an FcChain whose groups after r take r from the input; -1: none.
  int r_block = -1;
  std::function<int(Emitter& e, int& ring_ordinal, const FfnChainTailAt& at)> emit;
};
FfnChainPrograms generate_ffn_chain(const FfnChain& chain, const FcPlacement& up,
                                    const FcPlacement& down, const FfnChainTail* tail);
// An FFN chain's input already on the tiles (a chain nested in another program, issue 14 D.2b):
// the pieces (tile, narrow word) w1 and w3 read and the extra input's, instead of the pop's; the
// products' tables and the tail's input at these bytes of the outer program's pop.
struct FfnChainFrom {
  std::vector<std::pair<int, int>> up_pieces, extra_pieces;
  int tables_at = 0, tail_input_at = 0;
  // The chain's own narrow bytes (before its tail's) stay below this byte: the pieces lie above
  // (LayoutRejected where they would not).
  int narrow_below = 0;
};
struct FfnChainEmitted {
  int narrow_end = 0;  // narrow bytes per tile used
  int input_k = 0;     // the pop's bytes (with the input from the host)
  int output_n = 0;    // the chain's output bytes (whole groups)
};
// generate_ffn_chain's stages into `e`: from the host's input without `from`, else from the
// tiles without the program's start; the ring ordinal continued, the outputs (the tail's too)
// recorded in `outs`. The executables are the caller's.
FfnChainEmitted emit_ffn_chain(Emitter& e, const FfnChain& chain, const FcPlacement& up,
                               const FcPlacement& down, const FfnChainTail* tail,
                               const FfnChainFrom* from, int& ring_ordinal, OutputList& outs);
// generate_fc_chain's program with a tail, as above (the products' narrow base is where
// products_stage put them).
FfnChainPrograms generate_fc_chain(const FcChain& chain, const FfnChainTail* tail);

// 64-byte pieces of narrow memory to scalar memory through the ring, in order: (tile, narrow
// byte, scalar-memory word); `ordinal` counts the ring producers so far. Then
// scalar_memory_fence, before the scalar core reads them.
void pieces_to_scalar_memory(Emitter& e, const std::vector<std::array<int, 3>>& pieces,
                             int& ordinal);
// The fences after `pieces` such pieces: the scalar core waits for their bytes.
void scalar_memory_fence(Emitter& e, int pieces);

// Per-token multipliers m_j = f32(base_j r) of an FC's groups, made on the scalar core from r
// (a float32 at scalar-memory word r_word) and moved into each group's multiplier row: the RoPE
// sums' form (docs/llm.md "The RoPE multipliers from r on the scalar core"), which the scores'
// programs and the chains share. The products go to scalar-memory words 0..n-1 (n = 64 a group),
// then through tile 0's narrow bytes from narrow_at (an infeed from scalar memory, the ring to
// the groups' other tiles, the same bytes there) into the rows. With resident constants (each
// group's 64 base_j as float32, 0 for padding, in the row at const_unit[g] of its tile) the loop
// over them is taken where it takes fewer bytes. `pending` pieces moved into scalar memory before
// and not fenced yet join the fence before the products. Defined in fc_batch_codegen.cpp.
struct MultipliersFromR {
  std::vector<int> tile, row;   // each group's tile and multiplier row (its first aux row)
  std::vector<int> const_unit;  // each group's constants' row; empty: not resident
  std::vector<float> base;      // [64 a group]
  std::vector<bool> padding;    // [64 a group]: multiplier 0
};
void emit_group_multipliers_from_r(Emitter& e, const MultipliersFromR& m, int r_word, int pending,
                                   int narrow_at, int& ordinal);
// Where a 64-byte block with r at its bytes 4..7 goes in scalar memory when r comes from the
// host (the count block's piece): the top 16 words, r at the second.
constexpr int kRPieceWord = kScalarMemoryWords - 16;

}  // namespace tinycoral::compiler
