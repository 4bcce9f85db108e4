// The FULLY_CONNECTED code generator: edgetpu_compiler 16.0's two programs for one per-channel FC
// layer, built from the layer's shapes (docs/compiler.md has the rules and the evidence).
//
// Geometry: G = N/64 output groups, one per compute tile (tiles 0..G-1); the input's K bytes are
// cut into T_in = K/64 pieces of 64 bytes, piece i on tile i, scattered by the host over the ring
// in 256-byte packets (one per row of 4 tiles), then every piece is broadcast over the ring to all
// compute tiles, which hold the whole x at narrow address 0. Each compute tile runs one op over its
// 64 outputs and sends them to the host through the scalar core.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/fc_layer.h"
#include "compiler/scalar_alu.h"
#include "container/executable.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {

// What the chain generators throw when the layout asked for is valid but more than a tile's
// output rows hold (output pieces, table products): a caller may retry another layout. Every
// other Error (a malformed layer, placement or product list) is not this one and must not be
// retried as a layout.
class LayoutRejected : public Error {
 public:
  using Error::Error;
};
// 64-byte output pieces a chain returns from one tile at most (its wide output rows).
constexpr int kChainOutPieces = 4;

struct FcPrograms {
  container::Executable execution;  // EXECUTION_ONLY, name "model"
  container::Executable caching;    // PARAMETER_CACHING, name "Unknown", holds the parameters
};

// Why this shape is outside what the generator reproduces, or "" when it is covered.
std::string fc_unsupported(int n, int k);

// Where the parameters live, for several layers resident in tile memory at once (the llm chip
// path, docs/llm.md): output group g is computed on tile `tiles[g]` (default: tile g) from
// parameters at wide unit `param_units[g]` of that tile (default 0; a multiple of 4, below
// kFcParamUnits). Tiles with different units get their own aux load and op. The defaults give
// edgetpu_compiler's programs byte for byte.
struct FcPlacement {
  std::vector<int> tiles;
  std::vector<int> param_units;
  std::vector<int> in_at;  // narrow byte where each group's input starts (default 0)
  // The batch generator's ops only (fc_batch_codegen.h): the wide unit of each group's weights
  // when they live apart from its aux rows (default: right after them), so groups with the same
  // weights can share one copy per tile (the llm path's RoPE sums). Caching such a placement is
  // the caller's: fc_caching of one copy per tile, with each group's aux rows as `rows`.
  std::vector<int> weight_units;
};
// Wide units (64 B) of each tile below the ring FIFO rows that parameters may occupy: 512 KiB.
constexpr int kFcParamUnits = 0x2000;
// Wide units of a group's two aux rows, the first of its parameters (fc_parameters: 64 float32
// multipliers, 64 int32 zero points); its weights follow them.
constexpr int kFcAuxUnits = 8;
// An FC's outputs a group (one compute tile's op), and the most groups of one FC a placement may
// put on a tile (where their parameter units do not overlap).
constexpr int kFcGroupOutputs = 64;
constexpr int kFcMaxGroupsATile = 2;
// Output groups (compute tiles) of an N-output layer and the parameter units each holds.
int fc_groups(int n);
// The units of a group of `layer` (its op's K, FcLayer::op_k, and its bias); the (k, bias) form
// only where no layer exists yet (a planner sizing groups of a known K).
int fc_units_per_tile(const FcLayer& layer);
int fc_units_per_tile(int k, bool bias);
// The first of `layer`'s groups (by index) on `tile` whose parameters where `placement` puts them
// (from its base, fc_units_per_tile units: its aux rows, a bias's included, then its weights)
// overlap wide units [unit, unit + units); -1: none. What a resident row beside them must avoid.
int fc_group_over(const FcLayer& layer, const FcPlacement& placement, int tile, int unit,
                  int units);

// The parameter stream: per compute tile, a row of 64 float32 multipliers, a row of 64 int32
// (128: the zero point of the stored weights), then the weights as [K/4][64][4] bytes w + 128.
std::vector<uint8_t> fc_parameters(const FcLayer& layer);

// Both executables; throws Error if fc_unsupported() is not empty or the placement is invalid.
FcPrograms generate_fc(const FcLayer& layer, const FcPlacement& placement = {});

