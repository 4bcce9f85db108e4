// The batched FULLY_CONNECTED program (fc_batch_codegen.h). The data movement is the CONV_2D
// generator's (per-piece FIFO rows, one wideToNarrow per piece on all compute tiles, 256-byte
// output pieces through the scalar core); the op is its 1x1 form with the FC's parameter layout and
// placement (docs/compiler.md "Batched FULLY_CONNECTED").
#include "compiler/fc_batch_codegen.h"

#include <algorithm>
#include <array>
#include <bit>
#include <memory>
#include <optional>

#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/ffn_parts.h"
#include "compiler/program_parts.h"
#include "compiler/scalar_alu.h"
#include "compiler/scalar_rms.h"
#include "compiler/scalar_softmax.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kGroup = 64;  // outputs per op (one weight row of 64 columns)
constexpr int kTiles = 16;
constexpr int kMaxSlots = 2;        // groups per tile (FcPlacement's limit)
constexpr int kPiece = 256;         // bytes per ring packet
constexpr int kRingFifo = 0x2078;   // wide row of the output packets
constexpr int kInputFifo = 0x2000;  // input packet rows: above the parameters (kFcParamUnits)...
constexpr int kInputRows = 24;      // ...and below the FC programs' rows at 0x2068
constexpr int kNarrowBytes = 196608;
constexpr int kMaxInputBytes = kActPassUnits * 8;  // X fits one activation pass

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// Where each output group lives: its tile, its parameters' unit and its slot on that tile.
struct Groups {
  std::vector<int> tile, base, slot, in_at;
  std::vector<int> weights;  // each group's weights' unit, -1: right after its aux rows
  int slots = 1;
  int row_bytes = 0;  // X's row: K, or more when groups read parts of it
};

Groups groups_of(int groups, const FcPlacement& placement) {
  Groups g;
  g.tile = placement.tiles;
  if (g.tile.empty())
    for (int t = 0; t < groups; ++t) g.tile.push_back(t);
  g.base = placement.param_units;
  if (g.base.empty()) g.base.assign(size_t(groups), 0);
  if (int(g.tile.size()) != groups || int(g.base.size()) != groups)
    fail("the placement names ", g.tile.size(), " tiles and ", g.base.size(), " units for ", groups,
         " output groups");
  for (size_t i = 0; i < g.tile.size(); ++i) {
    const int slot = int(std::count(g.tile.begin(), g.tile.begin() + long(i), g.tile[i]));
    g.slot.push_back(slot);
    g.slots = std::max(g.slots, slot + 1);
  }
  g.in_at = placement.in_at;
  if (g.in_at.empty()) g.in_at.assign(size_t(groups), 0);
  if (int(g.in_at.size()) != groups)
    fail("the placement names ", g.in_at.size(), " input places for ", groups, " output groups");
  g.weights = placement.weight_units;
  if (g.weights.empty()) g.weights.assign(size_t(groups), -1);
  if (int(g.weights.size()) != groups)
    fail("the placement names ", g.weights.size(), " weight places for ", groups, " output groups");
  for (int w : g.weights)
    if (w != -1 && (w < 0 || w % 4 != 0 || w >= kFcParamUnits))
      fail("weights at wide unit ", w, ": not row-aligned or past the parameters");
  return g;
}

// What an op needs beyond its tile mask; one aux load and one op per distinct set.
struct OpSet {
  int base, weights, slot, in_at;
  int32_t out_zp;
  float clamp_min, clamp_max;
  uint32_t tiles;
};

std::vector<OpSet> op_sets(const Groups& g, const FcLayer& layer) {
  std::vector<OpSet> out;
  const bool own = !layer.group_out_zp.empty();
  const int weights_k = layer.op_k();  // (FcLayer::weight_k)
  for (size_t i = 0; i < g.tile.size(); ++i) {
    if (g.weights[i] != -1 && g.weights[i] + kGroup * weights_k / 64 > kFcParamUnits)
      fail("weights at wide unit ", g.weights[i], " for K = ", weights_k, ": past the parameters");
    const OpSet want{g.base[i],
                     g.weights[i],
                     g.slot[i],
                     g.in_at[i],
                     own ? layer.group_out_zp.at(i) : layer.out_zp,
                     own ? layer.group_clamp_min.at(i) : layer.clamp_min,
                     own ? layer.group_clamp_max.at(i) : layer.clamp_max,
                     0};
    auto at = std::find_if(out.begin(), out.end(), [&](const OpSet& o) {
      return o.base == want.base && o.weights == want.weights && o.slot == want.slot &&
             o.in_at == want.in_at && o.out_zp == want.out_zp && o.clamp_min == want.clamp_min &&
             o.clamp_max == want.clamp_max;
    });
    if (at == out.end()) at = out.insert(out.end(), want);
    at->tiles |= tile_bit(g.tile[i]);
  }
  return out;
}

// X, row after row, in 256-byte pieces into narrow byte 0 of every compute tile.
void stream_input(Emitter& e, uint32_t compute, int bytes) {
  const int units = bytes / 8;
  const Passes pass = passes_of(units, kActPassUnits);
  e.add("pop", cat("stream=1 walk=",
                   nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
                   " k121=1 k124=1 av140=1", pass.fields(), " k174=1 k178=1 k199=1 k215=1"));
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  descriptor(e, 5, 4, 6, bytes, 1);
  for (int at = 0, piece = 0; at < bytes; at += kPiece, ++piece) {
    if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    const int fifo = kInputFifo + 4 * (piece % kInputRows);
    const int size = std::min(kPiece, bytes - at);
    const int offset = at / 8, piece_units = size / 8;
    e.add("w2n", cat("tiles=", hex(compute), " w.addr=", hex(fifo),
                     " w=(1 x 1) n.addr=", hex(at / 4), " n=", strided_walk({{1, size / 4}}, 6),
                     " n.lvl_mask=0x01 mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 sync.dec_lvl=1 "
                     "sync.dec=-1 sync.dec_mode=3 tail_en870=1"));
    ring_receive(e, compute, fifo, 1, -64);
    e.add("infeed",
          cat("stream=1", offset ? cat(" buf_off=", hex(offset)) : "",
              " walk=", nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
              " k157=1 k160=1 av176=1 count_m1=", piece_units - 1, " tail_en=1 count_neg=",
              hex(kActPassUnits - piece_units), " f308=0x8 pop_wait=", hex((offset + 1) & 0xffff),
              " k336=1 f352=1 f391=2 dest=", hex(compute), " f434=0xf lanes_m1=3"));
  }
}

