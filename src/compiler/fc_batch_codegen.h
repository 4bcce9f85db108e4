// FULLY_CONNECTED over a batch: Y[M][N] = requant(X[M][K] W^T) in one program, the weights resident
// where an FcPlacement put them (the same parameter stream and caching program as generate_fc, so
// a batch program and a batch-1 program can share one cached copy). Our own form, not
// edgetpu_compiler's (which cannot batch FULLY_CONNECTED; tinycoral ran a 1x1 CONV_2D instead,
// reference frontend.md 2.2): it is a 1x1 convolution over M positions whose output channels are
// spread over the tiles as the FC's groups are.
//
// Data path: the host's M x K bytes are streamed in 256-byte pieces straight into narrow memory of
// every compute tile (one packet to all of them, as the CONV_2D generator streams image rows), so
// each tile holds the whole X at narrow byte 0; each op (one per distinct parameter unit, slot and
// output stage) walks K/4 words for each of the M rows over its group's weight rows and writes M x
// 64 outputs after X; every group's M x 64 bytes go to the host through the scalar core in group
// order. Nothing limits K but memory, so K > 1024 is covered too (the batch-1 FC generator's
// scatter over K/64 input tiles stops at 1024).
#pragma once

#include <string>
#include <vector>

#include "compiler/fc_codegen.h"
#include "compiler/fc_column_write.h"
#include "compiler/fc_layer.h"
#include "compiler/fc_value_write.h"
#include "container/executable.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {

// Rows (M) a batch program can take for an input of K bytes with `slots` groups per tile: X and the
// outputs must fit one tile's narrow memory. `row_bytes` (0: K) is X's row when groups read parts
// of it (FcPlacement::in_at).
int fc_batch_max_rows(int k, int slots, int row_bytes = 0);

// Why this shape is outside the batch generator, or "". K is a multiple of 64; a layer's op may
// run over fewer of its bytes (FcLayer::weight_k, a multiple of 4: its groups' units and reads
// count those). The (n, k) form is a layer of K weights.
std::string fc_batch_unsupported(int n, int k, int rows, int slots, int row_bytes = 0);
std::string fc_batch_unsupported(const FcLayer& layer, int rows, int slots, int row_bytes = 0);

// The execution program (EXECUTION_ONLY) for `rows` rows. Input "x" is [rows][K] bytes, or
// [rows][row_bytes] when the placement names input places: group g's op then reads op_k bytes of
// each row from byte in_at[g] (a multiple of 4, in_at[g] + op_k <= row_bytes; the llm batch path's
// u, each head reading its slice of v; the scores, each head's bytes of q~). The output is
// [G][rows][64] bytes: group g's 64 outputs of every row, groups in order (fc_batch_output_index).
// The caller caches the parameters first with fc_caching(layer, placement) (or generate_fc's
// caching program of the same layer and placement) and runs this program without a caching program;
// its caching token is 0. With `write` (FcParameterWrite, below), the program first streams write's
// parameters into the units its placement names and is STAND_ALONE with parameters
// fc_parameters(write->layer) (the llm value sum's per-token column and multipliers). Throws Error
// for an unsupported shape.
struct FcParameterWrite;
container::Executable generate_fc_batch(const FcLayer& layer, const FcPlacement& placement,
                                        int rows, int row_bytes = 0,
                                        const FcParameterWrite* write = nullptr);

