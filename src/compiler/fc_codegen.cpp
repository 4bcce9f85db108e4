// edgetpu_compiler 16.0's FULLY_CONNECTED programs, rebuilt from the layer's shapes (fc_codegen.h).
// Every value below is either derived from N and K (the formulas name their quantities) or is a
// field compiled code always sets the same way for this layer class; docs/compiler.md lists which
// fields are understood and which are only reproduced.
#include "compiler/fc_codegen.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>

#include "chip/ops/nlu.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/ffn_parts.h"
#include "compiler/program_parts.h"
#include "compiler/scalar_rms.h"
#include "compiler/scalar_softmax.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kGroup = kFcGroupOutputs;  // outputs per compute tile (one op)
constexpr int kPiece = 64;               // input bytes per input tile
constexpr int kPacket = 256;             // ring packet bytes (one per row of 4 tiles)
constexpr int kRBlockBytes = 64;         // r's block in the input (the scores' count block)
constexpr int kRingFifo = 0x2078;        // wide row where ring packets arrive (64-byte units)
constexpr int kSendBuf = 0x2068;         // wide row a tile sends its input piece from
constexpr int kNarrowBytes = 196608;     // narrow memory per tile
// Groups per compute tile (a placement may give a tile several): each slot's outputs leave
// through its own wide row, the ring FIFO row or, free by then, the send row.
constexpr int kMaxSlots = kFcMaxGroupsATile;
constexpr int kOutRow[kMaxSlots] = {0x2078, 0x2068};
constexpr int kStagingUnits = 2048;  // the parameter staging buffer, in 64-byte units
// Each compute tile's parameters start with an aux block of 256-byte rows: the float32
// multipliers, the int32 biases (only when the layer has a bias), then the int32 weight zero
// points. In 64-byte units: the zero-point row is the last aux row, the weights follow the block.
constexpr int kRowUnits = 4;
struct AuxLayout {
  int rows;
  int zero_point_unit() const { return (rows - 1) * kRowUnits; }
  int weights_unit() const { return rows * kRowUnits; }
};
AuxLayout aux_layout(bool bias) { return AuxLayout{bias ? 3 : 2}; }

// Derived quantities of one layer.
struct Geometry {
  int n, k;
  int wk;                    // the weights' K (FcLayer::weight_k): the op's words, the rows held
  int tiles;                 // compute tiles = N / 64
  int in_tiles;              // input tiles = K / 64
  int packets;               // ring packets of the input = ceil(K / 256)
  int x_piece;               // narrow byte address of a tile's input piece: 256 ceil(K/256) + 512
  int unit_per_tile;         // parameter units (64 B) per compute tile
  AuxLayout aux;             // the per-channel rows before the weights
  std::vector<int> tile_of;  // compute tile of each output group
  std::vector<int> slot_of;  // the group's place among its tile's groups (outputs at K + 64 slot)
  std::vector<int> base_of;  // wide unit of each group's parameters on its tile
  std::vector<int> in_at;    // narrow byte of each group's input
  uint32_t compute_mask() const {
    uint32_t mask = 0;
    for (int t : tile_of) mask |= tile_bit(t);
    return mask;
  }
  // The compute tiles by what their op needs: the parameter unit and, for layers whose output
  // groups carry their own output stage, its zero point and clamps. One aux load and one op each.
  struct OpSet {
    int base, slot, in_at;
    int32_t out_zp;
    float clamp_min, clamp_max;
    uint32_t tiles;
  };
  // Groups flagged in `skip` are left out (their op runs apart: FcChainAfterR).
  std::vector<OpSet> op_sets(const FcLayer& layer, const std::vector<bool>& skip = {}) const {
    std::vector<OpSet> out;
    for (size_t i = 0; i < tile_of.size(); ++i) {
      if (!skip.empty() && skip[i]) continue;
      const bool own = !layer.group_out_zp.empty();
      const OpSet want{base_of[i],
                       slot_of[i],
                       in_at[i],
                       own ? layer.group_out_zp.at(i) : layer.out_zp,
                       own ? layer.group_clamp_min.at(i) : layer.clamp_min,
                       own ? layer.group_clamp_max.at(i) : layer.clamp_max,
                       0};
      auto at = std::find_if(out.begin(), out.end(), [&](const OpSet& o) {
        return o.base == want.base && o.slot == want.slot && o.in_at == want.in_at &&
               o.out_zp == want.out_zp && o.clamp_min == want.clamp_min &&
               o.clamp_max == want.clamp_max;
      });
      if (at == out.end()) at = out.insert(out.end(), want);
      at->tiles |= tile_bit(tile_of[i]);
    }
    return out;
  }
};

// The op's K (FcLayer::op_k), checked: a multiple of 4 in 4..K.
int weights_k(int k, int op_k) {
  if (op_k <= 0 || op_k % 4 != 0 || op_k > k)
    fail("weights of K = ", op_k, " for an input of ", k,
         " bytes: needs a multiple of 4, at most it");
  return op_k;
}
int weights_k(const FcLayer& l) { return weights_k(l.k, l.op_k()); }

Geometry geometry(int n, int k, int op_k, bool bias, const FcPlacement& placement = {}) {
  // These programs write and read a group's weights right after its aux rows: a placement whose
  // weights live apart (the batch generator's shared copies) would be overwritten group by group.
  if (!placement.weight_units.empty())
    fail(
        "weights apart from their aux rows (weight_units) are the batch generator's: cache one "
        "copy per tile and each group's aux rows instead");
  Geometry g{};
  g.n = n;
  g.k = k;
  g.wk = weights_k(k, op_k);
  g.tiles = n / kGroup;
  g.in_tiles = k / kPiece;
  g.packets = (k + kPacket - 1) / kPacket;
  g.x_piece = kPacket * ((k + kPacket - 1) / kPacket) + 512;
  g.aux = aux_layout(bias);
  g.unit_per_tile = (g.aux.rows * kGroup * 4 + kGroup * g.wk) / 64;
  g.tile_of = placement.tiles;
  if (g.tile_of.empty())
    for (int t = 0; t < g.tiles; ++t) g.tile_of.push_back(t);
  g.base_of = placement.param_units;
  if (g.base_of.empty()) g.base_of.assign(size_t(g.tiles), 0);
  g.in_at = placement.in_at;
  if (g.in_at.empty()) g.in_at.assign(size_t(g.tiles), 0);
  if (static_cast<int>(g.in_at.size()) != g.tiles)
    fail("the placement names ", g.in_at.size(), " input places for ", g.tiles, " output groups");
  if (static_cast<int>(g.tile_of.size()) != g.tiles ||
      static_cast<int>(g.base_of.size()) != g.tiles)
    fail("the placement names ", g.tile_of.size(), " tiles and ", g.base_of.size(), " units for ",
         g.tiles, " output groups");
  for (size_t i = 0; i < g.tile_of.size(); ++i) {
    if (g.tile_of[i] < 0 || g.tile_of[i] > 15) fail("the placement names tile ", g.tile_of[i]);
    int slot = 0;
    for (size_t j = 0; j < i; ++j) {
      if (g.tile_of[j] != g.tile_of[i]) continue;
      ++slot;
      if (std::abs(g.base_of[j] - g.base_of[i]) < g.unit_per_tile)
        fail("the placement puts two groups' parameters on tile ", g.tile_of[i],
             " over each other");
    }
    if (slot >= kMaxSlots)
      fail("the placement puts more than ", kMaxSlots, " groups on tile ", g.tile_of[i]);
    g.slot_of.push_back(slot);
  }
  for (int base : g.base_of)
    if (base < 0 || base % kRowUnits != 0 || base + g.unit_per_tile > kFcParamUnits)
      fail("parameters at wide unit ", base, " (", g.unit_per_tile,
           " units per tile) do not fit below unit ", kFcParamUnits, " or are not row-aligned");
  return g;
}

Geometry geometry(const FcLayer& l, const FcPlacement& placement = {}) {
  return geometry(l.n, l.k, l.op_k(), !l.bias.empty(), placement);
}

// The first group on `tile` whose parameters overlap wide units [unit, unit + units); -1: none.
int group_over(const Geometry& g, int tile, int unit, int units) {
  for (int j = 0; j < g.tiles; ++j)
    if (g.tile_of[size_t(j)] == tile && unit + units > g.base_of[size_t(j)] &&
        unit < g.base_of[size_t(j)] + g.unit_per_tile)
      return j;
  return -1;
}

// narrowToWide of one 64-byte piece from narrow word `narrow_word` into the ring send row `row`.
void n2w_piece(Emitter& e, uint32_t tiles, int narrow_word, int row) {
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(narrow_word), " n=", narrow_walk(16),
                   " n.lvl_mask=0x01 w.addr=", hex(row),
                   " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 sync.wait_lvl=1 "
                   "sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 tail_lvl=1"));
}