// One op per op set over the rows of X at narrow 0; group slot s's rows x 64 outputs at
// out_base + rows 64 s; then the fences.
void op_stage(Emitter& e, const FcLayer& layer, const Groups& g, int rows, int out_base) {
  // The op's words: the weights' K (FcLayer::weight_k); X's rows keep the input's layout.
  const int k_words = layer.op_k() / 4, row_words = g.row_bytes / 4;
  const int block = rows * kGroup;  // one group's outputs
  // The per-channel rows into the output stage (the FC's load), then the op over every row.
  const int aux_rows = layer.bias.empty() ? 2 : 3;  // multipliers, [biases,] zero points
  const int planes = aux_rows - 1;
  const std::string rewind = cat("(", -(31 + 64 * (planes - 1)), " x 1)");
  const std::string aux_load =
      cat(" w=(1 x ", planes, ") w.lvl_mask=0x1 n=(1 x 32)(33 x ", planes, ")", rewind, rewind,
          rewind, rewind,
          " n.lvl_mask=0x03 mode=2 fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 "
          "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 tail_en870=1");
  const std::string in_walk = strided_walk({{1, k_words}, {row_words, rows}}, 8, " m3");
  const std::string par_walk = strided_walk({{1, k_words}, {0, rows}}, 8, " m1");
  const std::string out_walk = strided_walk({{1, kGroup / 4}, {kGroup / 4, rows}}, 8, " m3");
  for (const auto& [base, weights, slot, in_at, out_zp, clamp_min, clamp_max, tiles] :
       op_sets(g, layer)) {
    e.add("w2n", cat("tiles=", hex(tiles), base ? cat(" w.addr=", hex(base)) : "", aux_load));
    const int par_base = weights >= 0 ? weights : base + 4 * aux_rows;
    const int zp_unit = base + 4 * (aux_rows - 1);
    e.add("op",
          cat("tiles=", hex(tiles), " loops=(", k_words, ")(", rows, ")",
              in_at ? cat(" in.base=", hex(in_at)) : "", " in=", in_walk,
              " in.tflags=0x01 out.base=", hex(out_base + block * slot), " out=", out_walk,
              " out.tflags=0x1 par.base=", hex(par_base & 0x1fff),
              par_base > 0x1fff ? " par.sel=1" : "", " par=", par_walk, " psum=(0 x ", k_words,
              ") cfg0=0x0a5 cfg1=0x14e sync0=0x4000 sync1=0x4000 cfg2=0x07 cfg3=8 in_zp=",
              layer.in_zp, " pc_aux_unit=", hex(zp_unit), " pc_aux_rows=", planes,
              " pc_zp_unit=", hex(zp_unit), layer.bias.empty() ? "" : " cfg4=1",
              " dp_mode=2 reduce_mask=0x01 out_ch_last=", kGroup - 1, " out_ch=", kGroup - 1,
              " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(clamp_max),
              " clamp_min=", f32_bits(clamp_min), " out_zp=", out_zp, " pc_mult=1"));
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

// Blocks of `block` bytes each ((tile, narrow byte) in order) in 256-byte pieces to the scalar
// core as output `name`; then the program's end where `end`. `ordinal` counts the ring producers
// so far; returns it past this stage's.
int blocks_output_stage(Emitter& e, const std::string& name,
                        const std::vector<std::pair<int, int>>& blocks, int block, int ordinal,
                        bool end) {
  output_address(e, name);
  const int total = int(blocks.size()) * block;
  descriptor(e, 5, 4, 6, total, 3);
  for (const auto& [tile, from] : blocks) {
    for (int at = 0; at < block; at += kPiece) {
      const int bytes = std::min(kPiece, block - at);
      e.add("n2w", cat("tiles=", hex(tile_bit(tile)), " n.addr=", hex((from + at) / 4),
                       " n=", narrow_walk(bytes / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                       " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                       "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                       "tail_lvl=1"));
      e.add("outfeed", cat("walk=(0 x ", bytes / 8, ") k173=3 f222=0x7f"));
      ring_send(e, tile, kRingFifo, 0x10000, ordinal++);
    }
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", cat("tiles=0xffff smask=0x020 thr5=", total / 32, " wait=0x020 sunits=0x0c"));
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  if (!end) return ordinal;
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
  return ordinal;
}

// Every group's rows x 64 bytes (slot s at out_base + rows 64 s), in group order, as
// blocks_output_stage.
int output_stage(Emitter& e, const FcLayer& layer, const Groups& g, int rows, int out_base,
                 int ordinal, bool end = true) {
  const int block = rows * kGroup;
  std::vector<std::pair<int, int>> blocks;
  for (size_t i = 0; i < g.tile.size(); ++i)
    blocks.emplace_back(g.tile[i], out_base + block * g.slot[i]);
  return blocks_output_stage(e, layer.output_name, blocks, block, ordinal, end);
}

uint32_t mask_of(const Groups& g) {
  uint32_t mask = 0;
  for (int t : g.tile) mask |= tile_bit(t);
  return mask;
}

container::Bitstream execution_program(const FcLayer& layer, const Groups& g, int rows,
                                       const FcParameterWrite* write) {
  Emitter e;
  const int out_base = round_up(rows * g.row_bytes, 64);
  program_start(e);
  if (write) {
    // The new parameters land before anything reads them.
    emit_fc_parameter_stream(e, write->layer, write->at);
    tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
    wait_tokens(e);
  }
  tile_fence(e, "units=0x020");
  input_address(e, layer.input_name);
  stream_input(e, mask_of(g), rows * g.row_bytes);
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  op_stage(e, layer, g, rows, out_base);
  output_stage(e, layer, g, rows, out_base, 0);
  return e.finish();
}

// A program that streams its layer's new parameters first (FcParameterWrite) stands alone and
// takes them right after its input.
void carry_parameter_write(container::Executable& eo, const FcParameterWrite& write) {
  eo.type = container::ExecutableType::kStandAlone;
  eo.parameters = fc_parameters(write.layer);
  eo.dma_hints.hints.insert(eo.dma_hints.hints.begin() + 1,
                            dma_hint(BufferKind::kParameter, container::Direction::kInfeed, "",
                                     static_cast<int>(eo.parameters.size())));
}

// Narrow bytes a column write's copies take before the program's other uses of narrow memory.
int column_copy_bytes(const FcColumnWrite* columns) {
  return columns ? fc_column_write_narrow_bytes(*columns) : 0;
}

// The parameter writes in front of the scores (softmax and attention programs): `writes`' streams,
// then `columns`' words, `values`' vectors and `rows` as single rows, one parameter buffer; with
// `columns` its rows' copies before the stream and the scatter after it, with `values` its staging
// rows' copies before the stream and the landings after it. Returns the parameters, in stream
// order. `rows`' addresses are marked, then (streamed words) the scatters', then the value
// landings' (their first mark's index in *value_marks_from; scores_marks splits them).
std::vector<uint8_t> emit_parameter_writes(Emitter& e,
                                           const std::vector<const FcParameterWrite*>& writes,
                                           const FcRowWrite* rows, const FcColumnWrite* columns,
                                           const FcValueWrite* values = nullptr,
                                           int* value_marks_from = nullptr) {
  if (rows && rows->bytes.size() != 256 * rows->rows.size())
    fail(rows->bytes.size(), " bytes for ", rows->rows.size(), " parameter rows");
  std::vector<uint8_t> parameters;
  std::vector<std::pair<const FcLayer*, const FcPlacement*>> parts;
  for (const FcParameterWrite* w : writes) {
    parts.emplace_back(&w->layer, &w->at);
    const std::vector<uint8_t> p = fc_parameters(w->layer);
    parameters.insert(parameters.end(), p.begin(), p.end());
  }
  std::vector<FcParameterRow> single;
  // Words that come from the FC in front of the scores are not streamed.
  const bool streamed_words = columns && columns->from_byte.empty();
  int mark_from = -1;  // `rows`' first
  for (const FcRowWrite* r :
       {streamed_words ? &columns->words : nullptr, values ? &values->vectors : nullptr, rows}) {
    if (!r) continue;
    if (r == rows) mark_from = int(single.size());
    single.insert(single.end(), r->rows.begin(), r->rows.end());
    parameters.insert(parameters.end(), r->bytes.begin(), r->bytes.end());
  }
  if (columns) {
    if (column_copy_bytes(columns) > kNarrowBytes)
      fail("a column write's copies take ", column_copy_bytes(columns), " bytes of narrow memory");
    emit_column_copies(e, *columns);
  }
  if (values) {
    if (fc_value_write_narrow_bytes(*values) > kNarrowBytes)
      fail("a value write's quads take ", fc_value_write_narrow_bytes(*values),
           " bytes of narrow memory");
    emit_value_copies(e, *values);
  }
  if (parameters.empty()) return parameters;
  // The new parameters land before anything reads them.
  emit_fc_parameter_streams(e, parts, single, mark_from);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  // (Words from the FC in front of the scores: scattered once it has run, scores_and_softmax.)
  if (streamed_words) emit_column_scatters(e, *columns);
  if (values) {
    if (value_marks_from) *value_marks_from = int(e.marks().size());
    emit_value_landings(e, *values);
  }
  return parameters;
}

// The program's marks as FcScoresProgram's: `rows`' addresses first, then the column scatters',
// except `values`' (two a group, fc_value_write_fields' order) from index value_from on.
FcScoresProgram scores_marks(container::Executable execution, const Emitter& e,
                             const FcRowWrite* rows, const FcColumnWrite* columns,
                             const FcValueWrite* values = nullptr, int value_from = -1) {
  std::vector<isa::EncodedField> marks = e.marks();
  FcScoresProgram out{std::move(execution), {}, {}, {}};
  if (values) {
    const size_t n_values = 2 * values->cache_units.size();
    if (value_from < 0 || size_t(value_from) + n_values > marks.size())
      fail("a scores program marks ", marks.size(), " fields, not its value write's ", n_values);
    const auto at = marks.begin() + value_from;
    out.value_marks.assign(at, at + long(n_values));
    marks.erase(at, at + long(n_values));
  }
  const size_t n_rows = rows ? rows->rows.size() : 0,
               n_columns = columns ? columns->words.rows.size() : 0;
  if (marks.size() != n_rows + n_columns)
    fail("a scores program marks ", marks.size(), " fields for ", n_rows, " rows and ", n_columns,
         " column groups");
  out.row_marks.assign(marks.begin(), marks.begin() + long(n_rows));
  out.column_marks.assign(marks.begin() + long(n_rows), marks.end());
  return out;
}

// A program with parameter writes stands alone and takes them right after its input.
void carry_parameters(container::Executable& eo, std::vector<uint8_t> parameters) {
  if (parameters.empty()) return;
  eo.type = container::ExecutableType::kStandAlone;
  eo.parameters = std::move(parameters);
  eo.dma_hints.hints.insert(eo.dma_hints.hints.begin() + 1,
                            dma_hint(BufferKind::kParameter, container::Direction::kInfeed, "",
                                     static_cast<int>(eo.parameters.size())));
}

// Each group's op reads K bytes (FcLayer::op_k) from its `in_at`: within a row of `row_bytes`,
// word-aligned.
void check_in_at(const Groups& g, int k, int row_bytes) {
  for (int at : g.in_at)
    if (at < 0 || at % 4 != 0 || at + k > row_bytes)
      fail("a group reads K = ", k, " bytes from byte ", at, " of rows of ", row_bytes,
           ": need a multiple of 4 within the row");
}

// The groups of an FC over the query row of the softmax and attention programs (the scores, or
// the FC in front of them): a one-row batch over the row (row_bytes) and the count after it; each
// group reads its K bytes within the row.
Groups query_row_groups(const FcLayer& layer, const FcPlacement& placement, int row_bytes) {
  Groups g = groups_of(fc_groups(layer.n), placement);
  g.row_bytes = row_bytes + kSoftmaxCountBytes;
  if (const std::string why = fc_batch_unsupported(layer, 1, g.slots, g.row_bytes); !why.empty())
    fail(why);
  check_in_at(g, layer.op_k(), row_bytes);
  return g;
}

// The FC in front of the scores (FcScoresInput): its groups, checked against the input row and
// the scores' input.
Groups first_groups(const FcScoresInput& first, const FcLayer& scores, int row_bytes) {
  Groups f = query_row_groups(first.layer, first.at, row_bytes);
  if (first.layer.n > row_bytes)
    fail(first.layer.n, " outputs before the scores past their row of ", row_bytes, " bytes");
  if (first.layer.out_zp != scores.in_zp)
    fail("the scores' input zero point ", scores.in_zp, " after outputs at ", first.layer.out_zp);
  return f;
}

// Narrow bytes the FC in front of the scores needs after the scores' outputs.
int first_bytes(const FcScoresInput* first) {
  return first ? groups_of(fc_groups(first->layer.n), first->at).slots * kGroup : 0;
}

// Where the resident inputs of the FC in front of the scores (FcScoresInput::resident) are read
// into narrow memory: past the query row, the scores' and that FC's outputs and the column
// write's copies (all of which must survive until the FC has run), a tile's rows 256 bytes
// apart; and the narrow bytes that takes (`at` itself without resident inputs).
struct ResidentRows {
  std::vector<std::array<int, 3>> rows;  // tile, wide row, narrow byte
  int at = 0, end = 0;
  int narrow(int tile, int row) const {
    for (const auto& [t, r, n] : rows)
      if (t == tile && r == row) return n;
    return -1;
  }
};
ResidentRows resident_rows(const FcScoresInput* first, int after) {
  ResidentRows r;
  r.at = r.end = round_up(after, kPiece);
  if (!first) return r;
  std::array<int, 16> on_tile{};
  for (const FcResidentInput& p : first->resident) {
    if (p.group < 0 || size_t(p.group) >= first->at.tiles.size() || p.row < 0 || p.row % 4 != 0 ||
        p.row + 4 > kFcParamUnits || p.byte < 0 || p.byte % 4 != 0 ||
        p.byte + first->layer.k > kPiece)
      fail("group ", p.group, "'s input at byte ", p.byte, " of resident wide row ", p.row);
    const int tile = first->at.tiles[size_t(p.group)];
    if (r.narrow(tile, p.row) < 0)
      r.rows.push_back({tile, p.row, r.at + kPiece * on_tile[size_t(tile)]++});
  }
  for (const int n : on_tile) r.end = std::max(r.end, r.at + kPiece * n);
  if (r.end > kNarrowBytes) fail("resident inputs read into narrow memory up to byte ", r.end);
  return r;
}

// `columns` as the program writes it: where its words come from the FC in front of the scores,
// its copies go past the query row, the scores' and that FC's outputs (the copies are taken before
// the row arrives and written back before the scores run).
std::optional<FcColumnWrite> placed_columns(const FcColumnWrite* columns, const Groups& g,
                                            int out_base, const FcScoresInput* first) {
  if (!columns) return std::nullopt;
  FcColumnWrite w = *columns;
  if (!w.from_byte.empty()) {
    if (!first) fail("a column's words from the FC in front of the scores without that FC");
    const int bytes = kGroup * fc_groups(first->layer.n), words = 4 * w.scattered();
    if (w.scattered() > w.rows) fail(w.scattered(), " rows of a column ", w.rows, " rows deep");
    for (const int b : w.from_byte)
      if (b < 0 || b % 4 != 0 || b + words > bytes)
        fail("a column's words from bytes ", b, "..", b + words - 1, " of ", bytes);
    w.narrow_at = round_up(out_base + g.slots * kGroup + first_bytes(first), kPiece);
  }
  return w;
}

// Scalar-memory words of the multipliers made from r (FcScoresInput::mult_base): r's piece (the
// count's 64 bytes) at the top, the multipliers from word 0 (the scores overwrite them later,
// once they are on the tiles).
static_assert(kRPieceWord == kScalarMemoryWords - kSoftmaxCountBytes / 4);

bool multipliers_from_r(const FcScoresInput* first) { return first && !first->mult_base.empty(); }

// A program of its own has no r in scalar memory: it reads r from its row.
void check_r_in_row(const FcScoresInput* first) {
  if (first && first->r_word >= 0)
    fail("r at scalar-memory word ", first->r_word,
         " in a program that did not compute it: only after a chain (generate_ffn_chain_softmax)");
}

// Narrow memory the FC in front of the scores takes past `before` (the query row, the outputs and
// the column copies): its resident rows, then the multipliers from r on their way to the aux rows.
// Returns where the multipliers land; `end` the bytes taken.
int multiplier_narrow(const FcScoresInput* first, int before, int& end) {
  const int at = round_up(resident_rows(first, before).end, kPiece);
  end = resident_rows(first, before).end;
  if (!multipliers_from_r(first)) return at;
  end = at + 4 * first->layer.n;
  if (end > kNarrowBytes) fail("the multipliers from r take narrow memory up to byte ", end);
  return at;
}

// Scalar memory's first `moved` bytes (whole 16-byte packets) to narrow byte `narrow_at` of tile
// 0, over the ring to the same bytes of `to`'s other tiles, then group i's 64 multipliers (float32,
// from narrow byte mult_at + 256 i) into its aux block's multiplier row (its first wide row, at
// to.base[i]). An infeed from scalar memory sends 16-byte packets (docs/chip.md; to one tile: the
// seed found one to 16 tiles delivering nothing on a device), each a fill of one FIFO row, whose
// first 16 bytes a wideToNarrow packs into narrow memory in order.
void scalar_memory_to_multiplier_rows(Emitter& e, const Groups& to, int moved, int narrow_at,
                                      int mult_at, int& ordinal) {
  const int packets = moved / 16, words = moved / 4;
  const int full = words / 64, rest = words % 64;
  e.add("ringcons0", cat("tiles=0x1 addr=", hex(kInputFifo), " dst=(1 x 1)(0 x 1)(0 x 1)(0 x ",
                         packets, ") sdims=1 cbuf=1 slots=1 mode=3"));
  e.add(
      "infeed",
      cat("smem=1 walk=(1 x 64)(-63 x ", full + (rest ? 1 : 0), ")(-63 x 1) k157=1 k160=1 par168=1",
          rest ? cat(" count_m1=", rest - 1, " tail_en=1 count_neg=", hex(64 - rest)) : "",
          " f308=0xb par314=1 par315=3 pop_wait=0x1 k336=1 f352=0x01 f391=2 dest=0x1 f434=0x3"));
  // A scalar fence over no tile: the infeed reads what the scalar core stored, not what a later
  // outfeed writes (Google's infeeds from scalar memory go before the outfeed that fills it, the
  // simulator's rule, docs/chip.md "Infeeds from scalar memory"; the seed's went after the
  // softmax, as here).
  e.add("scsync", "tiles=0xffff tokwait=1 tmask=0x0 sunits=0x0c");
  e.add("w2n", cat("tiles=0x1 w.addr=", hex(kInputFifo), " w=(0 x ", packets,
                   ") w.circ=1 w.rows=1 n.addr=", hex(narrow_at / 4),
                   " n=", strided_walk({{1, 4}, {4, packets}}, 6),
                   " n.lvl_mask=0x01 sync.en0=1 sync.id=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                   "sync.f45=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  // Tile 0 to the other tiles, 256 bytes a ring packet, to the same narrow bytes.
  const uint32_t others = mask_of(to) & ~tile_bit(0);
  if (others != 0) {
    std::vector<FfnBlock> blocks;
    for (int at = 0; at < moved; at += kPiece)
      blocks.push_back({0, (narrow_at + at) / 4, (narrow_at + at) / 4});
    ffn_broadcast_blocks(e, others, blocks, kGroup / 4, ordinal);
  }
  for (size_t i = 0; i < to.tile.size(); ++i)
    e.add("n2w",
          cat("tiles=", hex(tile_bit(to.tile[i])), " n.addr=", hex((mult_at + kPiece * int(i)) / 4),
              " n=", narrow_walk(kGroup), " n.lvl_mask=0x01 w.addr=", hex(to.base[i]),
              " w=(1 x 1) sync.en0=1 sync.f1=1 sync.id=5 sync.wait_lvl=1 sync.en1=1 "
              "sync.en2=1 tail_lvl=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

// The resident multiplier constants' rows of the groups on `tiles` (at wide units `units`) into
// scalar memory from word 0: one outfeed, a producer per row.
void constants_to_scalar(Emitter& e, const std::vector<int>& tiles, const std::vector<int>& units) {
  outfeed_to_scalar(e, int(tiles.size()));
  for (size_t g = 0; g < tiles.size(); ++g) rows_to_scalar(e, tiles[g], units[g], 1);
}

// The FC's multipliers from r (FcScoresInput::mult_base): the count's piece with r to scalar
// memory (unless the chain before left r there), then emit_group_multipliers_from_r.
void emit_multipliers_from_r(Emitter& e, const FcScoresInput& first, const Groups& f, int row_bytes,
                             int narrow_at, int& ordinal) {
  const int n = first.layer.n;
  if (first.mult_base.size() != size_t(n) || first.mult_padding.size() != size_t(n))
    fail(first.mult_base.size(), " multiplier constants and ", first.mult_padding.size(),
         " padding flags for ", n, " outputs");
  // Each group's narrowToWide reads 256 bytes: 64 multipliers.
  if (n % kGroup != 0)
    fail(n, " multipliers from r: not whole groups of ", kGroup, " (each group's row takes ",
         kPiece, " bytes)");
  // r from the row: the count's piece with it to the top of scalar memory; else r is already in
  // scalar memory (FcScoresInput::r_word).
  const bool from_row = first.r_word < 0;
  if (n > (from_row ? kRPieceWord : first.r_word))
    fail(n, " multipliers from r past scalar memory or over r at word ", first.r_word);
  MultipliersFromR m{f.tile, f.base, {}, first.mult_base, first.mult_padding};
  if (first.base_rows) {
    // (Weights right after the aux rows would lie where the constants' row is.)
    for (const int w : f.weights)
      if (w < 0) fail("resident multiplier constants of a group whose weights follow its aux rows");
    for (const int b : f.base) m.const_unit.push_back(b + kMultBaseRowUnit);
  }
  if (from_row) pieces_to_scalar_memory(e, {{f.tile[0], row_bytes, kRPieceWord}}, ordinal);
  emit_group_multipliers_from_r(e, m, from_row ? kRPieceWord + 1 : first.r_word, from_row ? 1 : 0,
                                narrow_at, ordinal);
}

// The query row and its count (`bytes`), already popped with the program's input (an FFN chain's,
// FfnChainTail) from byte `from` on, to narrow byte `to` of `tiles`: a packet at a time through
// the input FIFO rows, as products_stage moves its tables.
void row_from_pop(Emitter& e, uint32_t tiles, int bytes, int from, int to = 0) {
  if (from < 0 || from % 8 != 0) fail("a query row from byte ", from, " of the input");
  for (int at = 0, piece = 0; at < bytes; at += kPiece, ++piece) {
    if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    host_to_narrow(e, tiles, kInputFifo + 4 * (piece % kInputRows), to + at,
                   std::min(kPiece, bytes - at), (from + at) / 8);
  }
}

// Where the scores' part finds its query row when a chain popped the program's input
// (generate_ffn_chain_softmax): the row and count from byte `from` of that input, or with
// `count_only` the count block alone from there (the FC in front of the scores then reads
// nothing of the host's row: its groups' inputs are resident or moved on the chip).
struct PoppedRow {
  int from = 0;
  bool count_only = false;
};

// The scores' part of the softmax and attention programs: the query row in, the scores' op,
// every group's 64 scores to scalar memory in group order (head h's at h * positions bytes), then
// the count from the row's tail on the first group's tile, and the softmax on the scalar core.
// The row comes from its own pop, or with `popped` from the input a chain popped before
// (generate_ffn_chain_softmax); `ordinal` counts the ring producers to scalar memory before it.
// Returns the ordinal of the next transfer to scalar memory.
int scores_and_softmax(Emitter& e, const FcLayer& layer, const Groups& g, int row_bytes,
                       int out_base, const ScalarSoftmax& sm, const FcScoresInput* first,
                       const FcColumnWrite* columns, int ordinal = 0,
                       const PoppedRow* popped = nullptr) {
  Groups f = first ? first_groups(*first, layer, row_bytes) : Groups{};
  e.part("scores");
  if (!popped) {
    tile_fence(e, "units=0x020");
    input_address(e, layer.input_name);
    stream_input(e, mask_of(g) | (first ? mask_of(f) : 0u), g.row_bytes);
  } else if (popped->count_only) {
    // Only the first group's tile reads the count (to scalar memory, after the scores), and the
    // FC's first tile where its multipliers take r from the count block.
    const bool r_in_row = multipliers_from_r(first) && first->r_word < 0;
    row_from_pop(e, tile_bit(g.tile[0]) | (r_in_row ? tile_bit(f.tile[0]) : 0u), kSoftmaxCountBytes,
                 popped->from, row_bytes);
  } else {
    row_from_pop(e, mask_of(g) | (first ? mask_of(f) : 0u), g.row_bytes, popped->from);
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  const int before =
      std::max(out_base + g.slots * kGroup + first_bytes(first), column_copy_bytes(columns));
  if (first && !first->resident.empty()) {
    e.part("rope/key sums");
    // The resident rows into narrow memory on their tiles; their groups read from there.
    const ResidentRows r = resident_rows(first, before);
    for (const auto& [tile, row, narrow] : r.rows)
      e.add("w2n", cat("tiles=", hex(tile_bit(tile)), " w.addr=", hex(row), " w=(1 x 1) n.addr=",
                       hex(narrow / 4), " n=", narrow_walk(kPiece / 4), " n.lvl_mask=0x01"));
    tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
    wait_tokens(e);
    for (const FcResidentInput& p : first->resident)
      f.in_at[size_t(p.group)] = r.narrow(f.tile[size_t(p.group)], p.row) + p.byte;
  }
  if (multipliers_from_r(first)) {
    int end = 0;
    const int narrow_at = multiplier_narrow(first, before, end);
    e.part("rope multipliers");
    emit_multipliers_from_r(e, *first, f, row_bytes, narrow_at, ordinal);
  }
  if (first) {
    // Its outputs after the scores' (which are not written yet), then over the ring to the
    // scores' row at narrow 0 (the row is read by now).
    const int at = out_base + g.slots * kGroup;
    e.part("rope/key sums");
    op_stage(e, first->layer, f, 1, at);
    std::vector<std::pair<int, int>> pieces;
    for (size_t i = 0; i < f.tile.size(); ++i)
      pieces.emplace_back(f.tile[i], (at + kGroup * f.slot[i]) / 4);
    ffn_broadcast(e, mask_of(g), pieces, ordinal);
    // A column's words among those pieces (the key's sum): into the resident keys before the
    // scores read them.
    if (columns && !columns->from_byte.empty()) {
      e.part("key write");
      emit_column_words_from_narrow(e, *columns);
      emit_column_scatters(e, *columns);
    }
  }
  e.part("scores");
  op_stage(e, layer, g, 1, out_base);
  std::vector<std::array<int, 3>> pieces;
  for (size_t i = 0; i < g.tile.size(); ++i)
    pieces.push_back({g.tile[i], out_base + kGroup * g.slot[i], int(i) * kGroup / 4});
  pieces.push_back({g.tile[0], row_bytes, sm.count_word});
  e.part("softmax");
  pieces_to_scalar_memory(e, pieces, ordinal);
  scalar_memory_fence(e, int(pieces.size()));
  emit_scalar_softmax(e, sm);
  return ordinal;
}

// The batched FFN's narrow memory on every tile: X (the host's rows, then w2's input m over it) at
// 0, then h1, h3, g, a, m (rows x 64 bytes each), the MUL products (4 x that), the identity
// row, and w2's output (rows x 64 per slot).
struct FfnBatchMemory {
  int block, h1, h3, g, a, m, products, identity, y, end;
  FfnBatchMemory(int rows, int x_bytes, int down_slots) {
    block = rows * kGroup;
    h1 = round_up(x_bytes, 256);
    h3 = h1 + block;
    g = h3 + block;
    a = g + block;
    m = a + block;
    products = m + block;
    identity = products + 4 * block;
    y = identity + 256;
    end = y + down_slots * block;
  }
};

}  // namespace

void emit_group_multipliers_from_r(Emitter& e, const MultipliersFromR& m, int r_word, int pending,
                                   int narrow_at, int& ordinal) {
  const int groups = int(m.tile.size()), n = kGroup * groups;
  if (groups == 0 || m.row.size() != m.tile.size() || m.base.size() != size_t(n) ||
      m.padding.size() != size_t(n) ||
      (!m.const_unit.empty() && m.const_unit.size() != m.tile.size()))
    fail("multipliers from r of ", groups, " groups: ", m.row.size(), " rows, ", m.base.size(),
         " constants, ", m.padding.size(), " padding flags, ", m.const_unit.size(),
         " constants' rows");
  if (r_word < n || r_word >= kScalarMemoryWords)
    fail(n, " multipliers from r past scalar memory or over r at word ", r_word);
  const ScalarRopeMultipliers per_output{r_word, 0, m.base, m.padding};
  // The loop form where the constants are resident and it takes fewer bytes (the caller reserves
  // their rows where fc_multipliers_loop_pays, before placement): their rows land at words 0..n-1
  // (the depthwise round trip's transfer: one outfeed, a producer per row, no ring ordinal) and
  // the loop turns them into the multipliers in place.
  const bool loop = !m.const_unit.empty() && fc_multipliers_loop_pays(m.padding, pending);
  if (loop) constants_to_scalar(e, m.tile, m.const_unit);
  // Each 256-byte row counts as four 64-byte pieces.
  const int pieces = pending + (loop ? 4 * groups : 0);
  if (pieces > 0) scalar_memory_fence(e, pieces);
  if (loop)
    emit_scalar_rope_multipliers_loop(e, r_word, 0, 0, n);
  else
    emit_scalar_rope_multipliers(e, per_output);
  Groups to;
  to.tile = m.tile;
  to.base = m.row;
  scalar_memory_to_multiplier_rows(e, to, 4 * n, narrow_at, narrow_at, ordinal);
}

// (ffn_parts.h) The outfeed is the scalar-memory form (isa.md 2.10: k173 0, f222 0x3f, 4-byte
// words from `base`); the scalar core's loads wait for it (docs/chip.md).
void pieces_to_scalar_memory(Emitter& e, const std::vector<std::array<int, 3>>& pieces,
                             int& ordinal) {
  for (const auto& [tile, from, word] : pieces) {
    e.add("n2w", cat("tiles=", hex(tile_bit(tile)), " n.addr=", hex(from / 4),
                     " n=", narrow_walk(kGroup / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                     "tail_lvl=1"));
    e.add("outfeed",
          cat("base=", hex(word), " walk=(1 x ", kGroup / 4, ")(", 1 - kGroup / 4, " x 1)(",
              1 - kGroup / 4, " x 1) walk.inc3=1 k173=0 k178=1 k182=1 k214=1 f222=0x3f"));
    ring_send(e, tile, kRingFifo, 0x10000, ordinal++);
  }
}

void scalar_memory_fence(Emitter& e, int pieces) {
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync",
        cat("tiles=0xffff smask=0x020 thr5=", pieces * kGroup / 32, " wait=0x020 sunits=0x0c"));
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
}

int fc_batch_max_rows(int k, int slots, int row_bytes) {
  if (k <= 0) return 0;
  const int row = std::max(row_bytes, k);
  return std::min(kMaxInputBytes / row, (kNarrowBytes - 64) / (row + kGroup * slots));
}

namespace {

// fc_batch_unsupported of an input of K bytes whose op runs over op_k of them (FcLayer::op_k),
// a group taking `units` parameter units.
std::string batch_unsupported(int n, int k, int op_k, int units, int rows, int slots,
                              int row_bytes) {
  if (n <= 0 || fc_groups(n) > kMaxSlots * kTiles)
    return cat("N = ", n, ": the batch generator covers N = 1..", kMaxSlots * kTiles * kGroup);
  if (k <= 0 || k % kGroup != 0)
    return cat("K = ", k,
               ": the batch generator needs a multiple of 64 (fewer weights: FcLayer::weight_k)");
  if (op_k <= 0 || op_k % 4 != 0 || op_k > k)
    return cat("weights of K = ", op_k, " for an input of ", k,
               " bytes: the batch generator needs a multiple of 4, at most it");
  if (units * slots > kFcParamUnits)
    return cat("K = ", op_k, ": ", slots, " groups' weights do not fit one tile");
  if (row_bytes != 0 && (row_bytes < k || row_bytes % 8 != 0))
    return cat("rows of ", row_bytes, " bytes for K = ", k, ": need at least K, a multiple of 8");
  if (rows <= 0 || rows > fc_batch_max_rows(k, slots, row_bytes))
    return cat(rows, " rows of ", std::max(k, row_bytes), " bytes: the batch generator takes 1..",
               fc_batch_max_rows(k, slots, row_bytes),
               " (one tile's narrow memory holds X and the outputs)");
  return "";
}

}  // namespace

std::string fc_batch_unsupported(int n, int k, int rows, int slots, int row_bytes) {
  return batch_unsupported(n, k, k, fc_units_per_tile(k, false), rows, slots, row_bytes);
}

std::string fc_batch_unsupported(const FcLayer& layer, int rows, int slots, int row_bytes) {
  return batch_unsupported(layer.n, layer.k, layer.op_k(), fc_units_per_tile(layer), rows, slots,
                           row_bytes);
}

container::Executable generate_fc_batch(const FcLayer& layer, const FcPlacement& placement,
                                        int rows, int row_bytes, const FcParameterWrite* write) {
  const int groups = fc_groups(layer.n);
  Groups g = groups_of(groups, placement);
  g.row_bytes = row_bytes == 0 ? layer.k : row_bytes;
  if (const std::string why = fc_batch_unsupported(layer, rows, g.slots, row_bytes); !why.empty())
    fail(why);
  check_in_at(g, layer.op_k(), g.row_bytes);
  if (!layer.group_out_zp.empty() && (layer.group_out_zp.size() != size_t(groups) ||
                                      layer.group_clamp_min.size() != size_t(groups) ||
                                      layer.group_clamp_max.size() != size_t(groups)))
    fail("per-group output stages need one zero point and two clamps for each of ", groups,
         " groups");
  container::Executable eo = execution_executable(execution_program(layer, g, rows, write));
  eo.input_layers.push_back(boundary_layer(layer.input_name, 1, rows, g.row_bytes, layer.in_zp,
                                           layer.in_scale, false, layer.signed_input));
  const int total = groups * rows * kGroup;
  // One flat row of bytes ([G][rows][64], no tile layout); the caller reorders it.
  container::Layer out = boundary_layer(layer.output_name, total, layer.out_zp, layer.out_scale,
                                        true, layer.signed_output);
  out.shape = {{0, 0}, {0, total - 1}};
  eo.output_layers.push_back(std::move(out));
  eo.used_narrow_memory_bytes_per_tile = round_up(rows * g.row_bytes, 64) + g.slots * rows * kGroup;
  eo.dma_hints = execution_hints(layer.input_name, rows * g.row_bytes, layer.output_name, total);
  // The parameters are cached by the caller (fc_caching); no token ties the two here. With
  // `write`, the program streams those parameters first.
  if (write) carry_parameter_write(eo, *write);
  return eo;
}

int ffn_batch_max_rows(const FfnLayer& f, int down_slots) {
  for (int rows = kNarrowBytes / kGroup; rows > 0; --rows) {
    const int x = rows * std::max(f.up.k, f.down.k);
    // Above 4, whole fours (m's broadcast then goes 4 rows a piece).
    if (rows > 4 && rows % 4 != 0) continue;
    if (x <= kMaxInputBytes && FfnBatchMemory(rows, x, down_slots).end <= kNarrowBytes) return rows;
  }
  return 0;
}

container::Executable generate_ffn_batch(const FfnLayer& f, const FcPlacement& up_at,
                                         const FcPlacement& down_at, int rows) {
  const int hidden = f.up.n / 2, groups = hidden / kGroup;
  if (f.up.n % (2 * kGroup) != 0 || f.down.k != hidden || f.down.n % kGroup != 0)
    fail("FFN of ", f.up.n, " up outputs and w2 ", f.down.n, " x ", f.down.k,
         ": needs whole pairs of 64-output groups and w2's K = half of them");
  Groups up = groups_of(fc_groups(f.up.n), up_at);
  Groups down = groups_of(fc_groups(f.down.n), down_at);
  up.row_bytes = f.up.k;
  down.row_bytes = f.down.k;
  if (const std::string why = fc_batch_unsupported(f.up, 1, up.slots); !why.empty()) fail(why);
  if (const std::string why = fc_batch_unsupported(f.down, 1, down.slots); !why.empty()) fail(why);
  if (rows <= 0 || rows > ffn_batch_max_rows(f, down.slots))
    fail(rows, " rows: the batched FFN takes 1..", ffn_batch_max_rows(f, down.slots),
         " (one tile's narrow memory holds X, the gate's buffers and the outputs)");
  uint32_t gate_tiles = 0;
  for (int i = 0; i < groups; ++i) {
    const int tile = up.tile[size_t(2 * i)];
    if (up.tile[size_t(2 * i + 1)] != tile || up.slot[size_t(2 * i)] != 0)
      fail("the FFN placement must put w1's and w3's group ", i, " on one tile, w1's first");
    gate_tiles |= tile_bit(tile);
  }
  const FfnBatchMemory mem(rows, rows * std::max(f.up.k, f.down.k), down.slots);
  Emitter e;
  program_start(e);
  tile_fence(e, "units=0x020");
  input_address(e, f.up.input_name);
  stream_input(e, mask_of(up), rows * f.up.k);
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  op_stage(e, f.up, up, rows, mem.h1);  // slot 0 (w1) at h1, slot 1 (w3) at h3
  ffn_gate_setup(e, gate_tiles, mem.identity);
  ffn_gate(e, gate_tiles, {mem.h1, mem.h3, mem.g, mem.a, mem.m, mem.products}, rows * kGroup / 4,
           f);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  // m to w2's tiles as its X, [rows][hidden] at 0: 4 rows of a hidden group per 256-byte piece
  // when the rows come in fours, else row by row in 64-byte pieces.
  int ordinal = 0;
  if (rows % 4 == 0) {
    std::vector<FfnBlock> blocks;
    for (int r = 0; r < rows; r += 4)
      for (int i = 0; i < groups; ++i)
        blocks.push_back(
            {up.tile[size_t(2 * i)], (mem.m + kGroup * r) / 4, (r * hidden + kGroup * i) / 4});
    ffn_broadcast_blocks(e, mask_of(down), blocks, hidden / 4, ordinal);
  } else {
    std::vector<std::pair<int, int>> pieces;
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < groups; ++i)
        pieces.emplace_back(up.tile[size_t(2 * i)], (mem.m + kGroup * r) / 4);
    ffn_broadcast(e, mask_of(down), pieces, ordinal);
  }
  op_stage(e, f.down, down, rows, mem.y);
  output_stage(e, f.down, down, rows, mem.y, ordinal);
  container::Executable eo = execution_executable(e.finish());
  eo.input_layers.push_back(boundary_layer(f.up.input_name, 1, rows, f.up.k, f.up.in_zp,
                                           f.up.in_scale, false, f.up.signed_input));
  const int total = fc_groups(f.down.n) * rows * kGroup;
  container::Layer out = boundary_layer(f.down.output_name, total, f.down.out_zp, f.down.out_scale,
                                        true, f.down.signed_output);
  out.shape = {{0, 0}, {0, total - 1}};
  eo.output_layers.push_back(std::move(out));
  eo.used_narrow_memory_bytes_per_tile = mem.end;
  eo.dma_hints = execution_hints(f.up.input_name, rows * f.up.k, f.down.output_name, total);
  return eo;
}

std::string fc_batch_softmax_unsupported(int heads, int positions) {
  if (heads <= 0 || positions <= 0 || positions % kGroup != 0)
    return cat(heads, " heads of ", positions, " positions: needs whole 64-position groups");
  // The scores (then e), 1 / S per head and the count's 64 bytes in the 16 KiB of scalar memory.
  const int64_t bytes = int64_t{heads} * (positions + 4) + kSoftmaxCountBytes;
  if (bytes > 16384)
    return cat(heads, " heads of ", positions, " positions: ", bytes,
               " bytes of scores, sums and count past the 16 KiB of scalar memory");
  return "";
}

namespace {

// The softmax program's scalar memory: the scores (head after head) from word 0, 1 / S per head,
// the count. Throws Error where the layer and heads do not fit.
ScalarSoftmax softmax_words(const FcLayer& layer, const std::vector<float>& exp_mult) {
  const int heads = int(exp_mult.size());
  const int positions = heads > 0 ? layer.n / heads : 0;
  if (heads <= 0 || layer.n % heads != 0 || layer.n % kGroup != 0)
    fail("a scores program of ", layer.n, " outputs for ", heads, " heads");
  if (const std::string why = fc_batch_softmax_unsupported(heads, positions); !why.empty())
    fail(why);
  ScalarSoftmax sm;
  sm.heads = heads;
  sm.positions = positions;
  sm.exp_mult = exp_mult;
  sm.inv_word = heads * positions / 4;
  sm.count_word = sm.inv_word + heads;
  return sm;
}

// e and 1 / S: heads x positions bytes, then a float32 per head.
int softmax_out_bytes(const ScalarSoftmax& sm) { return sm.heads * (sm.positions + 4); }

// e and 1 / S from scalar memory to the output `name`, then the program's end.
void push_softmax_and_end(Emitter& e, const std::string& name, int out_bytes) {
  output_address(e, name);
  descriptor(e, 5, 4, 6, out_bytes, 3);
  emit_push_words(e, 0, out_bytes / 4);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
}

// The chain's products that generate_ffn_chain_softmax's `moved` sends to the FC in front of the
// scores, as 64-byte pieces (tile, byte from the products' narrow base) in row order: each moved
// group's P1 then R, the j-th moved group's slot at row byte 128 j. Every other group of that FC
// reads a resident row: the host's row is not sent.
std::vector<std::pair<int, int>> moved_pieces(const FcTableProducts& products,
                                              const std::vector<FcPlacement>& layers_at,
                                              const FcScoresInput* first,
                                              const std::vector<int>& moved) {
  if (moved.empty()) return {};
  if (!first || moved.size() != first->at.tiles.size() || products.layer < 0 ||
      size_t(products.layer) >= layers_at.size())
    fail(moved.size(), " moved products for ", first ? first->at.tiles.size() : 0,
         " groups in front of the scores after a chain ",
         products.layer < 0 ? "without products" : "with products");
  // A moved slot holds one product group's P1 and R: each group of the FC reads both.
  if (first->layer.k != 2 * kGroup)
    fail("moved products for an FC of K = ", first->layer.k, " in front of the scores: a moved ",
         "slot holds P1 and R, ", 2 * kGroup, " bytes");
  const std::vector<std::pair<int, int>> places =
      fc_product_bytes(products, layers_at[size_t(products.layer)].tiles);
  std::vector<std::pair<int, int>> slot_group;  // in_at, group
  for (size_t g = 0; g < moved.size(); ++g) {
    const bool resident =
        std::any_of(first->resident.begin(), first->resident.end(),
                    [&](const FcResidentInput& r) { return size_t(r.group) == g; });
    if (resident == (moved[g] >= 0) || moved[g] >= int(places.size()))
      fail("group ", g, " in front of the scores: ", resident ? "resident and moved" : "neither",
           " (moved from products ", moved[g], " of ", places.size(), ")");
    if (!resident) slot_group.emplace_back(first->at.in_at.at(g), int(g));
  }
  std::sort(slot_group.begin(), slot_group.end());
  std::vector<std::pair<int, int>> pieces;
  for (size_t j = 0; j < slot_group.size(); ++j) {
    const auto [in_at, g] = slot_group[j];
    if (in_at != 2 * kGroup * int(j))
      fail("moved products of group ", g, " at row byte ", in_at, ": the moved groups' slots ",
           "follow each other from byte 0");
    const auto [tile, byte] = places[size_t(moved[size_t(g)])];
    pieces.emplace_back(tile, byte);           // P1
    pieces.emplace_back(tile, byte + kGroup);  // R
  }
  return pieces;
}

// Raw bytes (e and the float32 sums): unsigned, no sign bits flipped.
container::Layer softmax_output_layer(const std::string& name, int out_bytes) {
  container::Layer out = boundary_layer(name, out_bytes, 0, 1.0f, true, false);
  out.shape = {{0, 0}, {0, out_bytes - 1}};
  return out;
}

// The weighted sum after the softmax (generate_fc_batch_attention, and a joined program's tail in
// chain_then_softmax): its groups, reading e from its narrow base on; scalar memory from word 0:
// e (head h's at h * positions, padded to 256 bytes so that e and the multipliers leave as whole
// pieces), the multipliers, 1 / S per head, the count.
struct SumAfterSoftmax {
  ScalarSoftmax sm;
  ScalarValuePrep prep;
  Groups v;       // in_at: from e's first byte
  int moved = 0;  // e padded and the multipliers: the bytes leaving scalar memory
  int e_padded = 0;
  int words() const { return sm.count_word + kSoftmaxCountBytes / 4; }
};

SumAfterSoftmax sum_after_softmax(const FcLayer& layer, const std::vector<float>& exp_mult,
                                  const FcValueSum& sum) {
  const int heads = int(exp_mult.size());
  const int positions = heads > 0 ? layer.n / heads : 0;
  if (heads <= 0 || layer.n % heads != 0 || layer.n % kGroup != 0)
    fail("a scores program of ", layer.n, " outputs for ", heads, " heads");
  if (const std::string why = fc_batch_attention_unsupported(heads, positions, sum.layer.n);
      !why.empty())
    fail(why);
  if (sum.layer.k != positions || sum.mult_base.size() != size_t(sum.layer.n) ||
      sum.mult_head.size() != size_t(sum.layer.n))
    fail("a weighted sum of K = ", sum.layer.k, " over ", positions, " positions with ",
         sum.mult_base.size(), " multipliers for ", sum.layer.n, " outputs");
  SumAfterSoftmax a;
  const int e_bytes = heads * positions;
  a.e_padded = round_up(e_bytes, kPiece);
  a.v = groups_of(fc_groups(sum.layer.n), sum.at);
  a.v.row_bytes = e_bytes;
  if (const std::string why = fc_batch_unsupported(sum.layer, 1, a.v.slots, e_bytes); !why.empty())
    fail(why);
  for (int at : a.v.in_at)
    if (at < 0 || at % 4 != 0 || at + sum.layer.op_k() > e_bytes)
      fail("a sum group reads K = ", sum.layer.op_k(), " bytes from byte ", at, " of ", e_bytes);
  for (int base : a.v.base)
    if (base % 4 != 0) fail("a sum group's parameters at wide unit ", base, ": not row-aligned");
  a.moved = a.e_padded + 4 * sum.layer.n;
  a.sm.heads = heads;
  a.sm.positions = positions;
  a.sm.exp_mult = exp_mult;
  const int mult_word = a.e_padded / 4;
  a.sm.inv_word = mult_word + sum.layer.n;
  a.sm.count_word = a.sm.inv_word + heads;
  a.prep = {heads,         positions,    0, a.sm.count_word, a.sm.inv_word, mult_word,
            sum.mult_base, sum.mult_head};
  return a;
}

// Where the layer's rest (FcLayerRest) lies, at the top of narrow memory on every tile: x_q's
// pieces saved on the add's first tile, the add's input pairs (x_q's piece g, o's piece g at
// 128 g), its outputs (x2), x2 broadcast to the norm's tiles, the norm's outputs, then the
// multipliers' way from scalar memory (tile 0 first, emit_group_multipliers_from_r).
struct RestAt {
  const FcLayerRest* rest = nullptr;
  Groups add, norm;
  int save = 0, pairs = 0, x2 = 0, x2_in = 0, ffn_in = 0, mults = 0;
};

RestAt rest_at(const FcLayerRest& r) {
  const int groups = fc_groups(r.add.n);
  if (r.add.n % kGroup != 0 || r.add.k != 2 * kGroup || r.norm.k != kGroup || r.norm.n != r.add.n ||
      r.n <= 0 || r.n > r.add.n || r.norm_base.size() != size_t(r.norm.n) ||
      r.norm_padding.size() != size_t(r.norm.n) || r.output_name.empty())
    fail("the layer's rest: an add of K = ", r.add.k, " (needs 128) and N = ", r.add.n,
         ", a norm of K = ", r.norm.k, " (needs 64) and N = ", r.norm.n, ", RMSNorm over ", r.n,
         " bytes, ", r.norm_base.size(), " constants, ", r.norm_padding.size(),
         " padding flags, output '", r.output_name, "'");
  if (chain_rms_x_word(groups) < kGroup * groups)
    fail("the layer's rest: x2's ", groups, " groups and their multipliers past scalar memory");
  if (!r.norm_const_units.empty() && r.norm_const_units.size() != size_t(groups))
    fail("the layer's rest: ", r.norm_const_units.size(), " constants' rows for ", groups,
         " norm groups");
  for (const int unit : r.norm_const_units)
    if (unit < 0 || unit % 4 != 0 || unit + 4 > kFcParamUnits)
      fail("the layer's rest: a norm group's constants' row at wide unit ", unit);
  if (r.ffn && r.next)
    fail("the layer's rest with the last FFN and a next layer: the next layer's chain has its",
         " own, so the rest takes no FFN");
  RestAt p;
  p.rest = &r;
  p.add = groups_of(groups, r.add_at);
  p.norm = groups_of(groups, r.norm_at);
  int bytes = 0;
  const auto take = [&bytes](int n) {
    const int at = bytes;
    bytes += n;
    return at;
  };
  p.save = take(kGroup * groups);
  p.pairs = take(2 * kGroup * groups);
  p.x2 = take(kGroup * p.add.slots);
  p.x2_in = take(kGroup * groups);
  p.ffn_in = take(kGroup * p.norm.slots);
  bytes = round_up(bytes, kPiece);
  p.mults = take(4 * kGroup * groups);
  const int top = kNarrowBytes - round_up(bytes, kPiece);
  for (int* at : {&p.save, &p.pairs, &p.x2, &p.x2_in, &p.ffn_in, &p.mults}) *at += top;
  p.add.row_bytes = r.add.k;
  p.norm.row_bytes = r.norm.k;
  for (int g = 0; g < groups; ++g) {
    p.add.in_at[size_t(g)] = p.pairs + 2 * kGroup * g;
    p.norm.in_at[size_t(g)] = p.x2_in + kGroup * g;
  }
  return p;
}

// x_q's pieces (the chain's follower x_follower's outputs, or with -1 the chain's input pieces)
// to the add's first tile, before the tail's bytes overwrite them.
void save_rest_input(Emitter& e, const RestAt& p, const FfnChainTailAt& at, int& ordinal) {
  const FcLayerRest& r = *p.rest;
  std::vector<std::pair<int, int>> pieces;
  if (r.x_follower < 0) {
    pieces = at.input_pieces;
  } else if (size_t(r.x_follower) < at.follower_out.size()) {
    for (const auto& [tile, byte] : at.follower_out[size_t(r.x_follower)])
      pieces.emplace_back(tile, byte / 4);
  }
  if (pieces.size() != p.add.tile.size())
    fail("the layer's rest reads x_q from the chain's follower ", r.x_follower, " of ",
         at.follower_out.size(), " (-1: its input, ", at.input_pieces.size(), " pieces): needs ",
         p.add.tile.size(), " groups");
  if (at.narrow_end > p.save)
    throw LayoutRejected(cat("the chain's narrow bytes up to ", at.narrow_end,
                             " reach the layer's rest from byte ", p.save));
  ffn_broadcast(e, tile_bit(p.add.tile[0]), pieces, ordinal, p.save);
}

// The chain side of a joined program (generate_ffn_chain_softmax, generate_fc_chain_softmax):
// where its table products are computed, its output names, its r, its input's type, and the
// generator that writes it with a tail.
struct ChainBeforeScores {
  const FcTableProducts& products;
  const std::vector<FcPlacement>& layers_at;  // the placements products.layer indexes
  std::string output_name, r_name;            // r_name: "" without r
  int rms_groups = 0;                         // r's follower's groups, 0 without r
  bool signed_input = true;
  std::function<FfnChainPrograms(const FfnChainTail&)> generate;
};

// generate_ffn_chain_softmax's arguments after the chain's (references and pointers to the
// caller's, which outlive the program's generation).
struct JoinedArgs {
  const FcLayer& layer;
  const FcPlacement& placement;
  int row_bytes = 0;
  const std::vector<float>& exp_mult;
  const FcScoresInput* first = nullptr;
  const FcColumnWrite* columns = nullptr;
  const std::vector<int>& moved;
  const FcValueSum* sum = nullptr;
  const FcChainValueWrite* values = nullptr;
  const FcLayerRest* rest = nullptr;
};

struct JoinedTail;
// What a joined layer's tail reads when it emits, owned with it (make_joined_tail).
struct JoinedState {
  const FcLayer* layer = nullptr;
  int row_bytes = 0;
  const FcScoresInput* first = nullptr;
  std::vector<int> moved;
  const FcValueSum* sum = nullptr;
  const FcChainValueWrite* values = nullptr;
  std::optional<SumAfterSoftmax> summed;
  ScalarSoftmax sm;
  Groups g;
  int out_bytes = 0, out_base = 0;
  std::optional<FcColumnWrite> placed;
  std::vector<std::pair<int, int>> pieces;  // the moved products
  std::optional<RestAt> rest_place;
  // This layer's value write marks [value_marks_from, marks_end): a program holding more than one
  // layer marks more after them.
  size_t value_marks_from = 0, marks_end = 0;
  std::vector<JoinedTail> nested;  // the next layer's, behind this one's rest (FcLayerRest::next)
};

// A joined layer's tail after its chain (the value write, the scores, the softmax, the sum, wo and
// the rest) and, once the program is generated, its marks put in order.
struct JoinedTail {
  FfnChainTail tail;
  std::shared_ptr<JoinedState> state;
  // The write's marks after the column's, within this layer's marks; the nested layers' likewise.
  void order_marks(std::vector<isa::EncodedField>& marks) const {
    const JoinedState& s = *state;
    if (s.values) {
      const size_t write_marks = 2 * s.values->write.cache_units.size();
      if (s.marks_end < s.value_marks_from + write_marks)
        fail("the value write marked ", s.marks_end - s.value_marks_from, " fields, not ",
             write_marks);
      const auto from = marks.begin() + long(s.value_marks_from);
      std::rotate(from, from + long(write_marks), marks.begin() + long(s.marks_end));
    }
    for (const JoinedTail& t : s.nested) t.order_marks(marks);
  }
};
JoinedTail make_joined_tail(const ChainBeforeScores& chain, const JoinedArgs& a);

// An FfnChain's side of a joined program, generated by `generate` (none for a nested one).
ChainBeforeScores ffn_chain_side(const FfnChain& chain,
                                 std::function<FfnChainPrograms(const FfnChainTail&)> generate) {
  if (chain.next.empty()) fail("the scores after a chain without followers");
  const FcChainRms& rms = chain.rms;
  const bool with_r = rms.layer >= 0 && size_t(rms.layer) < chain.next.size();
  return {chain.products,
          chain.next_at,
          chain.next.back().output_name,
          with_r ? rms.output_name : "",
          with_r ? fc_groups(chain.next[size_t(rms.layer)].n) : 0,
          chain.ffn.up.signed_input,
          std::move(generate)};
}

// The next layer behind the rest (FcLayerRest::next): its chain from the FFN input's and x2's
// pieces where the rest left them, its tail (kept in `nested` for its marks) after it.
int emit_next_layer(Emitter& e, const RestAt& p, const FfnChainTailAt& at,
                    std::vector<std::pair<int, int>> up_pieces,
                    std::vector<std::pair<int, int>> x2_pieces, int ordinal, OutputList& outs,
                    std::vector<JoinedTail>& nested) {
  const FcJoinedLayer& next = *p.rest->next;
  if (!next.chain || !next.layer)
    fail("the next layer behind the rest needs its chain and its scores");
  FfnChainFrom from;
  from.up_pieces = std::move(up_pieces);
  from.extra_pieces = std::move(x2_pieces);
  from.tables_at = at.tables_at;
  from.tail_input_at = at.input_at;
  // x2 waits in the rest's bytes until the next chain's follower 0 reads it.
  from.narrow_below = p.save;
  nested.push_back(
      make_joined_tail(ffn_chain_side(*next.chain, nullptr),
                       {*next.layer, next.placement, next.row_bytes, next.exp_mult, next.first,
                        next.columns, next.moved, next.sum, next.values, next.rest}));
  emit_ffn_chain(e, *next.chain, next.up, next.down, &nested.back().tail, &from, ordinal, outs);
  return ordinal;
}

// The rest after wo (its pieces `o`, (tile, narrow byte) in group order): the add, r_ffn, the
// norm with its multipliers from r_ffn, [the FFN input; x2] to the host, with `ffn` the FFN and y
// to the host, the program's end; with `next` the next layer (emit_next_layer; `at` the outer
// chain's tail place, `nested` where its tail is kept).
// Returns the ring ordinal past its producers; its outputs go into `outs`.
int emit_layer_rest(Emitter& e, const RestAt& p, const std::vector<std::pair<int, int>>& o,
                    int ordinal, OutputList& outs, const FfnChainTailAt* at = nullptr,
                    std::vector<JoinedTail>* nested = nullptr) {
  const FcLayerRest& r = *p.rest;
  const int groups = int(p.add.tile.size());
  if (int(o.size()) != groups)
    fail("the layer's rest adds wo's ", o.size(), " groups to x_q's ", groups);
  e.part("rest: add");
  std::vector<std::pair<int, int>> pairs;
  for (int g = 0; g < groups; ++g) {
    pairs.emplace_back(p.add.tile[0], (p.save + kGroup * g) / 4);
    pairs.emplace_back(o[size_t(g)].first, o[size_t(g)].second / 4);
  }
  ffn_broadcast(e, mask_of(p.add), pairs, ordinal, p.pairs);
  op_stage(e, r.add, p.add, 1, p.x2);
  // x2 into scalar memory below r's word, r_ffn there; x2 to the norm's tiles meanwhile.
  const int x_word = chain_rms_x_word(groups);
  std::vector<std::array<int, 3>> to_scalar;
  std::vector<std::pair<int, int>> x2, x2_words;
  for (int g = 0; g < groups; ++g) {
    const int tile = p.add.tile[size_t(g)], byte = p.x2 + kGroup * p.add.slot[size_t(g)];
    x2.emplace_back(tile, byte);
    x2_words.emplace_back(tile, byte / 4);
    to_scalar.push_back({tile, byte, x_word + kGroup / 4 * g});
  }
  e.part("rest: RMS");
  pieces_to_scalar_memory(e, to_scalar, ordinal);
  scalar_memory_fence(e, groups);
  emit_scalar_rms(e, {x_word, r.n, r.add.out_zp, r.mean_mult, kChainRmsRWord});
  e.part("rest: norm");
  ffn_broadcast(e, mask_of(p.norm), x2_words, ordinal, p.x2_in);
  MultipliersFromR m;
  m.tile = p.norm.tile;
  m.row = p.norm.base;
  m.base = r.norm_base;
  m.padding = r.norm_padding;
  m.const_unit = r.norm_const_units;
  emit_group_multipliers_from_r(e, m, kChainRmsRWord, 0, p.mults, ordinal);
  op_stage(e, r.norm, p.norm, 1, p.ffn_in);
  std::vector<std::pair<int, int>> blocks;
  for (int g = 0; g < groups; ++g)
    blocks.emplace_back(p.norm.tile[size_t(g)], p.ffn_in + kGroup * p.norm.slot[size_t(g)]);
  blocks.insert(blocks.end(), x2.begin(), x2.end());
  e.part("rest: out");
  ordinal = blocks_output_stage(e, r.output_name, blocks, kGroup, ordinal,
                                r.ffn == nullptr && r.next == nullptr);
  {  // [the FFN input; x2]: both int8, the FFN input's grid named
    const int total = kGroup * int(blocks.size());
    container::Layer out = boundary_layer(r.output_name, total, r.norm.out_zp, r.norm.out_scale,
                                          true, r.norm.signed_output);
    out.shape = {{0, 0}, {0, total - 1}};
    outs.add(std::move(out), total);
  }
  if (r.next) {
    if (!at || !nested) fail("the next layer behind a rest outside a chain's tail");
    std::vector<std::pair<int, int>> in;
    for (int g = 0; g < groups; ++g)
      in.emplace_back(p.norm.tile[size_t(g)], (p.ffn_in + kGroup * p.norm.slot[size_t(g)]) / 4);
    return emit_next_layer(e, p, *at, in, x2_words, ordinal, outs, *nested);
  }
  if (!r.ffn) return ordinal;
  // The FFN reads its input's pieces first (to narrow 0 of w1/w3's tiles), so its buffers may
  // cover the rest's bytes after that.
  std::vector<std::pair<int, int>> in;
  for (int g = 0; g < groups; ++g)
    in.emplace_back(p.norm.tile[size_t(g)], (p.ffn_in + kGroup * p.norm.slot[size_t(g)]) / 4);
  e.part("last FFN");
  const FfnFromPieces y = emit_ffn_from_pieces(e, *r.ffn, r.ffn_up, r.ffn_down, in, ordinal);
  ordinal = blocks_output_stage(e, r.ffn_output_name, y.y, kGroup, ordinal, true);
  const FcLayer& down = r.ffn->down;  // y, on w2's output grid
  container::Layer out = boundary_layer(r.ffn_output_name, down.n, down.out_zp, down.out_scale,
                                        true, down.signed_output);
  out.shape = {{0, 0}, {0, down.n - 1}};
  outs.add(std::move(out), down.n);
  return ordinal;
}

// The bytes the sum's program returns: the last FC's [G][64].
const FcLayer& sum_last(const FcValueSum& sum) { return sum.out.n > 0 ? sum.out : sum.layer; }
const std::string& sum_output_name(const FcValueSum& sum) { return sum_last(sum).output_name; }
int sum_output_bytes(const FcValueSum& sum) { return fc_groups(sum_last(sum).n) * kGroup; }
container::Layer sum_output_layer(const FcValueSum& sum) {
  const FcLayer& last = sum_last(sum);
  const int total = sum_output_bytes(sum);
  container::Layer out = boundary_layer(last.output_name, total, last.out_zp, last.out_scale, true,
                                        last.signed_output);
  out.shape = {{0, 0}, {0, total - 1}};
  return out;
}

// The sum's stages after scores_and_softmax: the value prep on the scalar core, e and the
// multipliers to every sum tile from narrow byte `e_base` (each group's multipliers into its row),
// the sum's op, wo where `sum.out` is given, and the last FC's groups to the host, the program's
// end (with `rest`, the layer's rest after wo first). Returns the narrow bytes per tile it takes
// (the rest's, at the top, not counted). `ordinal` comes back past the stages' producers.
int emit_sum_after_softmax(Emitter& e, const FcValueSum& sum, const SumAfterSoftmax& a, int e_base,
                           int& ordinal, OutputList& outs, const RestAt* rest = nullptr,
                           const FfnChainTailAt* at = nullptr,
                           std::vector<JoinedTail>* nested = nullptr) {
  Groups v = a.v;
  const int sum_out = e_base + a.moved;
  const int end = sum_out + v.slots * kGroup;
  if (end > kNarrowBytes)
    fail("the scores, e, the multipliers and the sums take ", end, " bytes of narrow memory");
  for (int& at : v.in_at) at += e_base;
  e.part("sum: value prep");
  emit_scalar_value_prep(e, a.prep);
  e.part("sum: e to rows");
  scalar_memory_to_multiplier_rows(e, v, a.moved, e_base, e_base + a.e_padded, ordinal);
  e.part("sum: op");
  op_stage(e, sum.layer, v, 1, sum_out);
  if (sum.out.n <= 0) {
    ordinal = output_stage(e, sum.layer, v, 1, sum_out, ordinal);
    outs.add(sum_output_layer(sum), sum_output_bytes(sum));
    return end;
  }
  // The sum's pieces to out's tiles as its input row (at narrow 0: the scores' row and e are read
  // by now), then out's op and its groups to the host.
  Groups w = groups_of(fc_groups(sum.out.n), sum.out_at);
  w.row_bytes = sum.out.k;
  const int n = int(v.tile.size()), stride = sum.out_stride;
  if (stride <= 0 || stride > kGroup || stride % 4 != 0)
    fail("the sum's pieces ", stride, " bytes apart: needs a multiple of 4 up to 64");
  if (sum.out.k != round_up(stride * n, kGroup))
    fail("an FC of K = ", sum.out.k, " after a sum of ", n, " groups ", stride, " bytes apart");
  if (const std::string why = fc_batch_unsupported(sum.out, 1, w.slots); !why.empty()) fail(why);
  // (The last piece's tail may pass K: bytes below the sum's outputs, read by now.)
  if (std::max(sum.out.k, stride * (n - 1) + kGroup) > sum_out)
    fail("the FC after the sum reads ", sum.out.k, " bytes over the sum's outputs at ", sum_out);
  std::vector<std::pair<int, int>> pieces;
  for (size_t i = 0; i < v.tile.size(); ++i)
    pieces.emplace_back(v.tile[i], (sum_out + kGroup * v.slot[i]) / 4);
  e.part("sum: pieces to wo");
  // One broadcast: piece i at byte stride i, each over the one before's tail (below 64 bytes).
  ffn_broadcast(e, mask_of(w), pieces, ordinal, 0, stride);
  const int used = end + w.slots * kGroup;
  if (used > kNarrowBytes) fail("the FC after the sum takes ", used, " bytes of narrow memory");
  e.part("wo");
  op_stage(e, sum.out, w, 1, end);
  ordinal = output_stage(e, sum.out, w, 1, end, ordinal, rest == nullptr);
  outs.add(sum_output_layer(sum), sum_output_bytes(sum));
  if (rest) {
    std::vector<std::pair<int, int>> o;
    for (size_t i = 0; i < w.tile.size(); ++i) o.emplace_back(w.tile[i], end + kGroup * w.slot[i]);
    ordinal = emit_layer_rest(e, *rest, o, ordinal, outs, at, nested);
  }
  return used;
}

}  // namespace

FcScoresProgram generate_fc_batch_softmax(const FcLayer& layer, const FcPlacement& placement,
                                          int row_bytes, const std::vector<float>& exp_mult,
                                          const FcParameterWrite* write, const FcScoresInput* first,
                                          const FcRowWrite* rows, const FcColumnWrite* columns) {
  const ScalarSoftmax sm = softmax_words(layer, exp_mult);
  const Groups g = query_row_groups(layer, placement, row_bytes);
  const int out_bytes = softmax_out_bytes(sm);
  check_r_in_row(first);

  Emitter e;
  const int out_base = round_up(g.row_bytes, 64);
  if (rows && !write && !columns) fail("parameter rows follow a parameter or column write");
  const std::optional<FcColumnWrite> placed = placed_columns(columns, g, out_base, first);
  const FcColumnWrite* cw = placed ? &*placed : nullptr;
  program_start(e);
  std::vector<uint8_t> parameters = emit_parameter_writes(
      e,
      write ? std::vector<const FcParameterWrite*>{write} : std::vector<const FcParameterWrite*>{},
      rows, cw);
  scores_and_softmax(e, layer, g, row_bytes, out_base, sm, first, cw);
  push_softmax_and_end(e, layer.output_name, out_bytes);

  container::Executable eo = execution_executable(e.finish());
  eo.input_layers.push_back(boundary_layer(layer.input_name, 1, 1, g.row_bytes, layer.in_zp,
                                           layer.in_scale, false, layer.signed_input));
  eo.output_layers.push_back(softmax_output_layer(layer.output_name, out_bytes));
  const int before =
      std::max(out_base + g.slots * kGroup + first_bytes(first), column_copy_bytes(cw));
  int first_end = 0;
  multiplier_narrow(first, before, first_end);
  eo.used_narrow_memory_bytes_per_tile = std::max(before, first_end);
  eo.dma_hints = execution_hints(layer.input_name, g.row_bytes, layer.output_name, out_bytes);
  carry_parameters(eo, std::move(parameters));
  return scores_marks(std::move(eo), e, rows, cw);
}

std::string ffn_chain_softmax_unsupported(int heads, int positions, int rms_groups,
                                          int sum_outputs) {
  if (std::string why = fc_batch_softmax_unsupported(heads, positions); !why.empty()) return why;
  if (rms_groups <= 0) return "";
  // The scores, 1 / S and the count from word 0 up (before them the multipliers from r, read from
  // word kChainRmsRWord); the chain's x and r at the top.
  const int64_t words = int64_t{heads} * positions / 4 + heads + kSoftmaxCountBytes / 4;
  const int top = chain_rms_x_word(rms_groups);
  if (words > top)
    return cat(heads, " heads of ", positions, " positions: the scores, sums and count take ",
               words, " words of scalar memory, past the chain's x (", rms_groups,
               " groups) and r from word ", top);
  if (sum_outputs > top)
    return cat(sum_outputs, " multipliers from r reach the chain's x (", rms_groups,
               " groups) and r from word ", top);
  return "";
}

namespace {

// A joined program's value write (FcChainValueWrite) at the start of its tail: v~'s pieces from
// where the chain's follower left them, side by side from the first 64-byte boundary past the
// chain's narrow bytes on every cache group's tile, the quads from the next 256-byte boundary
// past the pieces and windows. Returns the narrow bytes it took.
int emit_chain_value_write(Emitter& e, const FcChainValueWrite& values, const FfnChainTailAt& at,
                           int& ordinal) {
  if (values.layer < 0 || size_t(values.layer) >= at.follower_out.size())
    fail("a value write from the chain's follower ", values.layer, " of ", at.follower_out.size());
  const std::vector<std::pair<int, int>>& outs = at.follower_out[size_t(values.layer)];
  std::vector<std::pair<int, int>> pieces;
  for (const int g : values.groups) {
    if (g < 0 || size_t(g) >= outs.size())
      fail("v~'s piece from group ", g, " of the chain's follower ", values.layer, " (",
           outs.size(), " groups)");
    pieces.emplace_back(outs[size_t(g)].first, outs[size_t(g)].second / 4);
  }
  FcValueWrite w = values.write;
  const int base = round_up(at.narrow_end, kGroup);
  int end = base + kGroup * int(pieces.size());
  for (int& b : w.from_byte) {
    b += base;
    end = std::max(end, b + kGroup);
  }
  w.narrow_at = round_up(end, kPiece);
  const int used = fc_value_write_narrow_bytes(w);
  if (used > kNarrowBytes)
    fail("the value write after the chain takes ", used, " bytes of narrow memory");
  uint32_t tiles = 0;
  for (const FcParameterRow& r : w.vectors.rows) tiles |= tile_bit(r.tile);
  emit_value_copies(e, w);
  ffn_broadcast(e, tiles, pieces, ordinal, base);
  emit_value_vectors_from_narrow(e, w);
  emit_value_landings(e, w);
  return used;
}

// The tail's emit (make_joined_tail): its outputs go into at.outputs as they leave.
int emit_joined_tail(Emitter& e, int& ordinal, const FfnChainTailAt& at, JoinedState& s) {
  if (!at.outputs) fail("a joined layer's tail without a list for its outputs");
  OutputList& outs = *at.outputs;
  const int input_at = at.input_at, products_at = at.products_at;
  const FcColumnWrite* cw = s.placed ? &*s.placed : nullptr;
  // x_q before anything: the tail's bytes go where the chain left it.
  e.part("rest: x_q saved");
  if (s.rest_place) save_rest_input(e, *s.rest_place, at, ordinal);
  // The value write first: it reads the followers' outputs, which nothing after it keeps.
  int value_end = 0;
  if (s.values) {
    s.value_marks_from = e.marks().size();
    e.part("value write");
    value_end = emit_chain_value_write(e, *s.values, at, ordinal);
  }
  // The chain's narrow memory is free by now (its outputs have left) but for its products:
  // the moved ones go first, to their row slots (piece i at narrow byte 64 i), below them.
  if (!s.pieces.empty()) {
    std::vector<std::pair<int, int>> from;
    uint32_t to = 0;
    for (const auto& [tile, byte] : s.pieces) from.emplace_back(tile, (products_at + byte) / 4);
    for (size_t i = 0; i < s.moved.size(); ++i)
      if (s.moved[i] >= 0) to |= tile_bit(s.first->at.tiles[i]);
    if (kGroup * int(s.pieces.size()) > products_at)
      fail("the moved products' slots up to byte ", kGroup * s.pieces.size(),
           " reach the chain's products at ", products_at);
    e.part("rope/key sums");
    ffn_broadcast(e, to, from, ordinal);
  }
  // The column's copies are taken before the row arrives, as in the scores' own program.
  e.part("key write");
  if (cw) emit_parameter_writes(e, {}, nullptr, cw);
  const PoppedRow popped{input_at, !s.moved.empty()};
  ordinal = scores_and_softmax(e, *s.layer, s.g, s.row_bytes, s.out_base, s.sm, s.first, cw,
                               ordinal, &popped);
  const int before =
      std::max(s.out_base + s.g.slots * kGroup + first_bytes(s.first), column_copy_bytes(cw));
  int used = before;
  // This layer's marks end here: a layer behind its rest (FcLayerRest::next) marks its own after.
  s.marks_end = e.marks().size();
  if (s.summed) {  // e from where generate_fc_batch_attention puts it: the scores are read by then
    used = emit_sum_after_softmax(
        e, *s.sum, *s.summed,
        round_up(s.out_base + s.g.slots * kGroup + first_bytes(s.first), kPiece), ordinal, outs,
        s.rest_place ? &*s.rest_place : nullptr, &at, &s.nested);
  } else {
    push_softmax_and_end(e, s.layer->output_name, s.out_bytes);
    outs.add(softmax_output_layer(s.layer->output_name, s.out_bytes), s.out_bytes);
  }
  int first_end = 0;
  if (s.first) multiplier_narrow(s.first, before, first_end);
  const int tail_end = std::max({used, before, first_end, value_end});
  if (s.nested.empty()) s.marks_end = e.marks().size();
  if (!s.rest_place) return tail_end;
  if (tail_end > s.rest_place->save)
    throw LayoutRejected(cat("the joined program's tail up to narrow byte ", tail_end,
                             " reaches the layer's rest from byte ", s.rest_place->save));
  return kNarrowBytes;
}

// The checks of a joined layer's scores side against its chain, and its tail.
JoinedTail make_joined_tail(const ChainBeforeScores& chain, const JoinedArgs& a) {
  auto state = std::make_shared<JoinedState>();
  JoinedState& s = *state;
  const FcLayer& layer = a.layer;
  const FcScoresInput* first = a.first;
  const FcValueSum* sum = a.sum;
  const FcChainValueWrite* values = a.values;
  const FcLayerRest* rest = a.rest;
  const std::vector<int>& moved = a.moved;
  // With the sum, its scalar memory (e padded, the multipliers, 1 / S, the count) below the
  // chain's x and r, and its output in place of e and 1 / S.
  s.summed = sum ? std::optional(sum_after_softmax(layer, a.exp_mult, *sum)) : std::nullopt;
  s.sm = s.summed ? s.summed->sm : softmax_words(layer, a.exp_mult);
  const ScalarSoftmax& sm = s.sm;
  const bool with_r = !chain.r_name.empty();
  const bool from_r = multipliers_from_r(first);
  if (const std::string why = ffn_chain_softmax_unsupported(
          sm.heads, sm.positions, chain.rms_groups, from_r ? first->layer.n : 0);
      !why.empty())
    fail(why);
  if (s.summed && chain.rms_groups > 0 && s.summed->words() > chain_rms_x_word(chain.rms_groups))
    fail(sm.heads, " heads of ", sm.positions, " positions and ", sum->layer.n, " sums: e, the ",
         "multipliers, sums and count take ", s.summed->words(), " words of scalar memory, past ",
         "the chain's x (", chain.rms_groups, " groups) and r from word ",
         chain_rms_x_word(chain.rms_groups));
  // r is the chain's, in scalar memory: the count's piece moved to the top (r in the row) would
  // land on the chain's x and r. Without the chain's r it comes in the count block.
  if (from_r && with_r && first->r_word != kChainRmsRWord)
    fail("multipliers from r after a chain read its r at its word (FcScoresInput::r_word ",
         first->r_word, ", the chain's r at ", kChainRmsRWord, ")");
  if (from_r && !with_r && first->r_word >= 0)
    fail("multipliers from r at word ", first->r_word, " after a chain that did not compute it");
  if (a.columns && a.columns->from_byte.empty())
    fail(
        "a column after a chain takes its words from the FC in front (from_byte): the joined "
        "program streams no parameters");
  const std::string& out_name = sum ? sum_output_name(*sum) : layer.output_name;
  if (out_name == chain.output_name || (with_r && out_name == chain.r_name))
    fail("the scores' output '", out_name, "' after a chain needs a name of its own");
  // One input, one type: the runtime flips every byte of a signed input, the row's and count's too.
  if (layer.signed_input != chain.signed_input)
    fail("the scores' row (", layer.signed_input ? "int8" : "uint8", ") in the chain's input (",
         chain.signed_input ? "int8" : "uint8", "): one input has one type");
  s.g = query_row_groups(layer, a.placement, a.row_bytes);
  const Groups& g = s.g;
  s.out_bytes = softmax_out_bytes(sm);
  s.out_base = round_up(g.row_bytes, 64);
  s.placed = placed_columns(a.columns, g, s.out_base, first);
  s.pieces = moved_pieces(chain.products, chain.layers_at, first, moved);
  // With `moved` the host's row is not sent: past the FC's outputs (their groups' 64 bytes each,
  // over the ring to the row's front) the row's bytes are whatever the chain left there.
  if (!moved.empty())
    for (size_t i = 0; i < g.in_at.size(); ++i)
      if (g.in_at[i] + layer.op_k() > kGroup * fc_groups(first->layer.n))
        fail("scores group ", i, " reads row bytes ", g.in_at[i], "..",
             g.in_at[i] + layer.op_k() - 1, " past the moved FC's outputs (",
             kGroup * fc_groups(first->layer.n), " bytes): the host's row is not sent");
  if (values && (values->groups.empty() ||
                 values->write.from_byte.size() != values->write.vectors.rows.size()))
    fail("a value write in the chain's tail from ", values->groups.size(), " pieces with ",
         values->write.from_byte.size(), " places for the vectors of ",
         values->write.vectors.rows.size(), " groups");
  if (rest && (!sum || sum->out.n <= 0))
    fail("the layer's rest follows wo: a joined program without the sum or wo has none");
  if (rest) s.rest_place = rest_at(*rest);
  if (rest && (rest->output_name == out_name || rest->output_name == chain.output_name ||
               (with_r && rest->output_name == chain.r_name)))
    fail("the layer's rest's output '", rest->output_name, "' needs a name of its own");
  if (rest && rest->ffn &&
      (rest->ffn_output_name.empty() || rest->ffn_output_name == rest->output_name ||
       rest->ffn_output_name == out_name || rest->ffn_output_name == chain.output_name ||
       (with_r && rest->ffn_output_name == chain.r_name)))
    fail("the layer's FFN's output '", rest->ffn_output_name, "' needs a name of its own");
  s.layer = &layer;
  s.row_bytes = a.row_bytes;
  s.first = first;
  s.moved = moved;
  s.sum = sum;
  s.values = values;
  JoinedTail t;
  t.state = state;
  t.tail.input_bytes = moved.empty() ? g.row_bytes : kSoftmaxCountBytes;
  t.tail.r_block = moved.empty() ? a.row_bytes : 0;  // the count block (for an FcChain's after_r)
  t.tail.emit = [state](Emitter& e, int& ordinal, const FfnChainTailAt& at) {
    return emit_joined_tail(e, ordinal, at, *state);
  };
  return t;
}

FfnChainPrograms chain_then_softmax(const ChainBeforeScores& chain, const JoinedArgs& a) {
  const JoinedTail t = make_joined_tail(chain, a);
  FfnChainPrograms out = chain.generate(t.tail);
  t.order_marks(out.marks);
  // The runtime finds outputs by name: the layers behind a rest bring their own.
  const std::vector<container::Layer>& layers = out.execution.output_layers;
  for (size_t i = 0; i < layers.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (layers[i].name == layers[j].name)
        fail("the joined program's outputs ", j, " and ", i, " are both '", layers[i].name,
             "': each needs a name of its own");
  return out;
}

}  // namespace

FfnChainPrograms generate_ffn_chain_softmax(
    const FfnChain& chain, const FcPlacement& up, const FcPlacement& down, const FcLayer& layer,
    const FcPlacement& placement, int row_bytes, const std::vector<float>& exp_mult,
    const FcScoresInput* first, const FcColumnWrite* columns, const std::vector<int>& moved,
    const FcValueSum* sum, const FcChainValueWrite* values, const FcLayerRest* rest) {
  const ChainBeforeScores c = ffn_chain_side(
      chain, [&](const FfnChainTail& tail) { return generate_ffn_chain(chain, up, down, &tail); });
  return chain_then_softmax(
      c, {layer, placement, row_bytes, exp_mult, first, columns, moved, sum, values, rest});
}

FfnChainPrograms generate_fc_chain_softmax(const FcChain& chain, const FcLayer& layer,
                                           const FcPlacement& placement, int row_bytes,
                                           const std::vector<float>& exp_mult,
                                           const FcScoresInput* first, const FcColumnWrite* columns,
                                           const std::vector<int>& moved, const FcValueSum* sum,
                                           const FcChainValueWrite* values,
                                           const FcLayerRest* rest) {
  if (chain.layers.empty()) fail("the scores after an FC chain without layers");
  ChainBeforeScores c{chain.products,
                      chain.at,
                      chain.layers.back().output_name,
                      "",
                      0,
                      chain.layers.front().signed_input,
                      [&](const FfnChainTail& tail) { return generate_fc_chain(chain, &tail); }};
  return chain_then_softmax(
      c, {layer, placement, row_bytes, exp_mult, first, columns, moved, sum, values, rest});
}

std::string fc_batch_attention_unsupported(int heads, int positions, int sum_outputs) {
  if (std::string why = fc_batch_softmax_unsupported(heads, positions); !why.empty()) return why;
  if (sum_outputs <= 0 || sum_outputs % kGroup != 0)
    return cat("a weighted sum of ", sum_outputs, " outputs: needs whole 64-output groups");
  // e (its rows padded to 256 bytes), the multipliers, 1 / S and the count in scalar memory.
  const int64_t bytes = round_up(heads * positions, kPiece) + 4 * int64_t{sum_outputs} + 4 * heads +
                        kSoftmaxCountBytes;
  if (bytes > 16384)
    return cat(heads, " heads of ", positions, " positions and ", sum_outputs, " sums: ", bytes,
               " bytes of exponentials, multipliers, sums and count past the 16 KiB of scalar "
               "memory");
  return "";
}

FcScoresProgram generate_fc_batch_attention(const FcLayer& layer, const FcPlacement& placement,
                                            int row_bytes, const std::vector<float>& exp_mult,
                                            const FcValueSum& sum,
                                            const std::vector<const FcParameterWrite*>& writes,
                                            const FcRowWrite* rows, const FcScoresInput* first,
                                            const FcColumnWrite* columns,
                                            const FcValueWrite* values) {
  const SumAfterSoftmax a = sum_after_softmax(layer, exp_mult, sum);
  const Groups g = query_row_groups(layer, placement, row_bytes);
  check_r_in_row(first);
  // Narrow memory, the same on every tile: the scores' input row and outputs, then e and the
  // multipliers as they arrive (tile 0 first, from scalar memory; the others over the ring),
  // then the sum's outputs.
  const int out_base = round_up(g.row_bytes, 64);
  const int e_base = round_up(out_base + g.slots * kGroup + first_bytes(first), kPiece);

  const std::optional<FcColumnWrite> placed = placed_columns(columns, g, out_base, first);
  const FcColumnWrite* cw = placed ? &*placed : nullptr;
  // The value write's quads after the column's copies (both done before the scores start).
  std::optional<FcValueWrite> vw;
  if (values && !values->from_byte.empty())
    fail("a value write's vectors from narrow memory in a program that computes none");
  if (values) {
    vw = *values;
    vw->narrow_at = round_up(column_copy_bytes(cw), kPiece);
  }
  const int value_end = vw ? fc_value_write_narrow_bytes(*vw) : 0;
  Emitter e;
  program_start(e);
  int value_from = -1;
  std::vector<uint8_t> parameters =
      emit_parameter_writes(e, writes, rows, cw, vw ? &*vw : nullptr, &value_from);
  int ordinal = scores_and_softmax(e, layer, g, row_bytes, out_base, a.sm, first, cw);
  OutputList outs;
  const int used = emit_sum_after_softmax(e, sum, a, e_base, ordinal, outs);

  container::Executable eo = execution_executable(e.finish());
  eo.input_layers.push_back(boundary_layer(layer.input_name, 1, 1, g.row_bytes, layer.in_zp,
                                           layer.in_scale, false, layer.signed_input));
  eo.output_layers = std::move(outs.layers);
  int first_end = 0;
  multiplier_narrow(
      first, std::max(out_base + g.slots * kGroup + first_bytes(first), column_copy_bytes(cw)),
      first_end);
  eo.used_narrow_memory_bytes_per_tile =
      std::max({used, column_copy_bytes(cw), first_end, value_end});
  eo.dma_hints =
      execution_hints(layer.input_name, g.row_bytes, sum_output_name(sum), sum_output_bytes(sum));
  carry_parameters(eo, std::move(parameters));
  return scores_marks(std::move(eo), e, rows, cw, vw ? &*vw : nullptr, value_from);
}

bool fc_multipliers_loop_pays(const std::vector<bool>& mult_padding, int pending) {
  const int n = int(mult_padding.size());
  if (n == 0 || n % kGroup != 0 || n > kRPieceWord) return false;
  // (Any tiles and bases: a counting emitter sizes an instruction by its mnemonic.)
  const std::vector<int> groups(size_t(n / kGroup), 0);
  const int r_word = kRPieceWord + 1;
  Emitter bundles = Emitter::counting(), looped = Emitter::counting();
  emit_scalar_rope_multipliers(bundles, {r_word, 0, std::vector<float>(size_t(n)), mult_padding});
  constants_to_scalar(looped, groups, groups);
  // With nothing else pending only the loop's rows need the scalar-memory fence (with pieces
  // pending both forms fence, and the two fences are the same instructions).
  if (pending == 0) scalar_memory_fence(looped, 4 * int(groups.size()));
  emit_scalar_rope_multipliers_loop(looped, r_word, 0, 0, n);
  return looped.finished_bytes() < bundles.finished_bytes();
}

}  // namespace tinycoral::compiler