// Attention's scores and their softmax in one program (issue 14; docs/llm.md "The scores and the
// softmax on the chip"): a one-row generate_fc_batch over `layer` (heads x positions outputs, head
// h's at h * positions, positions a multiple of 64) whose output groups go to scalar memory
// instead of the host; there the scalar core computes each head's softmax (scalar_softmax.h) over
// the first n positions and returns the exponentials' bytes and 1 / S. Input "x": [row_bytes]
// (the groups' places, FcPlacement::in_at) then kSoftmaxCountBytes whose first four are n, a
// little-endian int32 as the chip sees it. Output: heads x positions bytes (e, uint8; bytes past n
// mean nothing), then heads float32 1 / S. Throws Error where it does not fit (scalar memory holds
// the scores, 1 / S and n: fc_batch_softmax_unsupported).
constexpr int kSoftmaxCountBytes = 64;
std::string fc_batch_softmax_unsupported(int heads, int positions);
// With `write` (non-null), the program first streams write's parameters into the units its
// placement names (emit_fc_parameter_stream: the llm path's new key, the groups of its 64
// positions) and is STAND_ALONE with parameters fc_parameters(write->layer): one run per token
// instead of a caching run and the scores.
struct FcParameterWrite {
  FcLayer layer;
  FcPlacement at;
};
// With `first` (non-null), an FC runs before the scores over the input row and its outputs become
// the scores' input (FcScoresInput, below); with `rows`, single parameter rows are streamed after
// write's parameters (as generate_fc_batch_attention's). With `columns`, one column of the scores'
// groups is rewritten by the chip instead (fc_column_write.h: the new key without its groups):
// its words are streamed first, the program is STAND_ALONE, and it uses narrow memory before the
// scores do.
// Returned with the fields where the position of the key or row written enters the program
// (Emitter::mark), so that one program serves every position of a 64-position group (the llm
// path's ChipTransformer: the fields rewritten per run, runtime::Program::patch_field):
// `column_marks`, with `columns`, each group's scatter n.addr (emit_column_scatters, at
// columns->column), in group order; `row_marks`, with `rows`, each row's wide address (its ring
// consumer's addr, 2 + unit), in rows' order. Nothing else in the instructions depends on the
// column or on the rows' units.
struct FcScoresInput;
struct FcScoresProgram {
  container::Executable execution;
  std::vector<isa::EncodedField> column_marks, row_marks, value_marks;
};
FcScoresProgram generate_fc_batch_softmax(const FcLayer& layer, const FcPlacement& placement,
                                          int row_bytes, const std::vector<float>& exp_mult,
                                          const FcParameterWrite* write = nullptr,
                                          const FcScoresInput* first = nullptr,
                                          const FcRowWrite* rows = nullptr,
                                          const FcColumnWrite* columns = nullptr);

// The scores and their softmax after an FFN chain in the same program (issue 14's joined run,
// docs/llm.md "The scores after the chain in one program"): generate_ffn_chain's program, its
// outputs (and r) leaving without the program's end, then generate_fc_batch_softmax's part over
// `layer`, whose query row and count do not come from a pop of their own but from the chain's pop:
// the input is the chain's (its FFN input, extra bytes and tables), zeros up to the next whole
// 256-byte packet, then the row (row_bytes) and kSoftmaxCountBytes with n. Outputs: the chain's,
// r (with chain.rms), then e and 1 / S as generate_fc_batch_softmax's. Caching as the two programs'
// (the chain's caching programs; fc_caching for the scores). In scalar memory the scores, 1 / S
// and the count lie from word 0 up, below the chain's x and r (chain_rms_x_word): what does not
// fit is refused (ffn_chain_softmax_unsupported, rms_groups: the groups of chain.rms's follower,
// 0 without r; sum_outputs: the multipliers from r, words 0 up, of the FC in front). With `first`
// the FC in front of the scores runs as in generate_fc_batch_softmax (the llm path's RoPE sum of
// q~ and the key): its resident inputs may be rows the chain wrote in this run
// (FcTableProducts::kept_row), and its multipliers from r need r_word (the chain's r at
// kChainRmsRWord; r in the row is refused). With `columns` (from_byte only: no parameters are
// streamed) the key's column is written from that FC's outputs. No parameter writes.
// With `moved` (one entry per group of `first`, whose K must be 128: a slot holds P1 and R), the
// groups that do not read a resident row take their input from the chain's table products instead
// of the host's row: group g reads entry moved[g] of chain.products.groups (its P1 and R, -1 for a
// resident group), moved over the ring from the products' tile into its row slot (in_at; the moved
// groups' slots follow each other from byte 0, as llm::rope_sum_slots gives them). The host's row
// is then not sent: after the chain's input comes the count block alone, so a scores group reading
// past the FC's outputs (64 bytes per group of `first`) is refused: those bytes hold what the chain
// left there.
// With `sum` (FcValueSum, below) the tail goes on after the softmax as generate_fc_batch_attention
// does, through the same code (the value prep, e and the multipliers to the sum's tiles, the sum,
// wo where sum->out is given): the program then returns the chain's outputs, r, and the sum's (or
// wo's) [G][64] bytes instead of e and 1 / S. Scalar memory as that program's (e padded to 256
// bytes, the multipliers, 1 / S, the count from word 0), below the chain's x and r, or refused.
// With `values` (FcChainValueWrite, below) the tail first writes the new position's v~, which
// the chain computed, into the value cache (fc_value_write.h), before anything else in the tail:
// the staging rows into their quads, v~'s pieces (the outputs of `values->groups` of the chain's
// layer `values->layer`, where the chain left them) broadcast side by side to the cache groups'
// tiles above the chain's narrow bytes, each group's window into its staging row, the landings.
// So the sum that follows reads the current position's v~ written in the same run. The write's
// narrow bytes are free again once it has landed (the scores, e and the sum come after it).
// Marks (FfnChainPrograms::marks): the column's scatters (group order), then the write's
// (fc_value_write_fields' order: the landings' n.addr per group, then the rows' w.addr per group).
// With `rest` (FcLayerRest, below; only with `sum` and its `out`) the layer goes on after wo in
// the same program: wo's bytes still leave as the sum's output, then the rest's.
struct FcValueSum;
struct FcChainValueWrite;
struct FcLayerRest;
std::string ffn_chain_softmax_unsupported(int heads, int positions, int rms_groups,
                                          int sum_outputs = 0);