// The program's start and the input: one activation pop of the host's K bytes, scattered in
// 64-byte pieces, piece i on tile i at x_piece. With `more` bytes after them in the same pop
// (the tables of FcTableProducts: products_stage moves them later), the pop takes those too.
void input_stage(Emitter& e, const Geometry& g, const FcLayer& layer, int more = 0) {
  const int x_word = g.x_piece / 4;
  program_start(e);
  tile_fence(e, "units=0x020");
  input_address(e, layer.input_name);

  // The input: one activation pop of K bytes (8-byte units) from the host.
  host_pop(e, g.k + more);

  // Scatter: packet j goes to the row of tiles 4j..4j+3; lane l of every row takes bytes
  // 64l..64l+63 of its packet into its piece at x_piece. The FIFO holds all K/256 packets.
  const int fifo = 0x2080 - 8 * g.packets;
  const int lanes = std::min(4, g.in_tiles);
  for (int l = 0; l < lanes; ++l) {
    uint32_t mask = 0;
    for (int t = l; t < g.in_tiles; t += 4) mask |= tile_bit(t);
    std::string skip;
    if (l > 0) {
      skip = cat(" skip_en0=1 f543=1 skip_base=", hex(x_word), " skip_m1=", 16 * l - 1,
                 " skip_end=", hex(x_word + 16 * l - 1));
    }
    e.add("w2n", cat("tiles=", hex(mask), " w.addr=", hex(fifo), " w=(1 x 1) n.addr=", hex(x_word),
                     " n=", narrow_walk(kPiece / 4), " n.lvl_mask=0x01 mode=1 fill_size=128", skip,
                     " sync.en0=1 sync.id=14 sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 "
                     "sync.en2=1 sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 ",
                     l == 0 ? "tail_en870=1" : "tail_f871=1"));
  }
  const int packet_units = kPacket / 8;
  for (int j = 0; j * 4 < g.in_tiles; ++j) {
    const uint32_t row = first_tiles(std::min(g.in_tiles, 4 * j + 4)) & ~first_tiles(4 * j);
    const int row_units = std::min(kPacket, g.k - kPacket * j) / 8;  // a short last packet
    ring_receive(e, row, fifo, g.packets, -64 * g.packets);
    e.add("infeed",
          cat("stream=1", j > 0 ? cat(" buf_off=", hex(packet_units * j)) : "",
              " walk=", nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
              " k157=1 k160=1 av176=1 count_m1=", row_units - 1, " tail_en=1 count_neg=",
              hex(kActPassUnits - row_units), " f308=0x8 pop_wait=", hex(packet_units * j + 1),
              " k336=1 f352=1 f391=2 dest=", hex(row), " f434=0xf lanes_m1=3"));
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
}

// Broadcast: piece i (64 bytes at narrow word pieces[i].second of tile pieces[i].first) goes to
// every compute tile, which stores it at x[64i]; then the fences before the ops.
void broadcast_stage(Emitter& e, uint32_t compute, const std::vector<std::pair<int, int>>& pieces,
                     int& ring_ordinal, int to_word = 0, int stride_words = 16) {
  for (int i = 0; i < static_cast<int>(pieces.size()); ++i) {
    const auto [tile, word] = pieces[size_t(i)];
    e.add("w2n", cat("tiles=", hex(compute), " w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 n.addr=", hex(to_word + stride_words * i), " n=",
                     narrow_walk(16), " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.wait_lvl=1",
                     i % 2 == 0 ? " sync.en1=1" : "", " sync.val=", hex(0x8000 + (i + 1) / 2),
                     " sync.en2=1 tail_en870=1"));
    ring_receive(e, compute, kRingFifo, 1, 16 * i - 64);
    ring_send(e, tile, kSendBuf, compute, ring_ordinal++);
    n2w_piece(e, tile_bit(tile), word, kSendBuf);
  }
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", "sunits=0x0c");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// The input pieces of a layer whose input came from the host: piece i on tile i at x_piece.
std::vector<std::pair<int, int>> host_pieces(const Geometry& g) {
  std::vector<std::pair<int, int>> out;
  for (int i = 0; i < g.in_tiles; ++i) out.emplace_back(i, g.x_piece / 4);
  return out;
}

// One op per op set over x at narrow 0; group slot s's outputs at narrow byte out_at + 64 s. With
// `rms`, the scalar core computes r (emit_scalar_rms) while the ops run. Groups flagged in `skip`
// are left out.
void op_stage(Emitter& e, const Geometry& g, const FcLayer& layer, int out_at,
              const ScalarRms* rms = nullptr, const std::vector<bool>& skip = {}) {
  const int k_words = g.wk / 4;
  // The aux rows before the zero points (multipliers, biases) into the output stage's planes
  // (64 words apart), then the op; the op reads the zero-point row from wide memory itself.
  const int planes = g.aux.rows - 1;
  const std::string rewind = cat("(", -(31 + 64 * (planes - 1)), " x 1)");
  const std::string aux_load =
      cat(" w=(1 x ", planes, ") w.lvl_mask=0x1 n=(1 x 32)(33 x ", planes, ")", rewind, rewind,
          rewind, rewind,
          " n.lvl_mask=0x03 mode=2 fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 "
          "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 tail_en870=1");
  const int back = -(k_words - 1);
  const std::string in_walk = cat("(1 x ", k_words, ")(1 x 1)(1 x 1)(", back, " x 1)(", back,
                                  " x 1)(", back, " x 1)(", back, " x 1)(", back, " x 1 m3)");
  const std::string par_walk =
      cat("(1 x ", k_words, ")(", back, " x 1)(", back, " x 1)(", back, " x 1)(", back, " x 1)(",
          back, " x 1)(", back, " x 1)(", back, " x 1 m1)");
  const int out_words = kGroup / 4;
  const int ob = -(out_words - 1);
  const std::string out_walk = cat("(1 x ", out_words, ")(1 x 1)(1 x 1)(", ob, " x 1)(", ob,
                                   " x 1)(", ob, " x 1)(", ob, " x 1)(", ob, " x 1 m3)");
  for (const auto& [base, slot, in_at, out_zp, clamp_min, clamp_max, tiles] :
       g.op_sets(layer, skip)) {
    e.add("w2n", cat("tiles=", hex(tiles), base ? cat(" w.addr=", hex(base)) : "", aux_load));
    const int par_base = base + g.aux.weights_unit();
    const int zp_unit = base + g.aux.zero_point_unit();
    e.add("op",
          cat("tiles=", hex(tiles), " loops=(", k_words, ")",
              in_at ? cat(" in.base=", hex(in_at)) : "", " in=", in_walk,
              " in.tflags=0x01 out.base=", hex(out_at + kGroup * slot), " out=", out_walk,
              " out.tflags=0x1 par.base=", hex(par_base & 0x1fff),
              par_base > 0x1fff ? " par.sel=1" : "", " par=", par_walk, " psum=(0 x ", k_words,
              ") cfg0=0x065 cfg1=0x12c sync0=0x4000 sync1=0x4000 cfg2=0x07 cfg3=8 in_zp=",
              layer.in_zp, " pc_aux_unit=", hex(zp_unit), " pc_aux_rows=", g.aux.rows - 1,
              " pc_zp_unit=", hex(zp_unit), layer.bias.empty() ? "" : " cfg4=1",
              " dp_mode=1 reduce_mask=0x01 out_ch_last=", kGroup - 1, " out_ch=", kGroup - 1,
              " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(clamp_max),
              " clamp_min=", f32_bits(clamp_min), " out_zp=", out_zp, " pc_mult=1"));
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  if (rms) emit_scalar_rms(e, *rms);
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
}

// The output: every compute tile's 64 bytes (at narrow out_at + 64 slot) go over the ring to the
// scalar core and out; then the program's end.
void output_stage(Emitter& e, const Geometry& g, const FcLayer& layer, int out_at,
                  int& ring_ordinal) {
  output_address(e, layer.output_name);
  for (int slot = 0; slot < kMaxSlots; ++slot) {
    uint32_t tiles = 0;
    for (size_t i = 0; i < g.tile_of.size(); ++i)
      if (g.slot_of[i] == slot) tiles |= tile_bit(g.tile_of[i]);
    if (tiles) n2w_piece(e, tiles, (out_at + kGroup * slot) / 4, kOutRow[slot]);
  }
  descriptor(e, 5, 4, 6, g.n, 3);
  for (int t = 0; t < g.tiles; ++t) {
    e.add("outfeed", cat("walk=(0 x ", kGroup / 8, ") k173=3 f222=0x7f"));
    ring_send(e, g.tile_of[size_t(t)], kOutRow[g.slot_of[size_t(t)]], 0x10000, ring_ordinal++);
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", cat("tiles=0xffff smask=0x020 thr5=", g.n / 32, " wait=0x020 sunits=0x0c"));
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
}

container::Bitstream execution_program(const Geometry& g, const FcLayer& layer) {
  Emitter e;
  int ring_ordinal = 0;
  input_stage(e, g, layer);
  broadcast_stage(e, g.compute_mask(), host_pieces(g), ring_ordinal);
  op_stage(e, g, layer, g.k);
  output_stage(e, g, layer, g.k, ring_ordinal);
  return e.finish();
}

// The parameter stream of `g` into its units: the descriptor (tag 2, from the parameter address in
// registers 0 and 1), one pop of the whole stream, a consumer and an infeed per tile.
// Several layers' parameter streams, one after the other in one parameter buffer: one pop of all
// of them, then every tile's consumer (in layer order: a tile in two layers takes the first
// layer's packets first, as its ring queue gets them), then the infeeds at their running offsets.
// Then single 256-byte rows (`rows`: tile and wide unit), each a consumer of one packet without
// the aux block and a 4-unit infeed.
void parameter_streams(Emitter& e, const std::vector<Geometry>& gs,
                       const std::vector<FcParameterRow>& rows_after = {}, int mark_from = -1) {
  int64_t bytes = 0;
  for (const Geometry& g : gs) bytes += static_cast<int64_t>(g.tiles) * g.unit_per_tile * 64;
  bytes += static_cast<int64_t>(rows_after.size()) * kPacket;
  const int units = static_cast<int>(bytes / 64);
  e.add("bundle", "s_op=0x0f s_x=3 imm=1");
  e.add("bundle", "s_op=0x0f s_x=2 imm=0");
  descriptor(e, 3, 2, 4, bytes, 2);

  // One parameter pop of the whole stream in passes of 1024 units.
  const Passes pop = passes_of(units, kParPassUnits);
  const int rows = std::min((units + 1) / 2, 1024);  // 128-byte rows, capped
  const bool b183 = units % 2 == 0 || units >= 2048;
  e.add("pop",
        cat("walk=",
            nest({{1, kParPassUnits}, {1 - kParPassUnits, pop.count}, {1 - kParPassUnits, 1}}),
            " k121=1 k124=1 par136=1", pop.fields(), " k174=1 par177=1 k178=1 b183=", b183 ? 1 : 0,
            " rows_neg=", hex(0x8000 - rows), " k199=1 k215=1"));
  for (const Geometry& g : gs) {
    const int k_rows = g.wk / 4;  // 256-byte weight rows per tile
    for (int t = 0; t < g.tiles; ++t) {
      const int base = g.base_of[size_t(t)];
      e.add("ringcons0",
            cat("tiles=", hex(tile_bit(g.tile_of[size_t(t)])),
                " addr=", hex(2 + base + g.aux.weights_unit()), " dst=(1 x ", k_rows, ")(",
                1 - k_rows, " x 1)(", 1 - k_rows, " x 1)(", 1 - k_rows, " x 1) sdims=1 aux_en0=1",
                base ? cat(" aux_addr0=", hex(base)) : "", " aux_rows0_m1=", g.aux.rows - 1,
                " aux_addr1=", hex(base + g.aux.zero_point_unit()), " aux_f319=1"));
    }
  }
  for (size_t i = 0; i < rows_after.size(); ++i) {
    const FcParameterRow& r = rows_after[i];
    if (r.tile < 0 || r.tile > 15 || r.unit < 0 || r.unit % kRowUnits != 0 ||
        r.unit + kRowUnits > kFcParamUnits)
      fail("a parameter row at tile ", r.tile, ", wide unit ", r.unit);
    e.add("ringcons0", cat("tiles=", hex(tile_bit(r.tile)), " addr=", hex(2 + r.unit),
                           " dst=(1 x 1)(0 x 1)(0 x 1)(0 x 1) sdims=1"));
    // The row's address is the only place its unit enters the program.
    if (mark_from >= 0 && int(i) >= mark_from) e.mark("addr");
  }
  int at = 0;  // units of the buffer streamed before
  for (const Geometry& g : gs) {
    const int u = g.unit_per_tile;
    const Passes per_tile = passes_of(u, kParPassUnits);
    for (int t = 0; t < g.tiles; ++t, at += u) {
      const int off = at % kStagingUnits;
      e.add("infeed", cat(off ? cat("buf_off=", hex(off), " ") : "", "walk=",
                          nest({{1, kParPassUnits},
                                {1 - kParPassUnits, per_tile.count},
                                {1 - kParPassUnits, 1}}),
                          " k157=1 k160=1 par172=1", per_tile.fields(),
                          " f308=0x8 par314=1 pop_wait=", hex((at + 1) & 0xffff),
                          " k336=1 f352=1 f391=2 dest=", hex(tile_bit(g.tile_of[size_t(t)])),
                          " f434=0xf lanes_m1=3"));
    }
  }
  const Passes one = passes_of(kRowUnits, kParPassUnits);
  for (const FcParameterRow& r : rows_after) {
    const int off = at % kStagingUnits;
    e.add("infeed",
          cat(off ? cat("buf_off=", hex(off), " ") : "", "walk=",
              nest({{1, kParPassUnits}, {1 - kParPassUnits, one.count}, {1 - kParPassUnits, 1}}),
              " k157=1 k160=1 par172=1", one.fields(),
              " f308=0x8 par314=1 pop_wait=", hex((at + 1) & 0xffff),
              " k336=1 f352=1 f391=2 dest=", hex(tile_bit(r.tile)), " f434=0xf lanes_m1=3"));
    at += kRowUnits;
  }
}

container::Bitstream caching_program(const Geometry& g,
                                     const std::vector<FcParameterRow>& rows = {}) {
  Emitter e;
  tile_fence(e, "b43=1 counters=0x7ffff units=0x3ff signal=1");
  e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
  e.reloc_movi(1, BufferKind::kParameter, Half::kLower32);
  e.reloc_movi(0, BufferKind::kParameter, Half::kUpper32);
  parameter_streams(e, {g}, rows);
  tile_fence(e, "b43=1 units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 3, 2, 4);
  return e.finish();
}

}  // namespace

std::string fc_unsupported(int n, int k) {
  if (n <= 0 || n > 16 * kGroup) return cat("N = ", n, ": the generator covers N = 1..1024");
  if (k <= 0 || k % kPiece != 0 || k > 1024) {
    return cat("K = ", k, ": the generator covers K = 64..1024 in steps of 64");
  }
  return "";
}

std::vector<uint8_t> fc_parameters(const FcLayer& layer) {
  const int groups = layer.n / kGroup;  // the stream is per group, wherever it is placed
  const int wk = weights_k(layer);
  for (int o = 0; o < layer.n; ++o)
    for (int c = wk; c < layer.k; ++c)
      if (layer.weights[size_t(o) * size_t(layer.k) + size_t(c)] != 0)
        fail("output ", o, " has a weight at input ", c, ", past the weights' K = ", wk);
  std::vector<uint8_t> out;
  out.reserve(static_cast<size_t>(groups * fc_units_per_tile(layer) * 64));
  for (int t = 0; t < groups; ++t) {
    for (int c = 0; c < kGroup; ++c) {
      const uint32_t bits =
          std::bit_cast<uint32_t>(layer.mult[static_cast<size_t>(t * kGroup + c)]);
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(bits >> (8 * b)));
    }
    for (int c = 0; c < kGroup && !layer.bias.empty(); ++c) {
      const auto b = static_cast<uint32_t>(layer.bias[static_cast<size_t>(t * kGroup + c)]);
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(b >> (8 * i)));
    }
    for (int c = 0; c < kGroup; ++c) {
      const uint32_t zp = 128;
      for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(zp >> (8 * b)));
    }
    for (int kq = 0; kq < wk / 4; ++kq) {
      for (int c = 0; c < kGroup; ++c) {
        const size_t row = static_cast<size_t>(t * kGroup + c) * static_cast<size_t>(layer.k);
        for (int b = 0; b < 4; ++b) {
          const int8_t w = layer.weights[row + static_cast<size_t>(kq * 4 + b)];
          out.push_back(static_cast<uint8_t>(static_cast<int>(w) + 128));
        }
      }
    }
  }
  return out;
}

namespace {

// N % 64 != 0: the layer padded to whole groups with outputs that are never read (zero weights,
// bias and multiplier). edgetpu_compiler uses 16/32/48-output groups instead (not modelled).
FcLayer padded_to_groups(const FcLayer& layer) {
  FcLayer p = layer;
  p.n = (layer.n + kGroup - 1) / kGroup * kGroup;
  p.weights.resize(static_cast<size_t>(p.n) * static_cast<size_t>(p.k), 0);
  p.mult.resize(static_cast<size_t>(p.n), 0.0f);
  if (!p.bias.empty()) p.bias.resize(static_cast<size_t>(p.n), 0);
  return p;
}

// The EXECUTION_ONLY executable: `in`'s input layer, `out`'s output layer (tile t's 64 outputs at
// byte 64t: one row, tiles side by side) and hints.
container::Executable execution_executable_of(container::Bitstream program, const FcLayer& in,
                                              const FcLayer& out, const Geometry& g,
                                              int narrow_bytes) {
  OutputList outs;
  outs.layers.push_back(chain_output_layer(out, g.n));
  outs.hints.push_back(dma_hint(container::BufferKind::kOutput, container::Direction::kOutfeed,
                                out.output_name, out.n));
  return execution_with_outputs(std::move(program), in, outs, narrow_bytes);
}

}  // namespace

void OutputList::add(container::Layer layer, int bytes) {
  hints.push_back(
      dma_hint(container::BufferKind::kOutput, container::Direction::kOutfeed, layer.name, bytes));
  layers.push_back(std::move(layer));
}

container::Layer chain_output_layer(const FcLayer& last, int n) {
  container::Layer out =
      boundary_layer(last.output_name, n, last.out_zp, last.out_scale, true, last.signed_output);
  container::OutputLayout layout;
  layout.y_coordinate_to_linear_tile_id_map = {0};
  layout.x_coordinate_to_linear_tile_id_map = {0};
  for (int t = 0; t < 16; ++t)
    layout.linearized_tile_byte_offset.push_back(std::min(t * kGroup, n));
  layout.x_coordinate_to_local_byte_offset = {0};
  layout.y_coordinate_to_local_y_offset = {0};
  layout.x_coordinate_to_local_y_row_size = {kGroup};
  out.output_layout = layout;
  out.shape = {{0, 0}, {0, n - 1}};  // the TFLite shape [1, N] as inclusive ranges
  return out;
}

container::Executable execution_with_outputs(container::Bitstream program, const FcLayer& in,
                                             const OutputList& outs, int narrow_bytes) {
  container::Executable eo = execution_executable(std::move(program));
  eo.input_layers.push_back(
      boundary_layer(in.input_name, in.k, in.in_zp, in.in_scale, false, in.signed_input));
  eo.output_layers = outs.layers;
  eo.used_narrow_memory_bytes_per_tile = narrow_bytes;
  eo.dma_hints.fully_deterministic = true;
  eo.dma_hints.hints.push_back(instruction_hint());
  eo.dma_hints.hints.push_back(
      dma_hint(container::BufferKind::kInput, container::Direction::kInfeed, in.input_name, in.k));
  eo.dma_hints.hints.insert(eo.dma_hints.hints.end(), outs.hints.begin(), outs.hints.end());
  eo.dma_hints.hints.push_back(interrupt_hint());
  return eo;
}

int fc_groups(int n) { return (n + kGroup - 1) / kGroup; }
int fc_units_per_tile(const FcLayer& layer) {
  return fc_units_per_tile(layer.op_k(), !layer.bias.empty());
}
int fc_units_per_tile(int k, bool bias) {
  return (aux_layout(bias).rows * kGroup * 4 + kGroup * k) / 64;
}

FcPrograms generate_fc(const FcLayer& layer, const FcPlacement& placement) {
  // A placement may give tiles two groups each: up to 2048 outputs.
  const int n_limit = placement.tiles.empty() ? 16 * kGroup : kMaxSlots * 16 * kGroup;
  if (const std::string why = fc_unsupported(std::min(layer.n, 16 * kGroup), layer.k); !why.empty())
    fail(why);
  if (layer.n > n_limit) fail("N = ", layer.n, ": more outputs than the placement's tiles hold");
  const size_t groups = static_cast<size_t>(fc_groups(layer.n));
  if (!layer.group_out_zp.empty() &&
      (layer.group_out_zp.size() != groups || layer.group_clamp_min.size() != groups ||
       layer.group_clamp_max.size() != groups))
    fail("per-group output stages need one zero point and two clamps for each of ", groups,
         " groups");
  if (layer.n % kGroup != 0) {
    // The chip returns every padded group; the output layer takes the first N bytes of them.
    FcPrograms out = generate_fc(padded_to_groups(layer), placement);
    container::Layer& y = out.execution.output_layers.at(0);
    y.z_dim = layer.n;
    y.shape = {{0, 0}, {0, layer.n - 1}};
    return out;
  }
  const Geometry g = geometry(layer, placement);
  FcPrograms out;
  out.execution =
      execution_executable_of(execution_program(g, layer), layer, layer, g, g.x_piece + kPiece);
  out.caching = caching_executable(caching_program(g), fc_parameters(layer));
  out.execution.parameter_caching_token = out.caching.parameter_caching_token =
      caching_token(out.caching.parameters);
  return out;
}

namespace {

// The FFN's elementwise part on each tile of `tiles`, over narrow memory from byte b0 (FfnBuffers).
struct FfnBuffers {
  int b0;
  int h1() const { return b0; }
  int h3() const { return b0 + 64; }
  int g() const { return b0 + 128; }
  int a() const { return b0 + 192; }
  int products() const { return b0 + 256; }  // MUL step 1: one word per element
  int m() const { return b0 + 512; }
  int identity() const { return b0 + 576; }  // 4 words: the 4 x 4 identity
  int end() const { return b0 + 640; }
};
constexpr int kIdentityRow = 0x2000;  // wide rows above the parameters (kFcParamUnits)
constexpr int kMulFifo = 0x2004;
constexpr int kWords = kGroup / 4;  // 16 words of 64 elements

// An 8-level walk of `count` steps of `inc` (words) at level 0, rewound on the others.
std::string flat_walk(int count, const std::string& last = " m3") {
  const int back = -(count - 1);
  return cat("(1 x ", count, ")(", back, " x 1)(", back, " x 1)(", back, " x 1)(", back, " x 1)(",
             back, " x 1)(", back, " x 1)(", back, " x 1", last, ")");
}

// MUL of the `words` words at narrow `a` (in) by as many at narrow `b` (streamed through the
// FIFO), into `out`; the two steps of isa.md 2.1.5 as edgetpu_compiler 16.0 writes them
// (looming_64x64_3x3 words 273-329, there for 16 words): step 1 writes one word per element into
// `products` (4 words bytes), step 2 packs them. `b_at` gives b's address per set of tiles (their
// union is `tiles`): the ops read b from the FIFO, not from its address, so tiles whose b lie at
// different addresses still share the ops, each set with its own streaming instruction.
void mul(Emitter& e, uint32_t tiles, int products, int words, int a, int a_zp,
         const std::vector<std::pair<uint32_t, int>>& b_at, int b_zp, float mult, float clamp_min,
         float clamp_max, int out_zp, int out) {
  const int back4 = -(4 * words - 1), back = -(words - 1);
  e.add("op",
        cat("tiles=", hex(tiles), " loops=(4)(1)(", words, ") in.base=", hex(a),
            " in.hmode=1 in=(0 x 4 m1)(0 x ", words,
            " m1)(0 x 1 m1)(0 x 1 m1)(-16 x 1 m1)(-16 x 1 m1)(-16 x 1 m1)(-16 x 1 m3)"
            " in.tflags=0x03 out.base=",
            hex(products), " out=(1 x 1)(1 x 4)(1 x ", words, ")(1 x 1)(1 x 1)(", back4, " x 1)(",
            back4, " x 1)(", back4, " x 1 m3) out.tflags=0x7 par.base=", hex(kMulFifo & 0x1fff),
            " par.sel=1 par.hmode=1 par=(0 x 4 m1)(-1 x 1 m1)(-1 x ", words,
            " m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1) par.tflags=0x40 "
            "par.fifo=0x0001 psum.hmode=1 psum=(0 x 1)(0 x 4)(0 x ",
            words,
            ")(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum.tflags=0x0840 cfg0=0x060 "
            "cfg1=0x12d sync0=0x4000 sync1=0x4000 cfg2=0x06 cfg3=7 w_zp=",
            b_zp, " in_zp=", a_zp, " dp_mode=4 out_ch_last=3 out_ch=3 mult=", f32_bits(mult),
            " clamp_max=", f32_bits(clamp_max), " clamp_min=", f32_bits(clamp_min),
            " out_zp=", out_zp));
  // b, one word per FIFO fill.
  for (const auto& [b_tiles, b] : b_at)
    e.add("n2w", cat("tiles=", hex(b_tiles), " n.addr=", hex(b / 4), " n=", narrow_walk(words),
                     " n.lvl_mask=0x01 w.addr=", hex(kMulFifo), " w=(0 x ", words,
                     ") w.rows=1 sync.en0=1 sync.id=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                     "sync.f45=1"));
  tile_fence(e, "units=0x020");
  e.add(
      "op",
      cat("tiles=", hex(tiles), " loops=(4)(1)(", words, ") in.base=", hex(products),
          " in=(1 x 4)(1 x ", words, ")(1 x 1)(1 x 1)(", back4, " x 1)(", back4, " x 1)(", back4,
          " x 1)(", back4, " x 1 m3) in.tflags=0x03 out.base=", hex(out), " out=(1 x 1)(1 x ",
          words, ")(1 x 1)(1 x 1)(", back, " x 1)(", back, " x 1)(", back, " x 1)(", back,
          " x 1 m3) out.tflags=0x3 par.base=", hex(kIdentityRow & 0x1fff),
          " par.sel=1 par.hmode=1 par=(0 x 4 m1)(-1 x 1 m1)(-1 x ", words,
          " m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1) par.tflags=0x40 "
          "psum=(0 x 4)(0 x 1)(0 x ",
          words, ") psum.tflags=0x0840 cfg2=0x06 cfg3=7 dp_mode=2 out_ch_last=3 out_ch=3",
          " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(std::numeric_limits<float>::infinity()),
          " clamp_min=", f32_bits(-std::numeric_limits<float>::infinity())));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

}  // namespace

namespace {

// The 4 x 4 identity row (column c = byte c set) that LOGISTIC and the MULs' packs read: mesh
// fills into narrow memory at `identity`, then into a wide row (looming words 297-321).
void identity_setup(Emitter& e, uint32_t tiles, int identity) {
  const uint32_t rows[4] = {0x1, 0x100, 0x10000, 0x1000000};
  for (int c = 0; c < 4; ++c)
    e.add("mesh_n", cat("tiles=", hex(tiles), " i.addr=", hex(identity + 4 * c), " i=(1 x 1)",
                        c == 3 ? " in_mode=3" : "", " fill_en=1 fill=", hex(rows[c])));
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(identity / 4), " n=", narrow_walk(4),
                   " n.lvl_mask=0x01 w.addr=", hex(kIdentityRow),
                   " w=(1 x 1) sync.en0=1 sync.f1=1 sync.id=5 sync.wait_lvl=1 sync.en1=1 "
                   "sync.en2=1 tail_lvl=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

}  // namespace

void ffn_gate_setup(Emitter& e, uint32_t tiles, int identity) {
  identity_setup(e, tiles, identity);
  // The spline into the non-linear unit, for the LOGISTIC ops after it.
  const chip::NluTable t = chip::ops::logistic_table();
  std::string spline;
  for (int k = 0; k < 40; ++k)
    spline += cat(" s", k / 5, "c", k % 5, "=", f32_bits(t.coefficients[size_t(k)]));
  for (int k = 0; k < 7; ++k) spline += cat(" b", k, "=", f32_bits(t.breakpoints[size_t(k)]));
  e.add("nlu", cat("tiles=", hex(tiles), spline, " mode=", t.mode));
}

void ffn_gate(Emitter& e, uint32_t tiles, const FfnGateBuffers& buf, int words, const FfnLayer& f) {
  // LOGISTIC: the requantize op with NLU mode 1 (the gen2021 encoding of the SSD's
  // convert_scores, docs/chip_ops.md 4.6).
  const float c = 10.396732f;
  e.add("op",
        cat("tiles=", hex(tiles), " loops=(", words, ") in.base=", hex(buf.h1),
            " in=", flat_walk(words), " in.tflags=0x01 out.base=", hex(buf.g),
            " out=", flat_walk(words), " out.tflags=0x1 par.base=", hex(kIdentityRow & 0x1fff),
            " par.sel=1 par=(0 x ", words, ") psum=(0 x ", words,
            ") psum.tflags=0x0800 cfg0=0x065 cfg1=0x04d sync0=0x4000 sync1=0x4000 "
            "cfg2=0x06 in_zp=",
            f.h1_zp, " dp_mode=1 out_ch_last=3 out_ch=3 nlu_mode=1 mult=", f32_bits(f.h1_scale),
            " clamp_max=", f32_bits(c), " clamp_min=", f32_bits(-c)));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  mul(e, tiles, buf.products, words, buf.h1, f.h1_zp, {{tiles, buf.g}}, 0, f.mult_a, f.a_clamp_min,
      f.a_clamp_max, f.a_zp, buf.a);
  mul(e, tiles, buf.products, words, buf.a, f.a_zp, {{tiles, buf.h3}}, f.h3_zp, f.mult_m,
      f.m_clamp_min, f.m_clamp_max, f.down.in_zp, buf.m);
}

void ffn_broadcast(Emitter& e, uint32_t compute, const std::vector<std::pair<int, int>>& pieces,
                   int& ring_ordinal, int to_byte, int stride) {
  if (to_byte < 0 || to_byte % 4 != 0) fail("a broadcast to narrow byte ", to_byte);
  if (stride <= 0 || stride > kGroup || stride % 4 != 0)
    fail("a broadcast's pieces ", stride, " bytes apart: needs a multiple of 4 up to ", kGroup);
  broadcast_stage(e, compute, pieces, ring_ordinal, to_byte / 4, stride / 4);
}

void ffn_broadcast_blocks(Emitter& e, uint32_t compute, const std::vector<FfnBlock>& blocks,
                          int stride_words, int& ring_ordinal) {
  constexpr int kBlockWords = kPacket / 4, kRows = 4;
  for (int i = 0; i < static_cast<int>(blocks.size()); ++i) {
    const FfnBlock& b = blocks[size_t(i)];
    // One 256-byte ring packet a piece (docs/compiler.md: the gathers' sync rule with k = 1),
    // stored as 4 rows of 64 bytes, stride_words apart.
    e.add("w2n", cat("tiles=", hex(compute), " w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 n.addr=", hex(b.to_word),
                     " n=", strided_walk({{1, kWords}, {stride_words, kRows}}, 6),
                     " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.wait_lvl=1",
                     i % 2 == 0 ? " sync.en1=1" : "", " sync.val=", hex(0x8000 + (i + 1) / 2),
                     " sync.en2=1 tail_en870=1"));
    ring_receive(e, compute, kRingFifo, 1, kBlockWords * i - 64);
    ring_send(e, b.tile, kSendBuf, compute, ring_ordinal++);
    e.add("n2w", cat("tiles=", hex(tile_bit(b.tile)), " n.addr=", hex(b.from_word),
                     " n=", narrow_walk(kBlockWords), " n.lvl_mask=0x01 w.addr=", hex(kSendBuf),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 sync.wait_lvl=1 "
                     "sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 tail_lvl=1"));
  }
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", "sunits=0x0c");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

namespace {

// The FFN's two geometries, after the checks every FFN program makes.
std::pair<Geometry, Geometry> ffn_geometries(const FfnLayer& f, const FcPlacement& up_at,
                                             const FcPlacement& down_at) {
  const int hidden = f.up.n / 2;
  if (f.up.n % (2 * kGroup) != 0 || hidden > 16 * kGroup || f.down.k != hidden ||
      f.down.n % kGroup != 0)
    fail("FFN of ", f.up.n, " up outputs and w2 ", f.down.n, " x ", f.down.k,
         ": needs whole pairs of 64-output groups, w2's K = half of them, at most 1024");
  if (const std::string why = fc_unsupported(std::min(f.up.n, 16 * kGroup), f.up.k); !why.empty())
    fail(why);
  if (const std::string why = fc_unsupported(f.down.n, f.down.k); !why.empty()) fail(why);
  return {geometry(f.up, up_at), geometry(f.down, down_at)};
}

}  // namespace

FfnFromPieces emit_ffn_from_pieces(Emitter& e, const FfnLayer& f, const FcPlacement& up_at,
                                   const FcPlacement& down_at,
                                   const std::vector<std::pair<int, int>>& in_pieces,
                                   int& ring_ordinal) {
  const int hidden = f.up.n / 2;
  const auto [up, down] = ffn_geometries(f, up_at, down_at);
  if (int(in_pieces.size()) != up.in_tiles)
    fail("the FFN's input from ", in_pieces.size(), " pieces: its K = ", f.up.k, " needs ",
         up.in_tiles);
  std::vector<std::pair<int, int>> m_pieces;
  uint32_t gate_tiles = 0;
  for (int i = 0; i < hidden / kGroup; ++i) {
    const int tile = up.tile_of[size_t(2 * i)];
    if (up.tile_of[size_t(2 * i + 1)] != tile || up.slot_of[size_t(2 * i)] != 0)
      fail("the FFN placement must put w1's and w3's group ", i, " on one tile, w1's first");
    gate_tiles |= tile_bit(tile);
  }
  // Narrow memory: the up layer's x at 0 and its host pieces at x_piece, w2's x (m) at 0 on its
  // tiles, so the elementwise buffers and w2's output go above all of them.
  const FfnBuffers buf{(std::max({up.x_piece + kPiece, f.down.k, f.up.k}) + 255) / 256 * 256};
  for (int i = 0; i < hidden / kGroup; ++i)
    m_pieces.emplace_back(up.tile_of[size_t(2 * i)], buf.m() / 4);
  const int y_at = (buf.end() + 255) / 256 * 256;
  broadcast_stage(e, up.compute_mask(), in_pieces, ring_ordinal);
  op_stage(e, up, f.up, buf.h1());
  ffn_gate_setup(e, gate_tiles, buf.identity());
  ffn_gate(e, gate_tiles, {buf.h1(), buf.h3(), buf.g(), buf.a(), buf.m(), buf.products()}, kWords,
           f);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  broadcast_stage(e, down.compute_mask(), m_pieces, ring_ordinal);
  op_stage(e, down, f.down, y_at);
  FfnFromPieces out;
  out.y_at = y_at;
  for (size_t i = 0; i < down.tile_of.size(); ++i)
    out.y.emplace_back(down.tile_of[i], y_at + kGroup * down.slot_of[i]);
  out.narrow_end = y_at + kMaxSlots * kGroup;
  return out;
}

FfnPrograms generate_ffn(const FfnLayer& f, const FcPlacement& up_at, const FcPlacement& down_at) {
  const auto [up, down] = ffn_geometries(f, up_at, down_at);
  Emitter e;
  int ring_ordinal = 0;
  input_stage(e, up, f.up);
  const int y_at = emit_ffn_from_pieces(e, f, up_at, down_at, host_pieces(up), ring_ordinal).y_at;
  output_stage(e, down, f.down, y_at, ring_ordinal);
  FfnPrograms out;
  out.execution = execution_executable_of(e.finish(), f.up, f.down, down, y_at + 2 * kGroup);
  out.caching_up = caching_executable(caching_program(up), fc_parameters(f.up));
  out.caching_down = caching_executable(caching_program(down), fc_parameters(f.down));
  out.caching_up.parameter_caching_token = caching_token(out.caching_up.parameters);
  out.caching_down.parameter_caching_token = caching_token(out.caching_down.parameters);
  out.execution.parameter_caching_token = out.caching_up.parameter_caching_token;
  return out;
}

namespace {

// Wide rows a tile's output pieces leave through in a chain (the FC's two slot rows, then two
// free rows above the parameters and below the input FIFO).
constexpr int kChainOutRows[kChainOutPieces] = {0x2078, 0x2068, 0x2058, 0x2048};

// The output of pieces (tile, narrow byte), 64 bytes each, in this order, to the host (on
// `last`'s grid); then, with `r_output`, a second output of scalar-memory word kChainRmsRWord
// (FcChainRms); then, with `end`, the program's end (output_stage's form for pieces of several
// layers); without it, more of the program follows (FfnChainTail). Both go into `outs`.
void pieces_output_stage(Emitter& e, const std::vector<std::pair<int, int>>& pieces,
                         const FcLayer& last, int& ring_ordinal, OutputList& outs,
                         const std::string& r_output = "", bool end = true) {
  output_address(e, last.output_name);
  // Each tile's j-th piece goes to its j-th row; one narrowToWide per (row, address).
  std::array<int, 16> count{};
  std::vector<int> row_of;
  std::vector<std::tuple<int, int, uint32_t>> moves;  // row, narrow byte, tiles
  for (const auto& piece : pieces) {
    const int tile = piece.first, at = piece.second;
    const int j = count[size_t(tile)]++;
    if (j >= kChainOutPieces)
      throw LayoutRejected(
          cat("a chain's output puts more than ", kChainOutPieces, " pieces on tile ", tile));
    row_of.push_back(kChainOutRows[j]);
    auto it = std::find_if(moves.begin(), moves.end(), [&](const auto& m) {
      return std::get<0>(m) == kChainOutRows[j] && std::get<1>(m) == at;
    });
    if (it == moves.end()) it = moves.insert(moves.end(), {kChainOutRows[j], at, 0u});
    std::get<2>(*it) |= tile_bit(tile);
  }
  for (const auto& [row, at, tiles] : moves) n2w_piece(e, tiles, at / 4, row);
  const int n = static_cast<int>(pieces.size()) * kGroup;
  descriptor(e, 5, 4, 6, n, 3);
  for (size_t i = 0; i < pieces.size(); ++i) {
    e.add("outfeed", cat("walk=(0 x ", kGroup / 8, ") k173=3 f222=0x7f"));
    ring_send(e, pieces[i].first, row_of[i], 0x10000, ring_ordinal++);
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", cat("tiles=0xffff smask=0x020 thr5=", n / 32, " wait=0x020 sunits=0x0c"));
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  outs.add(chain_output_layer(last, n), n);
  if (!r_output.empty()) {
    // Its own descriptor, opened once the pieces' is complete: r follows their bytes.
    output_address(e, r_output);
    descriptor(e, 5, 4, 6, 4, 3);
    emit_push_words(e, kChainRmsRWord, 1);
    // Raw float32 bytes (unsigned, no sign bits flipped).
    container::Layer r = boundary_layer(r_output, 4, 0, 1.0f, true, false);
    r.shape = {{0, 0}, {0, 3}};
    outs.add(std::move(r), 4);
  }
  if (!end) return;
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
}

// The output pieces of a layer computed at narrow byte `at` (group slot s at at + 64 s).
std::vector<std::pair<int, int>> output_pieces(const Geometry& g, int at) {
  std::vector<std::pair<int, int>> out;
  for (size_t i = 0; i < g.tile_of.size(); ++i)
    out.emplace_back(g.tile_of[i], at + kGroup * g.slot_of[i]);
  return out;
}

// Whether group `group` of layer `layer` is multiplied by the tables (its own bytes then stay on
// the chip).
bool multiplied(const FcTableProducts& products, int layer, int group) {
  return layer == products.layer &&
         std::any_of(products.groups.begin(), products.groups.end(),
                     [&](const FcProductGroup& pg) { return pg.group == group; });
}

// The tables' products (FcTableProducts) over layer g's outputs at narrow byte `at`: the tables
// (the host's input from byte `tables_at`, already popped by input_stage) moved to the multiplied
// groups' tiles, a tile's j-th group's pieces at narrow byte 128 j (their last layer has read its
// input by now), then per group P1 = MUL(x, first table) and R = MUL(x, second table) at narrow
// `base` and up; P1 and R join `out_pieces`. Returns the narrow bytes used.
int products_stage(Emitter& e, const Geometry& g, int at, const FcTableProducts& products,
                   int tables_at, int base, std::vector<std::pair<int, int>>& out_pieces) {
  if (products.tables <= 0 || products.groups.empty() || tables_at % kPacket != 0)
    fail("table products need their groups and two tables of ", products.tables,
         " pieces after whole packets of input");
  uint32_t tiles = 0;
  for (const FcProductGroup& pg : products.groups) {
    if (pg.group < 0 || pg.group >= g.tiles || pg.table < 0 || pg.table >= products.tables)
      fail("table products of group ", pg.group, " with table piece ", pg.table, ": out of range");
    tiles |= tile_bit(g.tile_of[size_t(pg.group)]);
  }
  // Piece p of both tables (128 bytes from tables_at + 128 p) to the tiles whose j-th multiplied
  // group reads it, at narrow byte 128 j: every tile's j-th group then streams its tables from the
  // same address, so the groups' MULs share their streams too. Through FIFO rows above the
  // identity and the MUL's row (both set up after), below the chain's output rows.
  const std::vector<std::pair<int, int>> placed = fc_product_bytes(products, g.tile_of);
  struct Landing {
    int piece, byte;
    uint32_t tiles;
  };
  std::vector<Landing> landings;
  for (size_t i = 0; i < products.groups.size(); ++i) {
    const int piece = products.groups[i].table, byte = placed[i].second;
    auto it = std::find_if(landings.begin(), landings.end(),
                           [&](const Landing& l) { return l.piece == piece && l.byte == byte; });
    if (it == landings.end()) it = landings.insert(landings.end(), {piece, byte, 0u});
    it->tiles |= tile_bit(placed[i].first);
  }
  constexpr int kTableFifo = 0x2008, kTableRows = 8;
  for (size_t i = 0; i < landings.size(); ++i) {
    if (i > 0 && i % kTableRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    const Landing& l = landings[i];
    host_to_narrow(e, l.tiles, kTableFifo + 4 * int(i % kTableRows), l.byte, 2 * kPiece,
                   (tables_at + 2 * kPiece * l.piece) / 8);
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  // Per tile its j-th multiplied group's P1 at base + 128 j, R after it; the MUL's buffers above.
  const int mul_buffers = base + 2 * kMaxSlots * kPiece, identity = mul_buffers + 4 * kPiece;
  identity_setup(e, tiles, identity);  // the MULs' packs read it; no LOGISTIC, so no spline
  // Groups whose x, output place, zero point and multiplier agree share a MUL over their tiles,
  // whatever their table pieces: the pieces land at the group's slot (base + 128 j above), so the
  // tiles of a MUL stream from one address (mul's b_at could take several).
  struct Mul {
    int x, out;
    int32_t x_zp;
    float mult;
    uint32_t tiles;
    std::vector<std::pair<uint32_t, int>> tables;  // tiles, table piece's byte
  };
  std::vector<Mul> muls;
  std::vector<std::pair<int, int>> pieces;
  uint32_t kept = 0;
  for (size_t i = 0; i < products.groups.size(); ++i) {
    const FcProductGroup& pg = products.groups[i];
    const auto [tile, byte] = placed[i];
    if (byte >= 2 * kPiece * kMaxSlots)
      throw LayoutRejected(
          cat("table products of more than ", kMaxSlots, " groups on tile ", tile));
    const int x = at + kGroup * g.slot_of[size_t(pg.group)], out = base + byte;
    for (int t = 0; t < 2; ++t) {
      const Mul want{x, out + t * kPiece, pg.x_zp, pg.mult, 0, {}};
      auto it = std::find_if(muls.begin(), muls.end(), [&](const Mul& m) {
        return m.x == want.x && m.out == want.out && m.x_zp == want.x_zp && m.mult == want.mult;
      });
      if (it == muls.end()) it = muls.insert(muls.end(), want);
      it->tiles |= tile_bit(tile);
      const int table = byte + t * kPiece;  // the j-th group's pieces at 128 j
      auto tt = std::find_if(it->tables.begin(), it->tables.end(),
                             [&](const std::pair<uint32_t, int>& b) { return b.second == table; });
      if (tt == it->tables.end()) tt = it->tables.insert(it->tables.end(), {0u, table});
      tt->first |= tile_bit(tile);
      if (!pg.keep) pieces.emplace_back(tile, want.out);
    }
    if (pg.keep) {
      const int row = products.kept_row[size_t(tile)];
      if (row < 0 || row % 4 != 0 || row + 4 > kFcParamUnits)
        fail("kept table products on tile ", tile,
             " need a whole resident wide row inside the parameter memory (got unit ", row, ")");
      kept |= tile_bit(tile);
    }
  }
  for (const Mul& m : muls)
    mul(e, m.tiles, mul_buffers, kWords, m.x, m.x_zp, m.tables, 128, m.mult, -127.0f, 127.0f, 128,
        m.out);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  // Kept products: each tile's whole block (its groups' P1 and R from `base`, one wide row) into
  // its resident row, where a later program reads them (the column write's narrowToWide into a
  // parameter row).
  if (kept != 0) {
    for (int t = 0; t < 16; ++t)
      if (kept & tile_bit(t))
        e.add("n2w", cat("tiles=", hex(tile_bit(t)), " n.addr=", hex(base / 4),
                         " n=", narrow_walk(2 * kPiece * kMaxSlots / 4), " n.lvl_mask=0x01 w.addr=",
                         hex(products.kept_row[size_t(t)]), " w=(1 x 1)"));
    tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
    wait_tokens(e);
  }
  out_pieces.insert(out_pieces.end(), pieces.begin(), pieces.end());
  return identity + 16;
}

// FcChainAfterR checked against the chain named `name` (its followers' or layers' geometries):
// which of that layer's groups wait for r (empty: no layer's). r comes from follower `r_layer`
// (FcChainRms: a layer after it waits), or with `r_from_input` from the host (any layer).
std::vector<bool> after_r_groups(const FcChainAfterR& a, const std::string& name,
                                 const std::vector<Geometry>& next, int r_layer,
                                 bool r_from_input) {
  if (a.layer < 0) return {};
  if (a.layer >= static_cast<int>(next.size()) ||
      (!r_from_input && (r_layer < 0 || a.layer <= r_layer)))
    fail("chain '", name, "': follower ", a.layer, "'s groups after r, which ",
         r_from_input ? "the input gives" : cat("follower ", r_layer, " gives"));
  const Geometry& g = next[size_t(a.layer)];
  std::vector<bool> late(size_t(g.tiles), false);
  for (size_t k = 0; k < a.groups.size(); ++k) {
    const int group = a.groups[k];
    if (group < 0 || group >= g.tiles || (k > 0 && group <= a.groups[k - 1]))
      fail("chain '", name, "': group ", group, " after r of a follower of ", g.tiles,
           " groups (in increasing order)");
    late[size_t(group)] = true;
  }
  const size_t n = size_t(kGroup) * a.groups.size();
  if (a.groups.empty() || a.base.size() != n || a.padding.size() != n ||
      (!a.const_units.empty() && a.const_units.size() != a.groups.size()))
    fail("chain '", name, "': ", a.groups.size(), " groups after r with ", a.base.size(),
         " constants, ", a.padding.size(), " padding flags and ", a.const_units.size(),
         " constants' rows");
  for (size_t k = 0; k < a.const_units.size(); ++k) {
    const int unit = a.const_units[k], tile = g.tile_of[size_t(a.groups[k])];
    if (unit < 0 || unit % kRowUnits != 0 || unit + kRowUnits > kFcParamUnits)
      fail("chain '", name, "': constants' row at wide unit ", unit);
    if (const int j = group_over(g, tile, unit, kRowUnits); j >= 0)
      fail("chain '", name, "': constants' row at wide unit ", unit, " of tile ", tile,
           " lies in group ", j, "'s parameters");
  }
  return late;
}

// Where the waiting groups' multipliers go (their first aux rows) and their constants come from.
MultipliersFromR after_r_rows(const FcChainAfterR& a, const Geometry& g) {
  MultipliersFromR m;
  for (const int group : a.groups) {
    m.tile.push_back(g.tile_of[size_t(group)]);
    m.row.push_back(g.base_of[size_t(group)]);
  }
  m.const_unit = a.const_units;
  m.base = a.base;
  m.padding = a.padding;
  return m;
}

// The resident constants' rows the follower's caching program writes after its parameters.
FcRowWrite after_r_constants(const FcChainAfterR& a, const Geometry& g) {
  FcRowWrite rows;
  for (size_t k = 0; k < a.const_units.size(); ++k) {
    rows.rows.push_back({g.tile_of[size_t(a.groups[k])], a.const_units[k]});
    append_constants_row(rows.bytes, a.base, a.padding, k * size_t(kGroup));
  }
  return rows;
}

// The followers' geometries (a pairwise follower 0 reads its input pieces two apart) and the
// widest input of the chain's layers.
std::vector<Geometry> follower_geometries(const FfnChain& chain, int& widest) {
  const FfnLayer& f = chain.ffn;
  std::vector<Geometry> next;
  widest = std::max(f.up.k, f.down.k);
  for (size_t i = 0; i < chain.next.size(); ++i) {
    const FcLayer& l = chain.next[i];
    const int want = i > 0            ? chain.next[i - 1].n
                     : chain.pairwise ? 2 * kPiece
                                      : chain.extra_k + f.down.n;
    // A follower whose groups name their input places reads parts of what the previous wrote.
    const bool parts = i > 0 && !chain.next_at[i].in_at.empty();
    if ((!parts && l.k != want) || l.n % kGroup != 0)
      fail("chain follower ", i, ": K = ", l.k, " (needs ", want, "), N = ", l.n,
           " (needs whole groups)");
    if (const std::string why = fc_unsupported(std::min(l.n, 16 * kGroup), l.k); !why.empty())
      fail("chain follower ", i, ": ", why);
    FcPlacement at = chain.next_at[i];
    if (i == 0 && chain.pairwise) {
      if (chain.extra_k != f.down.n || l.n != f.down.n)
        fail("a pairwise follower needs as many extra inputs and outputs as w2 has outputs");
      at.in_at.clear();
      for (int g = 0; g < l.n / kGroup; ++g) at.in_at.push_back(2 * kPiece * g);
    }
    next.push_back(geometry(l, at));
    widest = std::max(widest, i == 0 ? chain.extra_k + f.down.n : want);
  }
  return next;
}

}  // namespace

std::vector<std::pair<int, int>> fc_product_bytes(const FcTableProducts& products,
                                                  const std::vector<int>& tile_of) {
  std::array<int, 16> count{};
  std::vector<std::pair<int, int>> out;
  for (const FcProductGroup& pg : products.groups) {
    if (pg.group < 0 || size_t(pg.group) >= tile_of.size() || tile_of[size_t(pg.group)] < 0 ||
        tile_of[size_t(pg.group)] > 15)
      fail("table products of group ", pg.group, " of ", tile_of.size(), " placed groups");
    const int tile = tile_of[size_t(pg.group)];
    out.emplace_back(tile, 2 * kPiece * count[size_t(tile)]++);
  }
  return out;
}

FfnChainPrograms generate_ffn_chain(const FfnChain& chain, const FcPlacement& up_at,
                                    const FcPlacement& down_at) {
  return generate_ffn_chain(chain, up_at, down_at, nullptr);
}

FfnChainEmitted emit_ffn_chain(Emitter& e, const FfnChain& chain, const FcPlacement& up_at,
                               const FcPlacement& down_at, const FfnChainTail* tail,
                               const FfnChainFrom* from, int& ring_ordinal, OutputList& outs) {
  const FfnLayer& f = chain.ffn;
  e.part("chain");
  const int hidden = f.up.n / 2;
  if (f.up.n % (2 * kGroup) != 0 || hidden > 16 * kGroup || f.down.k != hidden ||
      f.down.n % kGroup != 0)
    fail("FFN of ", f.up.n, " up outputs and w2 ", f.down.n, " x ", f.down.k,
         ": needs whole pairs of 64-output groups, w2's K = half of them, at most 1024");
  if (chain.next.empty() || chain.next.size() != chain.next_at.size())
    fail("an FFN chain needs followers, each with a placement");
  // The products' tables follow in the same pop, after whole packets of the rest (products_stage
  // moves them).
  const int in_k = f.up.k + chain.extra_k;
  const int tables_at = from ? from->tables_at : fc_tables_at(in_k);
  const int tables_k = chain.products.layer >= 0 ? fc_tables_bytes(in_k, chain.products.tables) : 0;
  if (chain.extra_k <= 0 || chain.extra_k % kPiece != 0)
    fail("the chain's extra input of ", chain.extra_k, " bytes is not whole 64-byte pieces");
  if (const std::string why = fc_unsupported(kGroup, in_k); !why.empty())
    fail("the chain's whole input: ", why);
  if (const std::string why = fc_unsupported(std::min(f.up.n, 16 * kGroup), f.up.k); !why.empty())
    fail(why);
  if (const std::string why = fc_unsupported(f.down.n, f.down.k); !why.empty()) fail(why);
  const Geometry in = geometry(kGroup, in_k, in_k, false);
  const Geometry up = geometry(f.up, up_at);
  const Geometry down = geometry(f.down, down_at);
  int widest = 0;
  const std::vector<Geometry> next = follower_geometries(chain, widest);
  // The extra pieces wait at x_piece until follower 0 reads them: every layer's x below them.
  if (in.x_piece < widest)
    fail("the chain's input pieces at narrow byte ", in.x_piece, " lie under a layer's input of ",
         widest, " bytes");
  uint32_t gate_tiles = 0;
  for (int i = 0; i < hidden / kGroup; ++i) {
    const int tile = up.tile_of[size_t(2 * i)];
    if (up.tile_of[size_t(2 * i + 1)] != tile || up.slot_of[size_t(2 * i)] != 0)
      fail("the FFN placement must put w1's and w3's group ", i, " on one tile, w1's first");
    gate_tiles |= tile_bit(tile);
  }
  const FfnBuffers buf{(std::max(in.x_piece + kPiece, widest) + 255) / 256 * 256};
  std::vector<std::pair<int, int>> up_pieces, extra_pieces, m_pieces;
  if (from) {
    up_pieces = from->up_pieces;
    extra_pieces = from->extra_pieces;
    if (int(up_pieces.size()) != up.in_tiles ||
        int(extra_pieces.size()) != in.in_tiles - up.in_tiles)
      fail("the chain's input from tiles: ", up_pieces.size(), " and ", extra_pieces.size(),
           " pieces for ", up.in_tiles, " and ", in.in_tiles - up.in_tiles);
  } else {
    for (int i = 0; i < in.in_tiles; ++i)
      (i < up.in_tiles ? up_pieces : extra_pieces).emplace_back(i, in.x_piece / 4);
  }
  if (chain.products.layer >= static_cast<int>(chain.next.size()))
    fail("table products of chain follower ", chain.products.layer, ": no such follower");
  const FcChainRms& rms = chain.rms;
  const std::string& chain_name = chain.next.back().output_name;
  if (rms.layer >= static_cast<int>(chain.next.size()) ||
      (rms.layer >= 0 && (rms.n <= 0 || rms.n > chain.next[size_t(rms.layer)].n ||
                          rms.output_name.empty() || rms.output_name == chain_name)))
    fail("chain '", chain_name, "': RMSNorm's scale of follower ", rms.layer, " over ", rms.n,
         " bytes, output '", rms.output_name, "'");
  // x's groups (16 words each) and r must fit under scalar memory's top.
  if (rms.layer >= 0 && chain_rms_x_word(fc_groups(chain.next[size_t(rms.layer)].n)) < 0)
    fail("chain '", chain_name, "': RMSNorm's scale of follower ", rms.layer, "'s ",
         fc_groups(chain.next[size_t(rms.layer)].n), " groups needs more than ", kScalarMemoryWords,
         " words of scalar memory");
  for (int i = 0; i < hidden / kGroup; ++i)
    m_pieces.emplace_back(up.tile_of[size_t(2 * i)], buf.m() / 4);
  const int y_at = (buf.end() + 255) / 256 * 256;
  // The groups waiting for r: their multipliers pass through narrow memory above every follower's
  // outputs (where the products and a tail start later).
  const std::vector<bool> late =
      after_r_groups(chain.after_r, chain_name, next, chain.rms.layer, false);
  const int late_at = y_at + kMaxSlots * kGroup * (static_cast<int>(next.size()) + 1);
  const int late_end =
      late_at + 4 * kGroup * static_cast<int>(std::count(late.begin(), late.end(), true));
  if (chain.after_r.layer >= 0 && late_end > kNarrowBytes)
    fail("chain '", chain_name, "': the multipliers from r take narrow memory up to byte ",
         late_end);
  // A tail's input after the chain's own and its tables, from the next whole packet on.
  const int tail_at = tail ? fc_tables_at(in_k + tables_k) : in_k + tables_k;
  const int more_k = tail_at + (tail ? tail->input_bytes : 0) - in_k;
  if (tail && (tail->input_bytes <= 0 || tail->input_bytes % 8 != 0 || !tail->emit))
    fail("chain '", chain.next.back().output_name, "': a tail of ", tail->input_bytes,
         " input bytes (needs whole 8-byte units) or without code");
  if (!from) input_stage(e, in, f.up, more_k);
  broadcast_stage(e, up.compute_mask(), up_pieces, ring_ordinal);
  op_stage(e, up, f.up, buf.h1());
  ffn_gate_setup(e, gate_tiles, buf.identity());
  ffn_gate(e, gate_tiles, {buf.h1(), buf.h3(), buf.g(), buf.a(), buf.m(), buf.products()}, kWords,
           f);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  broadcast_stage(e, down.compute_mask(), m_pieces, ring_ordinal);
  op_stage(e, down, f.down, y_at);
  std::vector<std::pair<int, int>> pieces, out_pieces;
  const std::vector<std::pair<int, int>> y_pieces = output_pieces(down, y_at);
  for (size_t i = 0; i < y_pieces.size(); ++i) {
    // Pairwise: x2's piece g, then w2's group g; else all of x2, then all of w2's output.
    if (chain.pairwise) pieces.push_back(extra_pieces[i]);
    pieces.emplace_back(y_pieces[i].first, y_pieces[i].second / 4);
    if (chain.output_down) out_pieces.push_back(y_pieces[i]);
  }
  if (!chain.pairwise) pieces.insert(pieces.begin(), extra_pieces.begin(), extra_pieces.end());
  int at = y_at, products_at = 0;
  FfnChainTailAt tail_place;
  tail_place.input_at = from ? from->tail_input_at : tail_at;
  std::optional<ScalarRms> r;  // r to compute, once its bytes are in scalar memory
  for (size_t i = 0; i < next.size(); ++i) {
    at += kMaxSlots * kGroup;
    broadcast_stage(e, next[i].compute_mask(), pieces, ring_ordinal);
    const bool waits = static_cast<int>(i) == chain.after_r.layer;
    op_stage(e, next[i], chain.next[i], at, r ? &*r : nullptr, waits ? late : std::vector<bool>{});
    r.reset();
    if (waits) {
      // r is in scalar memory now: the waiting groups' multipliers from it, then their op.
      emit_group_multipliers_from_r(e, after_r_rows(chain.after_r, next[i]), kChainRmsRWord, 0,
                                    late_at, ring_ordinal);
      std::vector<bool> early(late.size());
      for (size_t group = 0; group < late.size(); ++group) early[group] = !late[group];
      op_stage(e, next[i], chain.next[i], at, nullptr, early);
    }
    pieces.clear();
    const bool out = chain.next_output.empty() || chain.next_output.at(i);
    const std::vector<std::pair<int, int>> outputs = output_pieces(next[i], at);
    tail_place.follower_out.push_back(outputs);
    for (size_t group = 0; group < outputs.size(); ++group) {
      const auto [tile, byte] = outputs[group];
      pieces.emplace_back(tile, byte / 4);
      if (out && !multiplied(chain.products, static_cast<int>(i), static_cast<int>(group)))
        out_pieces.emplace_back(tile, byte);
    }
    if (static_cast<int>(i) == chain.products.layer) products_at = at;
    if (static_cast<int>(i) == rms.layer) {
      // x's groups into scalar memory; r on the scalar core while the next follower's ops run
      // (after the last one, at once).
      const int x_word = chain_rms_x_word(static_cast<int>(outputs.size()));
      std::vector<std::array<int, 3>> to_scalar;
      for (size_t group = 0; group < outputs.size(); ++group)
        to_scalar.push_back(
            {outputs[group].first, outputs[group].second, x_word + kWords * int(group)});
      pieces_to_scalar_memory(e, to_scalar, ring_ordinal);
      scalar_memory_fence(e, static_cast<int>(to_scalar.size()));
      r = ScalarRms{x_word, rms.n, rms.zero_point, rms.mean_mult, kChainRmsRWord};
    }
  }
  if (r) emit_scalar_rms(e, *r);
  int narrow_end = at + kMaxSlots * kGroup;
  const int products_base = chain.products.layer >= 0 ? narrow_end : -1;
  if (chain.products.layer >= 0)
    narrow_end = products_stage(e, next[size_t(chain.products.layer)], products_at, chain.products,
                                tables_at, narrow_end, out_pieces);
  pieces_output_stage(e, out_pieces, chain.next.back(), ring_ordinal, outs,
                      rms.layer >= 0 ? rms.output_name : "", tail == nullptr);
  if (chain.after_r.layer >= 0) narrow_end = std::max(narrow_end, late_end);
  if (from && narrow_end > from->narrow_below)
    throw LayoutRejected(cat("the chain from tiles takes narrow bytes up to ", narrow_end,
                             ", its input lies from byte ", from->narrow_below));
  if (tail) {
    tail_place.tables_at = tables_at;
    tail_place.products_at = products_base;
    tail_place.narrow_end = narrow_end;
    tail_place.outputs = &outs;
    narrow_end = std::max(narrow_end, tail->emit(e, ring_ordinal, tail_place));
  }
  return {narrow_end, in_k + more_k, static_cast<int>(out_pieces.size()) * kGroup};
}

FfnChainPrograms generate_ffn_chain(const FfnChain& chain, const FcPlacement& up_at,
                                    const FcPlacement& down_at, const FfnChainTail* tail) {
  Emitter e;
  int ring_ordinal = 0;
  OutputList outs;
  const FfnChainEmitted done =
      emit_ffn_chain(e, chain, up_at, down_at, tail, nullptr, ring_ordinal, outs);
  const FfnLayer& f = chain.ffn;
  const Geometry up = geometry(f.up, up_at);
  const Geometry down = geometry(f.down, down_at);
  int widest = 0;
  const std::vector<Geometry> next = follower_geometries(chain, widest);
  FcLayer in_layer = f.up;
  in_layer.k = done.input_k;
  FfnChainPrograms out;
  out.marks = e.marks();
  out.execution = execution_with_outputs(e.finish(), in_layer, outs, done.narrow_end);
  out.parts = e.part_bytes();
  const auto caching = [&](const Geometry& g, const FcLayer& l, const FcRowWrite& rows) {
    std::vector<uint8_t> parameters = fc_parameters(l);
    parameters.insert(parameters.end(), rows.bytes.begin(), rows.bytes.end());
    container::Executable pc =
        caching_executable(caching_program(g, rows.rows), std::move(parameters));
    pc.parameter_caching_token = caching_token(pc.parameters);
    out.caching.push_back(std::move(pc));
  };
  caching(up, f.up, {});
  caching(down, f.down, {});
  for (size_t i = 0; i < next.size(); ++i)
    caching(next[i], chain.next[i],
            static_cast<int>(i) == chain.after_r.layer ? after_r_constants(chain.after_r, next[i])
                                                       : FcRowWrite{});
  out.execution.parameter_caching_token = out.caching.front().parameter_caching_token;
  return out;
}

FfnChainPrograms generate_fc_chain(const FcChain& chain) {
  return generate_fc_chain(chain, nullptr);
}

FfnChainPrograms generate_fc_chain(const FcChain& chain, const FfnChainTail* tail) {
  if (chain.layers.empty() || chain.at.size() != chain.layers.size() ||
      chain.output.size() != chain.layers.size())
    fail("an FC chain needs layers, each with a placement and an output flag");
  std::vector<Geometry> g;
  int widest = 0;
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    const FcLayer& l = chain.layers[i];
    if (const std::string why = fc_unsupported(std::min(l.n, 16 * kGroup), l.k); !why.empty())
      fail("chain layer ", i, ": ", why);
    const bool parts = i > 0 && !chain.at[i].in_at.empty();
    const int want = i == 0 ? l.k : chain.layers[i - 1].n;
    if ((i > 0 && !parts && l.k != want) || l.n % kGroup != 0)
      fail("chain layer ", i, ": K = ", l.k, " (needs ", want, "), N = ", l.n,
           " (needs whole groups)");
    if (i == 0 && !chain.at[0].in_at.empty()) fail("the chain's first layer reads all its input");
    g.push_back(geometry(l, chain.at[i]));
    widest = std::max(widest, want);
  }
  if (chain.products.layer >= static_cast<int>(g.size()))
    fail("table products of chain layer ", chain.products.layer, ": no such layer");
  // The host's input: layer 0's, then the products' tables after whole packets (products_stage
  // moves them).
  FcLayer in_layer = chain.layers[0];
  const int tables_at = fc_tables_at(in_layer.k);
  const int tables_k =
      chain.products.layer >= 0 ? fc_tables_bytes(in_layer.k, chain.products.tables) : 0;
  // A tail's input after the chain's own and its tables, from the next whole packet on.
  const int tail_at = tail ? fc_tables_at(in_layer.k + tables_k) : 0;
  const std::string& name = chain.layers.back().output_name;
  if (tail && (tail->input_bytes <= 0 || tail->input_bytes % 8 != 0 || !tail->emit))
    fail("chain '", name, "': a tail of ", tail->input_bytes,
         " input bytes (needs whole 8-byte units) or without code");
  // Groups after r: r's block is the tail's (its count block) or the chain's own, where a tail's
  // input would start.
  const std::vector<bool> late = after_r_groups(chain.after_r, name, g, -1, true);
  const bool own_r_block = !late.empty() && !tail;
  int r_block = -1;
  if (!late.empty()) {
    r_block = tail ? tail_at + tail->r_block : fc_tables_at(in_layer.k + tables_k);
    if (tail && (tail->r_block < 0 || tail->r_block % 8 != 0 ||
                 tail->r_block + kRBlockBytes > tail->input_bytes))
      fail("chain '", name, "': groups after r with r's block at byte ", tail->r_block,
           " of a tail's input of ", tail->input_bytes, " bytes");
  }
  const int more_k = tail          ? tail_at + tail->input_bytes - in_layer.k
                     : own_r_block ? r_block + kRBlockBytes - in_layer.k
                                   : tables_k;
  in_layer.k += more_k;
  Emitter e;
  int ring_ordinal = 0;
  e.part("chain");
  input_stage(e, g[0], chain.layers[0], more_k);
  std::vector<std::pair<int, int>> pieces = host_pieces(g[0]), out_pieces;
  int at = (std::max(g[0].x_piece + kPiece, widest) + 255) / 256 * 256, products_at = 0;
  // The groups waiting for r: r's block and then their multipliers pass through narrow memory
  // above every layer's outputs (where the products and a tail start later).
  const int late_at = at + kMaxSlots * kGroup * static_cast<int>(g.size());
  const int late_end =
      late_at + kPacket + 4 * kGroup * static_cast<int>(std::count(late.begin(), late.end(), true));
  if (!late.empty() && late_end > kNarrowBytes)
    fail("chain '", name, "': the multipliers from r take narrow memory up to byte ", late_end);
  FfnChainTailAt tail_place;
  tail_place.input_at = tail_at;
  for (size_t i = 0; i < g.size(); ++i) {
    broadcast_stage(e, g[i].compute_mask(), pieces, ring_ordinal);
    const bool waits = static_cast<int>(i) == chain.after_r.layer;
    op_stage(e, g[i], chain.layers[i], at, nullptr, waits ? late : std::vector<bool>{});
    if (waits) {
      // r's block from the pop to the first waiting group's tile, its piece to the top of scalar
      // memory (r at kRPieceWord + 1), the multipliers from it, then the waiting groups' op.
      const MultipliersFromR m = after_r_rows(chain.after_r, g[i]);
      constexpr int kRFifo = 0x2008;  // a FIFO row the tables' moves use too, after the ops
      host_to_narrow(e, tile_bit(m.tile[0]), kRFifo, late_at, kRBlockBytes, r_block / 8);
      tile_fence(e, "units=0x3ff");
      tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
      wait_tokens(e);
      pieces_to_scalar_memory(e, {{m.tile[0], late_at, kRPieceWord}}, ring_ordinal);
      emit_group_multipliers_from_r(e, m, kRPieceWord + 1, 1, late_at + kPacket, ring_ordinal);
      std::vector<bool> early(late.size());
      for (size_t group = 0; group < late.size(); ++group) early[group] = !late[group];
      op_stage(e, g[i], chain.layers[i], at, nullptr, early);
    }
    pieces.clear();
    const std::vector<std::pair<int, int>> outputs = output_pieces(g[i], at);
    tail_place.follower_out.push_back(outputs);
    for (size_t group = 0; group < outputs.size(); ++group) {
      const auto [tile, byte] = outputs[group];
      pieces.emplace_back(tile, byte / 4);
      if (chain.output[i] &&
          !multiplied(chain.products, static_cast<int>(i), static_cast<int>(group)))
        out_pieces.emplace_back(tile, byte);
    }
    if (static_cast<int>(i) == chain.products.layer) products_at = at;
    at += kMaxSlots * kGroup;
  }
  const int products_base = chain.products.layer >= 0 ? at : -1;
  if (chain.products.layer >= 0)
    at = products_stage(e, g[size_t(chain.products.layer)], products_at, chain.products, tables_at,
                        at, out_pieces);
  if (out_pieces.empty()) fail("an FC chain must return something");
  OutputList outs;
  pieces_output_stage(e, out_pieces, chain.layers.back(), ring_ordinal, outs, "", tail == nullptr);
  if (!late.empty()) at = std::max(at, late_end);
  if (tail) {
    tail_place.products_at = products_base;
    tail_place.narrow_end = at;
    tail_place.input_pieces = host_pieces(g[0]);
    tail_place.tables_at = tables_at;
    tail_place.outputs = &outs;
    at = std::max(at, tail->emit(e, ring_ordinal, tail_place));
  }
  FfnChainPrograms out;
  out.marks = e.marks();
  out.execution = execution_with_outputs(e.finish(), in_layer, outs, at);
  out.parts = e.part_bytes();
  for (size_t i = 0; i < g.size(); ++i) {
    const FcRowWrite rows = static_cast<int>(i) == chain.after_r.layer
                                ? after_r_constants(chain.after_r, g[i])
                                : FcRowWrite{};
    std::vector<uint8_t> parameters = fc_parameters(chain.layers[i]);
    parameters.insert(parameters.end(), rows.bytes.begin(), rows.bytes.end());
    container::Executable pc =
        caching_executable(caching_program(g[i], rows.rows), std::move(parameters));
    pc.parameter_caching_token = caching_token(pc.parameters);
    out.caching.push_back(std::move(pc));
  }
  out.execution.parameter_caching_token = out.caching.front().parameter_caching_token;
  return out;
}

void append_constants_row(std::vector<uint8_t>& bytes, const std::vector<float>& base,
                          const std::vector<bool>& padding, size_t from) {
  if (from + kGroup > base.size() || (!padding.empty() && from + kGroup > padding.size()))
    fail("a constants' row from ", from, " of ", base.size(), " constants and ", padding.size(),
         " padding flags");
  for (size_t j = from; j < from + kGroup; ++j) {
    const uint32_t bits = !padding.empty() && padding[j] ? 0u : std::bit_cast<uint32_t>(base[j]);
    for (int b = 0; b < 4; ++b) bytes.push_back(static_cast<uint8_t>(bits >> (8 * b)));
  }
}

int fc_group_over(const FcLayer& layer, const FcPlacement& placement, int tile, int unit,
                  int units) {
  return group_over(geometry(layer, placement), tile, unit, units);
}

FcRowWrite fc_weight_rows(const FcLayer& layer, const FcPlacement& placement, int kq) {
  if (layer.n % kGroup != 0 || kq < 0 || 4 * kq >= weights_k(layer))
    fail("weight row ", kq, " of a layer of N = ", layer.n, ", K = ", weights_k(layer));
  const Geometry g = geometry(layer, placement);
  FcRowWrite w;
  for (int t = 0; t < g.tiles; ++t) {
    w.rows.push_back({g.tile_of[size_t(t)],
                      g.base_of[size_t(t)] + g.aux.weights_unit() + fc_weight_row_unit(4 * kq)});
    for (int c = 0; c < kGroup; ++c) {
      const size_t row = static_cast<size_t>(t * kGroup + c) * static_cast<size_t>(layer.k);
      for (int b = 0; b < 4; ++b)
        w.bytes.push_back(static_cast<uint8_t>(int{layer.weights[row + size_t(4 * kq + b)]} + 128));
    }
  }
  return w;
}

void emit_fc_parameter_stream(Emitter& e, const FcLayer& layer, const FcPlacement& placement) {
  emit_fc_parameter_streams(e, {{&layer, &placement}});
}

void emit_fc_parameter_streams(
    Emitter& e, const std::vector<std::pair<const FcLayer*, const FcPlacement*>>& parts,
    const std::vector<FcParameterRow>& rows, int mark_from) {
  std::vector<Geometry> gs;
  for (const auto& [layer, placement] : parts) {
    if (layer->k <= 0 || layer->k % kPiece != 0)
      fail("K = ", layer->k, ": not a multiple of 64 (fewer weights: FcLayer::weight_k)");
    if (layer->n <= 0 || fc_groups(layer->n) > kMaxSlots * 16)
      fail("N = ", layer->n, ": more outputs than the tiles hold");
    const FcLayer padded = layer->n % kGroup != 0 ? padded_to_groups(*layer) : *layer;
    gs.push_back(geometry(padded, *placement));
  }
  parameter_streams(e, gs, rows, mark_from);
}

container::Executable fc_caching(const FcLayer& layer, const FcPlacement& placement,
                                 const FcRowWrite* rows) {
  if (layer.k <= 0 || layer.k % kPiece != 0)
    fail("K = ", layer.k, ": not a multiple of 64 (fewer weights: FcLayer::weight_k)");
  if (layer.n <= 0 || fc_groups(layer.n) > kMaxSlots * 16)
    fail("N = ", layer.n, ": more outputs than the tiles hold");
  const FcLayer padded = layer.n % kGroup != 0 ? padded_to_groups(layer) : layer;
  const Geometry g = geometry(padded, placement);
  std::vector<uint8_t> parameters = fc_parameters(padded);
  if (rows) {
    if (rows->bytes.size() != rows->rows.size() * size_t{kPacket})
      fail(rows->bytes.size(), " bytes for ", rows->rows.size(), " parameter rows");
    parameters.insert(parameters.end(), rows->bytes.begin(), rows->bytes.end());
  }
  container::Executable pc = caching_executable(
      caching_program(g, rows ? rows->rows : std::vector<FcParameterRow>{}), std::move(parameters));
  pc.parameter_caching_token = caching_token(pc.parameters);
  return pc;
}

}  // namespace tinycoral::compiler