// A llama2.c FFN in one program (the llm chip path, docs/llm.md): h1 = w1 x and h3 = w3 x, then on
// each tile that computed them g = LOGISTIC(h1) (the non-linear unit's spline), a = MUL(h1, g),
// m = MUL(a, h3), then m's pieces are broadcast to w2's tiles and y = w2 m leaves. Our own program
// (no edgetpu_compiler counterpart), correct by simulation against the int8 path.
struct FfnLayer {
  // w1 and w3 side by side: group 2i is w1's group i, group 2i + 1 w3's group i (the placement
  // puts both on one tile); n a multiple of 128, n / 2 <= 1024 (w2's K).
  FcLayer up;
  FcLayer down;  // w2: k = up.n / 2 (m), n a multiple of 64; its in_zp is m's
  // uint8 zero points and scales of the elementwise ops (LOGISTIC's output: 1/256, zero point 0).
  int32_t h1_zp = 0, h3_zp = 0, a_zp = 0;
  float h1_scale = 0;
  float mult_a = 0, a_clamp_min = 0, a_clamp_max = 0;  // MUL(h1, g) -> a
  float mult_m = 0, m_clamp_min = 0, m_clamp_max = 0;  // MUL(a, h3) -> m (down.in_zp)
};
struct FfnPrograms {
  container::Executable execution;
  container::Executable caching_up, caching_down;
};
// up.tiles[2i] must equal up.tiles[2i + 1].
FfnPrograms generate_ffn(const FfnLayer& ffn, const FcPlacement& up, const FcPlacement& down);

// Two elementwise products of a chain layer's outputs with tables the host sends per run, on the
// tiles after the chain's layers (the llm chip path's RoPE products, --chip-rope: docs/llm.md
// "RoPE's products in the chain"): for each listed output group of layer `layer` (64 bytes x,
// uint8 zero point x_zp) the chip's MUL by 64 bytes of the first table (P1) and by as many of the
// second (R), both from the host's input after its own bytes, from the next whole 256-byte packet
// on (fc_tables_at; `tables` pieces of 128 bytes, piece p the first table's 64 bytes p, then the
// second's; uint8, zero point 128), multiplier `mult`, clamps +-127, zero point 128. The program
// returns P1 and R of each listed group that is not kept (FcProductGroup::keep), in order, after
// everything else it returns; the listed groups' own bytes x are not returned.
struct FcProductGroup {
  int group = 0;  // output group of the layer
  int table = 0;  // the tables' piece it multiplies with
  int32_t x_zp = 0;
  float mult = 0;
  // Its P1 and R stay on the chip instead of leaving (kept_row, below).
  bool keep = false;
};
struct FcTableProducts {
  int layer = -1;  // FfnChain: the follower; FcChain: the layer (-1: no products)
  int tables = 0;
  std::vector<FcProductGroup> groups;
  // Per tile, the resident wide row (a unit, a multiple of 4, below kFcParamUnits; -1: none)
  // where a tile with kept groups leaves its products: its j-th group's P1 at byte 128 j of the
  // row, R after it (fc_product_bytes), for a later program to read (FcScoresInput::resident).
  std::array<int, 16> kept_row = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1};
};
// For each of products.groups, in order: the tile that computes it (tile_of: the layer's
// placement, group -> tile) and the byte of its P1 in that tile's block of products.
std::vector<std::pair<int, int>> fc_product_bytes(const FcTableProducts& products,
                                                  const std::vector<int>& tile_of);
// Where the tables start in an input of `own_bytes` before them: the next whole 256-byte packet
// (the program moves them to the tiles a packet at a time).
constexpr int fc_tables_at(int own_bytes) { return (own_bytes + 255) / 256 * 256; }
// The bytes the tables add to that input: the padding up to that packet, then `tables` 64-byte
// pieces of each of the two tables.
constexpr int fc_tables_bytes(int own_bytes, int tables) {
  return fc_tables_at(own_bytes) - own_bytes + 2 * 64 * tables;
}