FfnChainPrograms generate_ffn_chain_softmax(
    const FfnChain& chain, const FcPlacement& up, const FcPlacement& down, const FcLayer& layer,
    const FcPlacement& placement, int row_bytes, const std::vector<float>& exp_mult,
    const FcScoresInput* first = nullptr, const FcColumnWrite* columns = nullptr,
    const std::vector<int>& moved = {}, const FcValueSum* sum = nullptr,
    const FcChainValueWrite* values = nullptr, const FcLayerRest* rest = nullptr);
// The same tail after generate_fc_chain's program (the llm path's layer 0: its q, k, v and u, no
// RMSNorm on the chip): the input is the chain's (layer 0's input, its RoPE tables), zeros up to
// the next whole 256-byte packet, then the row and count (or with `moved` the count alone);
// outputs the chain's, then e and 1 / S. The multipliers from r read r in the count block (bytes
// 4..7, r_word -1: nothing else lies at the top of scalar memory), and so do the chain's groups
// after r (FcChain::after_r: the llm path's layer-0 v~). With `rest` (x_follower -1: x_q is the
// chain's input), the layer goes on after wo as generate_ffn_chain_softmax's.
FfnChainPrograms generate_fc_chain_softmax(
    const FcChain& chain, const FcLayer& layer, const FcPlacement& placement, int row_bytes,
    const std::vector<float>& exp_mult, const FcScoresInput* first = nullptr,
    const FcColumnWrite* columns = nullptr, const std::vector<int>& moved = {},
    const FcValueSum* sum = nullptr, const FcChainValueWrite* values = nullptr,
    const FcLayerRest* rest = nullptr);

// An FC in front of the scores (the llm path's RoPE sum, docs/llm.md "RoPE's sum in the scores'
// program"): it reads the program's input row (group g K bytes from at.in_at[g]) on its own
// tiles, and its group g's 64 outputs go over the ring to narrow byte 64 g of every scores tile,
// replacing the row's first bytes: the scores read them as their input (the bytes after them,
// up to the scores' row, meet zero weight columns or are the row's own). Its output zero point is
// the scores' input zero point. The count stays at the row's end as before.
// With `resident`, some of its groups read their K bytes not from the row but from a resident
// wide row of their own tile (the llm path's q products, which the program computing q left
// there: FcTableProducts::kept_row): group `group` from byte `byte` of the row at unit `row`. The
// program reads those rows into narrow memory once the host's row has arrived; nothing crosses
// the ring for them and they are not returned. Such a group's in_at need only be a valid place
// in the row (it is not read): the host's row needs no slot for it (the llm path ends its row
// after the groups that read it).
struct FcResidentInput {
  int group = 0, row = 0, byte = 0;
};
// With `mult_base` (one per output), the program makes the FC's per-token multipliers itself:
// r, a float32 at bytes 4..7 of the input's count (kSoftmaxCountBytes), goes to scalar memory,
// the scalar core forms f32(mult_base_j r) (0 where mult_padding; emit_scalar_rope_multipliers),
// and they reach each group's multiplier row (its first aux row) as the weighted sum's do: an
// infeed from scalar memory to tile 0, the ring to the FC's other tiles, a narrowToWide per
// group. The host then streams no multiplier rows (the llm path's RoPE multipliers from r).
// With `r_word` >= 0 (only after a chain that computed r: generate_ffn_chain_softmax), r is read
// at that scalar-memory word instead, and the count's piece is not moved (it would land on the
// chain's x and r). Only kChainRmsRWord, where the chain's RMSNorm leaves r, is accepted.
// With `base_rows`, group g's 64 constants (float32, 0 for padding) are also resident: the row at
// wide unit at.param_units[g] + kMultBaseRowUnit of its tile (after its two aux rows; the caller
// caches them), and the program takes them over the ring into scalar memory (one producer each,
// one outfeed) and loops over them; without, a bundle per output with the constant as its
// immediate. The caller sets it where fc_multipliers_loop_pays says so, before it places the
// groups (only then does a group need the third row).
constexpr int kMultBaseRowUnit = kFcAuxUnits;
// Whether the loop over resident constants takes fewer instruction bytes than the bundles for
// multipliers from r with these padding flags (one per output), `pending` pieces already on their
// way to scalar memory (emit_group_multipliers_from_r's: 1 where r comes with the row, 0 after a
// chain; with none, the loop alone pays a scalar-memory fence): counted on both forms
// (Emitter::counting). An instruction's size follows from its mnemonic, so the count depends on
// the outputs' count, padding and whether pieces are pending alone, not on where the groups are
// placed or what r_word is. False where the outputs are not whole groups or do not fit below r's
// piece in scalar memory (the generator refuses the multipliers from r there).
bool fc_multipliers_loop_pays(const std::vector<bool>& mult_padding, int pending);
struct FcScoresInput {
  FcLayer layer;
  FcPlacement at;
  std::vector<FcResidentInput> resident;
  std::vector<float> mult_base;
  std::vector<bool> mult_padding;
  int r_word = -1;
  bool base_rows = false;
};

// The scores, their softmax and the weighted sum over a value cache in one program (issue 14;
// docs/llm.md "The weighted sum inside the scores' program"): generate_fc_batch_softmax's scores
// and softmax, then on the scalar core e's bytes past n zeroed and the sum's per-token
// multipliers m_j = f32(mult_base_j (1 / S_h)) (emit_scalar_value_prep); e and the multipliers go
// from scalar memory to tile 0 (an infeed from scalar memory to one tile), from there over the
// ring to the sum's tiles (e as its input row, each group's multipliers into its aux row by a
// narrowToWide), then the sum's FC over its resident weights (the v~ cache). `sum.layer`: K =
// the scores' positions per head, input head h's e at byte h * K (`sum.at.in_at`), its multipliers
// are not read (the program computes them). `writes`: parameter streams in front (the new key's
// groups, the new v~ column), their fc_parameters one after the other as the program's
// parameters, then `rows` (single weight rows: the new position's v~, fc_weight_rows). Input as
// generate_fc_batch_softmax's; output: the sum's [G][64] bytes. `columns` as
// generate_fc_batch_softmax's: its words streamed after writes' parameters, before `rows`.
// With `values` (fc_value_write.h) the chip writes the new position's values into the sum's
// weight rows itself before the scores run: its vectors are streamed after the column's words,
// before `rows`, into the staging rows. Marks as generate_fc_batch_softmax's, and the value
// write's in value_marks (fc_value_write_fields' order).
struct FcValueSum {
  FcLayer layer;
  FcPlacement at;
  std::vector<float> mult_base;  // [output]
  std::vector<int> mult_head;    // [output]: the head whose 1 / S scales it, -1: padding (0)
  // With `out` (non-empty: n > 0), an FC over the sum's outputs after it (the llm path's wo, K =
  // the sum's groups x 64, input zero point the sum's output zero point): the sum's 64-byte pieces
  // go over the ring to out's tiles (piece i at input byte 64 i), and out's groups leave instead.
  FcLayer out;
  FcPlacement out_at;
  // Piece i at input byte out_stride i instead (a multiple of 4 below 64: each piece written after
  // the one before, over its last 64 - out_stride bytes; the llm path's wo reading each head's
  // head_size bytes side by side, K = out_stride x groups padded to whole 64s, its columns past
  // out_stride x groups zero: the last piece's tail and the row's bytes after it meet them).
  int out_stride = 64;
};
std::string fc_batch_attention_unsupported(int heads, int positions, int sum_outputs);

// The value write of a joined program's tail (generate_ffn_chain_softmax's `values`): `write` as
// fc_value_write gives it, its from_byte counted from the first piece's byte
// (value_vectors_side_by_side(..., 0)); the generator puts the pieces above the chain's narrow
// bytes and the quads after them. v~'s 64-channel pieces are the outputs of `groups` (in channel
// order) of the chain's follower `layer` (FfnChain::next, FcChain::layers: the llm path's q, k, v
// follower, whose v groups wait for r, FcChainAfterR).
struct FcChainValueWrite {
  FcValueWrite write;
  int layer = -1;
  std::vector<int> groups;
};