// RMSNorm's scale r of a chain follower's output, computed in the program on the scalar core (the
// llm chip path's chip_rms: docs/llm.md "RMSNorm's scale from the chip's bytes"): the follower's
// groups go over the ring into scalar memory from word chain_rms_x_word(groups) on, the scalar-core
// routine (scalar_rms.h) reads their first n bytes while the next follower's ops run, and r
// (float32) leaves as the program's second output, 4 raw bytes named `output_name`, after
// everything the first returns.
struct FcChainRms {
  int layer = -1;       // the follower whose output is x (-1: no r)
  int n = 0;            // x's bytes: the follower's first n outputs
  int zero_point = 0;   // x's zero point as the chip stores it (int8's + 128)
  float mean_mult = 0;  // f32(s_x^2 / n) (llm::rms_mean_multiplier)
  std::string output_name = "r";
};
// Scalar-memory words the chain's r takes: r at the last word, x's groups (16 words each) below
// it, away from the scores, sums and count the scores' programs keep from word 0 up.
constexpr int kChainRmsRWord = kScalarMemoryWords - 1;
constexpr int chain_rms_x_word(int groups) { return kChainRmsRWord - 16 * groups; }

// Groups of a follower whose output stage waits for RMSNorm's scale r (FcChainRms): their
// per-channel multipliers are f32(base_j r), made by the program from the r it computed (the
// RoPE multipliers' form: ffn_parts.h's emit_group_multipliers_from_r) and written into the
// groups' multiplier rows, then their op runs, after the follower's other groups' op (the llm
// chip path's v~ from wv's output stage: docs/llm.md "v~ on the chip"). Their outputs lie where
// the follower's groups' lie and leave (or stay) as those do; the layer's own multipliers of
// those groups are cached but never read. With `const_units`, each listed group's 64 constants
// (float32, 0 for padding) are resident too: the follower's caching program writes them into the
// row at that wide unit of the group's tile (a multiple of 4, outside every group's parameters,
// which the caller keeps free), and the program reads them there where that takes fewer bytes.
struct FcChainAfterR {
  int layer = -1;                // the follower (-1: none); after FcChainRms::layer
  std::vector<int> groups;       // its groups that wait, in increasing order
  std::vector<float> base;       // [64 a listed group]
  std::vector<bool> padding;     // [64 a listed group]: multiplier 0
  std::vector<int> const_units;  // [listed group], or empty: constants as immediates
};

// One group's resident constants' row as the multipliers' loop reads it, appended to `bytes`:
// base[from + j] for j = 0..63 as float32 little-endian, 0 where padding[from + j] (padding empty:
// none). Both the chain's constants (FcChainAfterR::const_units) and the RoPE sum's are this row.
void append_constants_row(std::vector<uint8_t>& bytes, const std::vector<float>& base,
                          const std::vector<bool>& padding, size_t from);

// A fused FFN with FULLY_CONNECTED layers after it in the same program (the llm chip path's
// step c: the residual add as a matmul, then the next layer's q, k and v). Follower 0 reads the
// host's extra input (the bytes after the FFN's input) followed by w2's output; follower i > 0
// reads follower i - 1's output. The program returns [w2's output,] each follower's output, in
// order, side by side (whole 64-output groups). Our own program, correct by simulation.
struct FfnChain {
  FfnLayer ffn;
  int extra_k = 0;            // host bytes after the FFN's input, a multiple of 64
  std::vector<FcLayer> next;  // follower 0: k = extra_k + ffn.down.n; then k = previous n
  std::vector<FcPlacement> next_at;
  bool output_down = false;  // return w2's output first
  // Follower 0 as the residual add: its group g reads only the extra input's piece g and w2's
  // group g, so its K is 128 (the two pieces side by side) and extra_k must equal w2's N.
  bool pairwise = false;
  // Which followers' outputs the program returns (empty: all). A follower after the first whose
  // placement names input places (in_at) reads only those parts of the previous one's output, K
  // bytes from each.
  std::vector<bool> next_output;
  FcTableProducts products;  // their tables after the extra input
  FcChainRms rms;            // r of a follower's output as a second output (layer -1: none)
  FcChainAfterR after_r;     // groups whose multipliers the program makes from r (layer -1: none)
};
struct FfnChainPrograms {
  container::Executable execution;
  std::vector<container::Executable> caching;  // up, down, then each follower
  // The fields of the execution program's bitstream its tail marked (Emitter::mark): with a
  // column write, each group's scatter address (emit_column_scatters).
  std::vector<isa::EncodedField> marks;
  // The execution program's instruction bytes by part (Emitter::part_bytes; a joined program's
  // parts are named where they are emitted, docs/llm.md "Where a token's bytes go").
  std::vector<std::pair<std::string, uint64_t>> parts;
};
FfnChainPrograms generate_ffn_chain(const FfnChain& chain, const FcPlacement& up,
                                    const FcPlacement& down);