// The layer's rest after wo in a joined program's tail (issue 14 step D.1a; docs/llm.md "The
// layer's rest after wo on the chip"), the int8 path's chip_residual steps: x2 = the attention's
// residual add of x_q and wo's output o (`add`: pairwise, K = 128, group g reads x_q's piece g,
// then o's), r_ffn = RMSNorm's scale of x2's `n` bytes on the scalar core (emit_scalar_rms, x2's
// zero point add.out_zp), then the FFN's input = `norm` over x2 (a diagonal FC, K = 64, group g
// reading x2's piece g) with per-token multipliers f32(norm_base_j r_ffn) (0 where
// norm_padding). x_q is the output of the chain's follower `x_follower`, saved at the tail's start
// (the tail's own bytes would overwrite it) into the top of narrow memory, where the rest's bytes
// lie too; the tail below them is refused where it reaches them (LayoutRejected). Output
// `output_name`: [the FFN input's groups x 64; x2's groups x 64]. x_follower -1: x_q is the
// chain's own input (an FcChain's, generate_fc_chain_softmax: the llm path's layer 0).
struct FcJoinedLayer;
struct FcLayerRest {
  FcLayer add;
  FcPlacement add_at;
  int x_follower = 0;
  int n = 0;
  float mean_mult = 0;
  FcLayer norm;
  FcPlacement norm_at;
  std::vector<float> norm_base;
  std::vector<bool> norm_padding;
  // Each norm group's 64 constants (norm_base as float32, 0 for padding) resident in the row at
  // this wide unit of its tile (a multiple of 4, outside every group's parameters, cached by the
  // caller): the multipliers then come from a loop over them where that takes fewer bytes
  // (emit_group_multipliers_from_r). Empty: the constants as immediates, a bundle an output.
  std::vector<int> norm_const_units;
  std::string output_name;
  // D.1b: with `ffn`, the FFN after that output from the FFN input's pieces as they lie on the
  // norm's tiles (emit_ffn_from_pieces at ffn_up, ffn_down; its parameters cached there), and its
  // y the program's last output `ffn_output_name`.
  const FfnLayer* ffn = nullptr;
  FcPlacement ffn_up, ffn_down;
  std::string ffn_output_name;
  // D.2b (not with `ffn`): with `next`, the next layer's joined program in the same program after
  // that output: its chain reads the FFN input's pieces and x2's where the rest left them
  // (emit_ffn_chain with FfnChainFrom), its tables and its tail's input at the outer chain's
  // bytes of the pop (the same tables, the same count block); its outputs after this layer's,
  // each with a name of its own. Its chain's bytes below the rest's are refused where they reach
  // them (LayoutRejected).
  const FcJoinedLayer* next = nullptr;
};
// generate_ffn_chain_softmax's arguments as one (a layer nested behind the previous one's rest).
struct FcJoinedLayer {
  const FfnChain* chain = nullptr;
  FcPlacement up, down;
  const FcLayer* layer = nullptr;
  FcPlacement placement;
  int row_bytes = 0;
  std::vector<float> exp_mult;
  const FcScoresInput* first = nullptr;
  const FcColumnWrite* columns = nullptr;
  std::vector<int> moved;
  const FcValueSum* sum = nullptr;
  const FcChainValueWrite* values = nullptr;
  const FcLayerRest* rest = nullptr;
};
FcScoresProgram generate_fc_batch_attention(const FcLayer& layer, const FcPlacement& placement,
                                            int row_bytes, const std::vector<float>& exp_mult,
                                            const FcValueSum& sum,
                                            const std::vector<const FcParameterWrite*>& writes,
                                            const FcRowWrite* rows = nullptr,
                                            const FcScoresInput* first = nullptr,
                                            const FcColumnWrite* columns = nullptr,
                                            const FcValueWrite* values = nullptr);

// Byte (row, output) of a batch program's output buffer.
inline size_t fc_batch_output_index(int rows, int row, int output) {
  return (static_cast<size_t>(output / 64) * static_cast<size_t>(rows) + static_cast<size_t>(row)) *
             64 +
         static_cast<size_t>(output % 64);
}

// The batched fused FFN (issue 14): for `rows` rows at once, w1 and w3 (f.up, w1's group i and
// w3's group i on one tile, as generate_ffn places them), the gate on those tiles (LOGISTIC on the
// non-linear unit, two MULs: generate_ffn's arithmetic), m broadcast row by row to w2's tiles and
// w2 over it; only w2's output leaves, as [G][rows][64] (fc_batch_output_index). The parameters are
// cached by fc_caching(f.up, up) and fc_caching(f.down, down). Our own program, correct by
// simulation against generate_ffn row by row.
int ffn_batch_max_rows(const FfnLayer& f, int down_slots);
container::Executable generate_ffn_batch(const FfnLayer& f, const FcPlacement& up,
                                         const FcPlacement& down, int rows);

}  // namespace tinycoral::compiler