// FULLY_CONNECTED layers in one program (the llm chip path's first layer: q, k, v, then u):
// layer 0 reads the host's input, layer i > 0 the output of layer i - 1 (or parts of it, as an
// FfnChain follower may); the program returns the outputs of the layers flagged, in order.
// With `after_r` (FcChainAfterR, its layer one of the chain's layers) the program makes those
// groups' multipliers from r as an FfnChain does, but r is the host's (the llm path's layer 0 has
// no RMSNorm on the chip): a float32 at bytes 4..7 of a 64-byte block of the program's input,
// the scores' count block where a tail follows (FfnChainTail::r_block), else a block of its own
// after the input and its tables, from the next whole packet on.
struct FcChain {
  std::vector<FcLayer> layers;
  std::vector<FcPlacement> at;
  std::vector<bool> output;
  FcTableProducts products;  // their tables after layer 0's input
  FcChainAfterR after_r;     // groups whose multipliers the program makes from r (layer -1: none)
};
FfnChainPrograms generate_fc_chain(const FcChain& chain);  // caching: one per layer

// The caching program alone, for execution programs another generator writes over the same
// parameters (the batch generator, fc_batch_codegen.h): N up to 2048 with a placement, any K that
// is a multiple of 64 (the batch-1 limit K <= 1024 is its input scatter's, not the parameters'),
// weight_k / 4 weight rows a group where the layer sets FcLayer::weight_k.
// With `rows`, single 256-byte rows are cached after the layer's stream (FcRowWrite, below).
struct FcRowWrite;
container::Executable fc_caching(const FcLayer& layer, const FcPlacement& placement = {},
                                 const FcRowWrite* rows = nullptr);
// The caching program's parameter stream inside another program (a STAND_ALONE one whose
// parameters are fc_parameters(layer)): registers 0 and 1 must hold the parameter address
// (program_start's relocations); registers 2-7 are overwritten.
void emit_fc_parameter_stream(Emitter& e, const FcLayer& layer, const FcPlacement& placement);
// One 256-byte row of a tile's resident parameters at wide unit `unit` (a multiple of 4): the llm
// value cache's row of a new position (4 positions of a group's 64 outputs, fc_parameters' layout).
struct FcParameterRow {
  int tile = 0, unit = 0;
};
// Rows and their bytes (256 each, in order).
struct FcRowWrite {
  std::vector<FcParameterRow> rows;
  std::vector<uint8_t> bytes;
};
// Weight row `kq` (inputs 4 kq .. 4 kq + 3 of all 64 outputs) of every output group of `layer`
// where `placement` puts it: what rewriting one input's column needs.
FcRowWrite fc_weight_rows(const FcLayer& layer, const FcPlacement& placement, int kq);
// Wide units from a group's weight row 0 to the row holding input `k` (row k / 4, 4 units each):
// +4 units every 4 positions, the rule every marked cache-row address follows.
constexpr int fc_weight_row_unit(int k) { return 4 * (k / 4); }
// Several layers' streams from one parameter buffer, their fc_parameters one after the other,
// then `rows`' 256 bytes each. The rows from index `mark_from` on (-1: none) have their wide
// address marked (Emitter::mark: their ring consumer's addr, 2 + unit), in order: another row of
// the same tiles is the program with that field rewritten.
void emit_fc_parameter_streams(
    Emitter& e, const std::vector<std::pair<const FcLayer*, const FcPlacement*>>& parts,
    const std::vector<FcParameterRow>& rows = {}, int mark_from = -1);

}  // namespace tinycoral::compiler
