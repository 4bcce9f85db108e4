// The CONV_2D chain generator (conv_codegen.h). Every address below is derived from the layers'
// shapes; the fields around the data movement (fences, sync records, DMA fields) are the ones the
// FULLY_CONNECTED generator reproduces from edgetpu_compiler 16.0 (program_parts.h).
#include "compiler/conv_codegen.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/error.h"
#include "compiler/conv_hand_over.h"
#include "compiler/conv_packets.h"
#include "compiler/conv_placement.h"
#include "compiler/conv_plan.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/emitter.h"
#include "compiler/fields.h"
#include "compiler/program_parts.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

using namespace conv;

namespace {

// Logical strides (in words) of the place a layer writes its outputs: position, row, group.
struct OutTarget {
  int base = 0;  // bytes
  int pixel_bytes = 0, row_words = 0;
};

OutTarget out_target(const Plan& p, size_t i) {
  OutTarget t;
  if (i + 1 == p.end) {
    // (Into the next stage's image, whose pixels are out_ch bytes too: in_place.)
    const bool into = p.into_base >= 0;
    t.base = into ? p.into_base : p.out_base;
    t.pixel_bytes = p.out_ch;
    t.row_words = into ? p.into_row_words : p.out_row / 4;
  } else {
    const LayerPlan& n = p.layers[i + 1];
    t.base = n.pixel(p.layers[i].oa - n.top, n.l->pad_left);
    t.pixel_bytes = n.cin;
    t.row_words = n.row_words();
  }
  return t;
}

// A joined heads layer's operand image on the tile (ConvLayer::joins): the band's pixels, each
// holding every operand but the last join's result.
OutTarget join_target(const Plan& p, size_t i) {
  const LayerPlan& lp = p.layers[i];
  return {p.join_base, join_pitch(*lp.l), lp.blocks * join_pitch(*lp.l) / 4};
}

// The head whose groups start at g0.
int head_index(const ConvLayer& l, int g0) {
  for (size_t k = 0; k < l.heads.size(); ++k)
    if (l.heads[k].g0 == g0) return static_cast<int>(k);
  return 0;
}

// The zero point `zp` into `bytes` of tile `tile`'s narrow memory from `base`. Up to
// kMeshFillWords words a walk level: longer regions as rows of equal length, a second level (as
// the surplus fills below), where their word count has a divisor that makes them so; else rows
// of kMeshFillWords and the rest (one instruction for the 6 x 16 KB of v2's 112 x 112 images
// instead of 6).
void fill_narrow(TileBatch& b, int tile, int base, int bytes, int zp) {
  const uint32_t fill = 0x01010101u * static_cast<uint32_t>(zp);
  const int words = bytes / 4;
  auto one_level = [&](int at, int n) {
    Fields f(b);
    f("i.addr=")
        .hex(static_cast<uint64_t>(at))(" i=(1 x ")
        .dec(n)(")(")
        .dec(1 - n)(" x 1)(")
        .dec(1 - n)(" x 1)(")
        .dec(1 - n)(" x 1) i.sdims=1 fill_en=1 fill=")
        .hex(fill);
    b.add(tile_bit(tile), "mesh_n", std::move(f).take());
  };
  auto rows = [&](int at, int row, int n) {
    Fields f(b);
    f("i.addr=")
        .hex(static_cast<uint64_t>(at))(" i=")
        .walk({{1, row}, {row, n}}, 4)(" i.sdims=3 fill_en=1 fill=")
        .hex(fill);
    b.add(tile_bit(tile), "mesh_n", std::move(f).take());
  };
  if (words <= kMeshFillWords) {
    if (words > 0) one_level(base, words);
    return;
  }
  for (int row = kMeshFillWords; row * kMeshFillWords >= words; --row)
    if (words % row == 0) {
      rows(base, row, words / row);
      return;
    }
  const int whole = words / kMeshFillWords, rest = words % kMeshFillWords;
  if (whole > 1)
    rows(base, kMeshFillWords, whole);
  else
    one_level(base, kMeshFillWords);
  if (rest > 0) one_level(base + 4 * whole * kMeshFillWords, rest);
}

// The partial last block of layer i's rows (1-3 input channels) writes surplus pixels into the
// next image's row past its interior: its zero point again there once the op has run.
void surplus_fill(TileBatch& b, const Plan& p, size_t i) {
  const LayerPlan& lp = p.layers[i];
  const OutTarget t = out_target(p, i);
  const int words = surplus_pixels(lp) * t.pixel_bytes / 4;
  const uint32_t value = 0x01010101u * static_cast<uint32_t>(p.layers[i + 1].l->in_zp);
  b.add(tile_bit(p.tile), "mesh_n",
        cat("i.addr=", hex(t.base + lp.l->ow * t.pixel_bytes),
            " i=", strided_walk({{1, words}, {t.row_words, lp.ob - lp.oa}}, 4),
            " i.sdims=3 fill_en=1 fill=", hex(value)));
}

// A stage whose first image is the output of a layer with a partial last block (the stage before
// ends on it) receives the block's surplus pixels past each row's interior with the hand-over: its
// zero point there again, on every row of the image, before the stage's first layer reads them.
void hand_over_surplus_fill(TileBatch& b, const Plan& p) {
  const LayerPlan& lp = p.layers[p.first];
  const int words = surplus_pixels(p.layers[p.first - 1]) * lp.cin / 4;
  b.add(tile_bit(p.tile), "mesh_n",
        cat("i.addr=", hex(lp.pixel(0, lp.l->pad_left + lp.l->w)),
            " i=", strided_walk({{1, words}, {lp.row_words(), lp.hp}}, 4),
            " i.sdims=3 fill_en=1 fill=", hex(0x01010101u * static_cast<uint32_t>(lp.l->in_zp))));
}

void preamble(Emitter& e, const std::string& input_name) {
  program_start(e);
  tile_fence(e, "units=0x020");
  input_address(e, input_name);
}

// The host's image, row piece by row piece, into the interior of layer 0's padded image on every
// tile whose band needs the rows (one packet to all of them, one wideToNarrow each).
// The host's image units [offset, offset + units) (8 bytes each) streamed to the tiles of `mask`;
// the offset counts within passes of kActPassUnits units.
void image_infeed(Emitter& e, int offset, int units, uint32_t mask) {
  e.add("infeed",
        cat("stream=1", offset % kActPassUnits ? cat(" buf_off=", hex(offset % kActPassUnits)) : "",
            " walk=", nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
            " k157=1 k160=1 av176=1 count_m1=", units - 1, " tail_en=1 count_neg=",
            hex(kActPassUnits - units), " f308=0x8 pop_wait=", hex((offset + 1) & 0xffff),
            " k336=1 f352=1 f391=2 dest=", hex(mask), " f434=0xf lanes_m1=3"));
}

// The image's infeeds in program order. Each names its offset only within a pop pass, and the
// chip reads it at the wrap nearest to where the previous infeed ended (docs/chip.md "Infeed"):
// `ordered` stays true while every infeed starts within half a pass of that end (and the first in
// the first pass), so that each reads the rows it is meant to.
struct ImageInfeeds {
  int end = -1;  // units
  bool ordered = true;
  // (A new pop: its infeeds' offsets count from its first unit.)
  void new_pop() { end = -1; }
  void add(Emitter& e, int offset, int units, uint32_t mask) {
    constexpr int kHalf = kActPassUnits / 2;
    if (end < 0 ? offset >= kActPassUnits : offset + kHalf < end || offset >= end + kHalf)
      ordered = false;
    end = offset + units;
    image_infeed(e, offset, units, mask);
  }
};

// The host's image as one run per tile (the rows its band reads, halo rows included), when the
// first stage is in bands (not whole images): each tile's run in one transfer of its own, the
// rows shared with a neighbouring band read a second time from the pop's staging (the infeeds of
// one pop may re-read what an earlier one sent, docs/chip.md "Infeed"; Google's PoseNet does so
// by a unit), so the host still sends the image once. A run may cross a pop pass (Google's v1 1.0
// infeed at word 153 sends units 14112-18815 of its 16384-unit passes). All runs share one FIFO
// row (each tile has its own wide memory), so their wideToNarrows and consumers, equal on tiles
// whose bands have one height, are one instruction each, and an infeed per tile follows: one
// transfer per tile instead of runs of rows for the same tiles cut into whole packets and a short
// piece, with the halo rows in transfers of their own (v1 1.0: 99 infeeds -> 16). `taken[y]`
// gets the tiles that received row y so.
void stream_runs(Emitter& e, const std::vector<Plan>& tiles, int& piece,
                 std::vector<uint32_t>& taken, ImageInfeeds& infeeds) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  struct Run {
    const Plan* tile;
    int y, rows;
  };
  std::vector<Run> runs;
  for (const Plan& t : tiles) {
    const LayerPlan& lp = t.layers.front();
    const int y = std::max(lp.top, 0), rows = std::min(lp.top + lp.hp, l.h) - y;
    if (rows > 0 && rows_in_one_transfer(row_bytes, rows)) runs.push_back({&t, y, rows});
  }
  if (runs.empty()) return;
  // (The infeeds by their first row: each starts near where the one before ended.)
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.y < b.y; });
  const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
  {
    TileBatch writes(e);
    for (const Run& r : runs) {
      const LayerPlan& lp = r.tile->layers.front();
      writes.add(tile_bit(r.tile->tile), "w2n",
                 cat("w.addr=", hex(fifo), " w=(0 x ", packets_of(r.rows * row_bytes),
                     ") w.rows=1 n.addr=", hex(lp.pixel(r.y - lp.top, l.pad_left) / 4),
                     " n=", strided_walk({{1, row_bytes / 4}, {lp.row_words(), r.rows}}, 6),
                     " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 "
                     "sync.en2=1 tail_en870=1"));
    }
  }
  {
    TileBatch consumers(e);
    for (const Run& r : runs)
      consumers.add(tile_bit(r.tile->tile), "ringcons0",
                    cat("addr=", hex(fifo), " dst=(0 x ", packets_of(r.rows * row_bytes),
                        ") slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
  }
  for (const Run& r : runs) {
    infeeds.add(e, r.y * row_bytes / 8, r.rows * row_bytes / 8, tile_bit(r.tile->tile));
    for (int y = r.y; y < r.y + r.rows; ++y)
      taken[static_cast<size_t>(y)] |= tile_bit(r.tile->tile);
  }
}

bool stream_input(Emitter& e, const std::vector<Plan>& tiles, bool runs);
void stream_input(Emitter& e, const std::vector<Plan>& tiles);

// The image rows [first, end) a tile of the first stage holds (padding rows excluded).
std::pair<int, int> image_rows(const LayerPlan& lp) {
  const int top = lp.full ? lp.need_top : lp.top, hp = lp.full ? lp.need_rows : lp.hp;
  return {std::max(top, 0), std::min(top + hp, lp.l->h)};
}

// The host's image as it is (ConvChain::repack_w): each tile of the first stage takes the 8-byte
// units covering its rows into a staging region at `base` (one address on every tile), then 16
// bytes for the identity row the repack multiplies by. Until the repack has run only the first
// image holds anything (its zero point): the staging may lie below or above it, over the stage's
// other images and output (the second image is filled after the repack).
struct Staging {
  int row_bytes = 0;  // the host's rows
  int base = 0, identity = 0;
  // Units a tile's share starts and ends at a multiple of (but the image's last): kPieceUnits
  // where that fits, so that the shares' common rows go once to both tiles (stream_pieces).
  int align = 1;
  // Where a tile's first row starts, from the staging's base, but for its bytes past a word (the
  // whole words before it are the tile's `shift`): one address on every tile, so that
  // the repack's ops of tiles whose bands have one height are one instruction.
  int lead = 0;
};

// Units of one ring packet.
constexpr int kPieceUnits = kPiece / 8;

// The tile's units of the host's image: [first, end), widened to multiples of `align` (within the
// image's units).
std::pair<int, int> staged_units(const LayerPlan& lp, int row_bytes, int align) {
  const auto [ya, yb] = image_rows(lp);
  if (yb <= ya) return {0, 0};
  const int units = (lp.l->h * row_bytes + 7) / 8;
  return {ya * row_bytes / 8 / align * align,
          std::min(round_up((yb * row_bytes + 7) / 8, align), units)};
}

// The bytes of tile `lp`'s first staged unit before its first row.
int row_offset(const LayerPlan& lp, int row_bytes, int align) {
  const auto [u0, u1] = staged_units(lp, row_bytes, align);
  return u1 > u0 ? image_rows(lp).first * row_bytes - u0 * 8 : 0;
}

// Whole words the tile's units lie above the staging's base (Staging::lead).
int shift(const LayerPlan& lp, const Staging& s) {
  return s.align > 1 ? s.lead - row_offset(lp, s.row_bytes, s.align) / 4 * 4 : 0;
}

std::optional<Staging> staging_of(const ConvChain& chain, const std::vector<Plan>& tiles,
                                  int align) {
  Staging s;
  s.row_bytes = chain.repack_w * chain.layers.front().cin;
  s.align = align;
  int below = kNarrowBytes, above = 0, bytes = 0;
  for (const Plan& t : tiles)
    if (align > 1)
      s.lead = std::max(s.lead, row_offset(t.layers.front(), s.row_bytes, align) / 4 * 4);
  for (const Plan& t : tiles) {
    const LayerPlan& lp = t.layers.front();
    below = std::min(below, lp.in_base);
    above = std::max(above, lp.in_base + lp.in_bytes());
    const auto [u0, u1] = staged_units(lp, s.row_bytes, align);
    bytes = std::max(bytes, shift(lp, s) + 8 * (u1 - u0));
  }
  const int size = round_up(bytes, 64) + 16;
  if (size <= below) {
    s.base = 0;
  } else if (round_up(above, 64) + size <= kNarrowBytes) {
    s.base = round_up(above, 64);
  } else {
    return std::nullopt;
  }
  s.identity = s.base + round_up(bytes, 64);
  return s;
}

// Aligned to packets where that fits, else to units.
std::optional<Staging> staging_of(const ConvChain& chain, const std::vector<Plan>& tiles) {
  if (auto s = staging_of(chain, tiles, kPieceUnits)) return s;
  return staging_of(chain, tiles, 1);
}

int staging_end(const Staging& s) { return s.identity + 16; }

// The staged units of tiles whose shares start and end at whole packets (Staging::align; the
// `views` of stream_staged, each tile's share [top, top + hp)) in pieces: cut wherever a share
// starts or ends, each piece one infeed to every tile whose share holds it, so that the units two
// bands share cross the ring once (PoseNet: 509 KB where one run per tile sent 632 KB). A pop
// per tile's share from where it starts to where the next one starts (one DMA descriptor for the
// whole image): a piece's infeed waits only for its own pop, so the ring carries the first
// tiles' units while later ones are still staged (PoseNet's first op 18.4 k -> about 9 k cycles
// after the start). Each tile takes its share in one transfer as before (one consumer and one
// wideToNarrow, its packets arriving piece by piece, whole but for the image's last). False,
// emitting nothing, where a share does not go so or does not start at a whole packet.
bool stream_pieces(Emitter& e, const std::vector<Plan>& views, int units) {
  struct Share {
    const Plan* tile;
    int u0, u1;
  };
  std::vector<Share> shares;
  std::set<int> cuts = {0, units}, pops = {0};
  for (const Plan& v : views) {
    const LayerPlan& lp = v.layers.front();
    if (lp.hp <= 0) continue;
    if (!rows_in_one_transfer(8, lp.hp) || lp.top % kPieceUnits != 0 ||
        ((lp.top + lp.hp) % kPieceUnits != 0 && lp.top + lp.hp != units))
      return false;
    shares.push_back({&v, lp.top, lp.top + lp.hp});
    cuts.insert({lp.top, lp.top + lp.hp});
    pops.insert(lp.top);
  }
  if (shares.empty()) return false;
  const int fifo = kInputFifo;
  {
    TileBatch writes(e);
    for (const Share& r : shares) {
      const LayerPlan& lp = r.tile->layers.front();
      writes.add(tile_bit(r.tile->tile), "w2n",
                 cat("w.addr=", hex(fifo), " w=(0 x ", packets_of(8 * (r.u1 - r.u0)),
                     ") w.rows=1 n.addr=", hex(lp.in_base / 4),
                     " n=", strided_walk({{1, 2}, {2, r.u1 - r.u0}}, 6),
                     " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 "
                     "sync.en2=1 tail_en870=1"));
    }
  }
  {
    TileBatch consumers(e);
    for (const Share& r : shares)
      consumers.add(tile_bit(r.tile->tile), "ringcons0",
                    cat("addr=", hex(fifo), " dst=(0 x ", packets_of(8 * (r.u1 - r.u0)),
                        ") slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
  }
  ImageInfeeds infeeds;
  int popped = 0;  // the unit the last pop started at
  for (auto a = cuts.begin(), b = std::next(a); b != cuts.end(); a = b++) {
    if (pops.contains(*a)) {
      const auto next = pops.upper_bound(*a);
      const int end = next == pops.end() ? units : *next;
      if (*a == 0)
        host_pop(e, int64_t{units} * 8, int64_t{end} * 8);
      else
        pop_more(e, int64_t{end - *a} * 8);
      popped = *a;
      infeeds.new_pop();
    }
    uint32_t mask = 0;
    for (const Share& r : shares)
      if (r.u0 <= *a && *b <= r.u1) mask |= tile_bit(r.tile->tile);
    if (mask != 0) infeeds.add(e, *a - popped, *b - *a, mask);
  }
  return true;
}

// The staging as an image of 8-byte rows (one unit each), so that stream_input sends each tile
// its units the ways it sends image rows (in pieces where the shares start at whole packets).
void stream_staged(Emitter& e, const std::vector<Plan>& tiles, const Staging& s) {
  ConvLayer units;
  units.h = (tiles.front().layers.front().l->h * s.row_bytes + 7) / 8;
  units.w = 2;
  units.cin = 4;
  std::vector<Plan> views;
  for (const Plan& t : tiles) {
    const auto [u0, u1] = staged_units(t.layers.front(), s.row_bytes, s.align);
    Plan v;
    v.tile = t.tile;
    LayerPlan lp;
    lp.l = &units;
    lp.cin = 4;
    lp.wp = 2;
    lp.in_base = s.base + shift(t.layers.front(), s);
    lp.top = u0;
    lp.hp = u1 - u0;
    v.layers.push_back(lp);
    views.push_back(std::move(v));
  }
  if (s.align == kPieceUnits && stream_pieces(e, views, units.h)) return;
  stream_input(e, views);
}

// One narrow copy (dp 3 cfg0 0x07, docs/chip_ops.md): `bytes` (1-4) bytes of `in` a step times
// the identity row's lanes make each output word, `words` words a row over `rows` rows; with
// in_zp = out_zp = zp the word's bytes past `bytes` get the zero point.
std::string narrow_copy(int in, int in_row, int out, int out_row, int bytes, int words, int rows,
                        int zp) {
  int in_hmode = 0, out_hmode = 0, par_hmode = 0;
  const std::string in_walk = byte_walk({{1, bytes}, {4, words}, {in_row, rows}}, 3, &in_hmode);
  const std::string out_walk = byte_walk({{4, 1}, {4, words}, {out_row, rows}}, 3, &out_hmode);
  const std::string par = byte_walk({{1, bytes}, {0, words}, {0, rows}}, 1, &par_hmode);
  const float inf = std::numeric_limits<float>::infinity();
  return cat("loops=(", bytes, ")(", words, ")(", rows, ") in.base=", hex(in),
             " in.hmode=", in_hmode, " in=", in_walk, " in.tflags=0x03 out.base=", hex(out),
             " out=", out_walk, " out.tflags=0x7 par.base=", hex(kMulIdentityRow & 0x1fff),
             " par.sel=1 par.hmode=", par_hmode, " par=", par, " psum.hmode=1 psum=(0 x ", bytes,
             ")(0 x ", words, ")(0 x ", rows,
             ")(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum.tflags=0x0840 cfg0=0x007 cfg1=0x06b "
             "sync0=0x4000 sync1=0x4000 cfg2=0x06 cfg3=7 dp_mode=3 reduce_mask=0x01 "
             "out_ch_last=3 out_ch=3 mult=",
             f32_bits(1.0f), " clamp_max=", f32_bits(inf), " clamp_min=", f32_bits(-inf),
             zp ? cat(" in_zp=", zp, " out_zp=", zp) : "");
}

// The staged rows into the first layer's image: each row's whole words, then its last bytes
// with the zero point after them (the column the layer may read as padding).
void repack_input(Emitter& e, const std::vector<Plan>& tiles, const Staging& s) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  uint32_t mask = 0;
  for (const Plan& t : tiles)
    if (staged_units(t.layers.front(), s.row_bytes, s.align).second > 0) mask |= tile_bit(t.tile);
  // (Built after the stream: the input FIFO's rows are the identity's wide row.)
  emit_identity_row(e, mask, s.identity);
  const int words = s.row_bytes / 4, tail = s.row_bytes % 4;
  {
    TileBatch ops(e);
    for (const Plan& t : tiles) {
      const LayerPlan& lp = t.layers.front();
      const auto [ya, yb] = image_rows(lp);
      if (yb <= ya) continue;
      const int in = s.base + shift(lp, s) + row_offset(lp, s.row_bytes, s.align);
      const int out = lp.pixel(ya - lp.top, l.pad_left), row = 4 * lp.row_words();
      if (words > 0)
        ops.add(tile_bit(t.tile), "op",
                narrow_copy(in, s.row_bytes, out, row, 4, words, yb - ya, 0));
      if (tail > 0)
        ops.add(tile_bit(t.tile), "op",
                narrow_copy(in + 4 * words, s.row_bytes, out + 4 * words, row, tail, 1, yb - ya,
                            l.in_zp));
    }
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// The host's image both ways (below, and with a run per tile first) and the one of fewer
// instruction words whose infeeds read the rows meant (ImageInfeeds); the two tries are only
// counted, the chosen way is emitted once.
void stream_input(Emitter& e, const std::vector<Plan>& tiles) {
  Emitter with = Emitter::counting(), without = Emitter::counting();
  const bool ordered = stream_input(with, tiles, true);
  stream_input(without, tiles, false);
  stream_input(e, tiles, ordered && with.words() < without.words());
}

// Returns whether the infeeds are ordered (ImageInfeeds).
bool stream_input(Emitter& e, const std::vector<Plan>& tiles, bool runs) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  // Images over 128 KiB (224 x 224 x 3) are popped in several passes; the infeeds' offsets
  // count modulo one pass (the staging ring).
  host_pop(e, int64_t{l.h} * row_bytes);
  // A piece is up to `max_rows` whole image rows needed by the same tiles (rows of up to 256
  // bytes), or 256 bytes of one row; every piece is a whole number of 8-byte units
  // (input_streamable; rows 4 bytes past whole units only on one tile, two rows at a time).
  const int max_rows = row_bytes > kPiece ? 1 : rows_per_packet(row_bytes);
  // Tiles that keep the whole image (LayerPlan::full) take every row of a transfer any of them
  // reads, at one address (one wideToNarrow for all).
  bool full = true;
  for (const Plan& t : tiles) full = full && t.layers.front().full;
  // (Rows a tile got in its run, stream_runs, are not sent to it again.)
  int piece = 0, rows = 1;
  std::vector<uint32_t> taken(static_cast<size_t>(l.h), 0);
  ImageInfeeds infeeds;
  if (runs && !full && row_bytes % 8 == 0) stream_runs(e, tiles, piece, taken, infeeds);
  // The tiles each row still goes to, found once (the search below asks for rows many times).
  std::vector<uint32_t> row_masks(static_cast<size_t>(l.h), 0);
  for (const Plan& t : tiles) {
    const auto [first, end] = image_rows(t.layers.front());
    for (int y = first; y < end; ++y) row_masks[static_cast<size_t>(y)] |= tile_bit(t.tile);
  }
  for (int y = 0; y < l.h; ++y) row_masks[static_cast<size_t>(y)] &= ~taken[static_cast<size_t>(y)];
  auto mask_of = [&](int y) { return row_masks[static_cast<size_t>(y)]; };
  for (int y = 0; y < l.h; y += rows) {
    uint32_t mask = mask_of(y);
    rows = 1;
    // Whole rows for the same tiles that make more than one packet go in one transfer (the
    // hand-overs' multi-packet form: one FIFO row filled k times, the last fill short when rows
    // over a packet end inside one), within one pop pass: a band's rows in one transfer.
    int whole = 0;
    uint32_t together = mask;
    for (int m = 1;
         row_bytes % 8 == 0 && y + m <= l.h && m * row_bytes <= kHandOverPackets * kPiece &&
         (y * row_bytes / 8) % kActPassUnits + m * row_bytes / 8 <= kActPassUnits &&
         (full || mask_of(y + m - 1) == mask);
         ++m) {
      together |= mask_of(y + m - 1);
      if ((m * row_bytes % kPiece == 0 && m * row_bytes > kPiece) ||
          ends_inside_a_packet(row_bytes, m * row_bytes)) {
        whole = m;
        mask = together;
      }
    }
    if (whole > 0) {
      rows = whole;
      if (mask == 0) continue;
      if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
      const int bytes = whole * row_bytes, offset = y * row_bytes / 8, units = bytes / 8;
      const std::string packets = cat("(0 x ", packets_of(bytes), ")");
      {
        TileBatch writes(e);
        for (const Plan& t : tiles) {
          if (!(mask & tile_bit(t.tile))) continue;
          const LayerPlan& lp = t.layers.front();
          writes.add(tile_bit(t.tile), "w2n",
                     cat("w.addr=", hex(fifo), " w=", packets,
                         " w.rows=1 n.addr=", hex(lp.pixel(y - lp.top, l.pad_left) / 4),
                         " n=", strided_walk({{1, row_bytes / 4}, {lp.row_words(), whole}}, 6),
                         " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 "
                         "sync.en2=1 tail_en870=1"));
        }
      }
      e.add("ringcons0", cat("tiles=", hex(mask), " addr=", hex(fifo), " dst=", packets,
                             " slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
      infeeds.add(e, offset, units, mask);
      continue;
    }
    while (rows < max_rows && y + rows < l.h && mask_of(y + rows) == mask) ++rows;
    if (mask == 0) continue;
    // One row of two packets or more (a halo row two bands read): its whole packets in one
    // transfer (the multi-packet form), the rest as one short piece, instead of a piece per
    // 256 bytes (v2's and v1 1.0's 672-byte rows: two transfers instead of three).
    int first_at = 0;
    if (rows == 1 && row_bytes % 8 == 0 && row_bytes >= 2 * kPiece &&
        (y * row_bytes / 8) % kActPassUnits + row_bytes / kPiece * kPiece / 8 <= kActPassUnits) {
      first_at = row_bytes / kPiece * kPiece;
      if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
      const std::string packets = cat("(0 x ", first_at / kPiece, ")");
      {
        TileBatch writes(e);
        for (const Plan& t : tiles) {
          if (!(mask & tile_bit(t.tile))) continue;
          const LayerPlan& lp = t.layers.front();
          writes.add(tile_bit(t.tile), "w2n",
                     cat("w.addr=", hex(fifo), " w=", packets,
                         " w.rows=1 n.addr=", hex(lp.pixel(y - lp.top, l.pad_left) / 4),
                         " n=", narrow_walk(first_at / 4),
                         " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 "
                         "sync.en2=1 tail_en870=1"));
        }
      }
      e.add("ringcons0", cat("tiles=", hex(mask), " addr=", hex(fifo), " dst=", packets,
                             " slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
      infeeds.add(e, y * row_bytes / 8, first_at / 8, mask);
    }
    for (int at = first_at; at < row_bytes; at += kPiece, ++piece) {
      if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const int fifo = kInputFifo + 4 * (piece % kInputRows);
      const int bytes = std::min(kPiece, row_bytes - at);  // of each row
      const int offset = (y * row_bytes + at) / 8;
      const int units = rows * bytes / 8;
      {
        TileBatch writes(e);
        for (const Plan& t : tiles) {
          if (!(mask & tile_bit(t.tile))) continue;
          const LayerPlan& lp = t.layers.front();
          const int narrow = lp.pixel(y - lp.top, l.pad_left) + at;  // word aligned
          writes.add(tile_bit(t.tile), "w2n",
                     cat("w.addr=", hex(fifo), " w=(1 x 1) n.addr=", hex(narrow / 4),
                         " n=", strided_walk({{1, bytes / 4}, {lp.row_words(), rows}}, 6),
                         " n.lvl_mask=0x01 mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                         "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                         "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 tail_en870=1"));
        }
      }
      ring_receive(e, mask, fifo, 1, -64);
      infeeds.add(e, offset, units, mask);
    }
  }
  return infeeds.ordered;
}

// One part of a layer: its multipliers (and biases) into the output stage, then the op over every
// output position and the part's groups.
std::string bias_load_fields(const LayerPlan& lp, int first_row, int groups) {
  const std::string level2 =
      groups > 1 ? cat("(", lp.planes == 2 ? -95 : 1, " x ", groups, ")") : "";
  return cat("w.addr=", hex(first_row * kRowUnits), " w=(1 x ", lp.planes * groups,
             ") w.lvl_mask=0x1 n=(1 x 32)(", lp.planes == 2 ? 33 : 1, " x ", lp.planes == 2 ? 2 : 1,
             ")", level2,
             " n.lvl_mask=0x03 mode=2 fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 "
             "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 tail_en870=1");
}

void bias_load(Emitter& e, const LayerPlan& lp, int first_row, int groups, uint32_t tile) {
  e.add("w2n", cat("tiles=", hex(tile), " ", bias_load_fields(lp, first_row, groups)));
}

// The op fields every layer shares after its walks.
// `chunked`: the K-chunked class (gen2021's: dp 3, cfg0 0xA7, reduce 0b101 over loops (window
// rows, positions, chunks, groups); isa.md 2.1.5 "Conv, K-chunked"), else the position-outer one.
void op_tail(Fields& f, const LayerPlan& lp, int zp_unit, int out_ch, int last_ch = 0,
             const ConvLayer::Head* head = nullptr, bool chunked = false) {
  if (last_ch == 0) last_ch = out_ch;
  const ConvLayer& l = *lp.l;
  // (A fan-out head's groups: the head's output stage.)
  const float clamp_max = head ? head->clamp_max : l.clamp_max;
  const float clamp_min = head ? head->clamp_min : l.clamp_min;
  const int32_t out_zp = head ? head->out_zp : l.out_zp;
  const auto unit = static_cast<uint64_t>(zp_unit);
  f(" cfg0=")(chunked ? "0x0a7"
                      : "0x0a5")(" cfg1=0x14e sync0=0x4000 sync1=0x4000 cfg2=0x07 cfg3=8 in_zp=")
      .dec(l.in_zp)(" pc_aux_unit=")
      .hex(unit)(" pc_aux_rows=")
      .dec(lp.planes)(" pc_zp_unit=")
      .hex(unit)(l.bias.empty() ? "" : " cfg4=1");
  // A last group of fewer channels (MobileNet v2's 96, 144, 160) writes its words only and skips
  // the rest of its `out` group level (Google's out_ch_last / out.last_*, e.g. 31 and 8 words
  // skipped in gen2020 MobileNet v2).
  if (last_ch != out_ch)
    f(" out.last_mode=3 out.last_cnt=")
        .dec(last_ch / 4 - 1)(" out.last_skip=")
        .dec(out_ch / 4 - last_ch / 4);
  f(chunked ? " dp_mode=3 reduce_mask=0x05" : " dp_mode=2 reduce_mask=0x01")(" out_ch_last=")
      .dec(last_ch - 1)(" out_ch=")
      .dec(out_ch - 1)(" mult=")
      .hex(std::bit_cast<uint32_t>(1.0f))(" clamp_max=")
      .hex(std::bit_cast<uint32_t>(clamp_max))(" clamp_min=")
      .hex(std::bit_cast<uint32_t>(clamp_min))(" out_zp=")
      .dec(out_zp)(" pc_mult=1");
}

// The words of groups [g0, g1) of a depthwise layer (the last group's only, when the channels
// end before a whole group of 64).
int depthwise_words(const LayerPlan& lp, int g0, int g1) {
  return std::min((g1 - g0) * lp.dw_words, lp.l->cin / 4 - g0 * lp.dw_words);
}

// A depthwise layer's groups [g0, g1) of a part: one op group per 4-channel input word (out_ch 3:
// the clock charges the 16 MACs of the four columns a step uses, not all 64 columns' 256), its
// taps' rows holding the word's 4x4 diagonal in columns 0..3.
// (`pick`: the band's rows it computes, all by default: swap_split's two ops.)
void depthwise_op(TileBatch& e, const Plan& p, size_t i, const Part& part, int g0, int g1,
                  RowRange pick = {}) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const int ra = std::max(lp.oa, pick.first), rb = std::min(lp.ob, pick.end);
  const int rows = rb - ra, dy = ra - lp.oa;
  const int64_t positions = int64_t{rows} * lp.blocks;
  const int taps = l.kh * l.kw;
  const int words = depthwise_words(lp, g0, g1);
  // (A tile of a split layer keeps only its groups' channels: lp.cin of them, from group p.g0.)
  const int first = lp.cin == l.cin ? 0 : p.g0;
  const int in_base = lp.op_in(0) - lp.window_off + 4 * lp.dw_words * (g0 - first) +
                      dy * l.stride_h * lp.row_words() * 4;
  // Shared rows: read in place. Dense weights: fill `word` of FIFO row `tap` (depthwise_fifo).
  const int par_unit = lp.dense() ? kDepthwiseFifo : lp.weight_row(part) * kRowUnits;
  const OutTarget t = out_target(p, i);
  Fields f(e);
  f("loops=(")
      .dec(taps)(")(")
      .dec(positions)(")(")
      .dec(words)(") in.base=")
      .hex(static_cast<uint64_t>(in_base))(" in=")
      .walk({{l.dilation_w * lp.cin / 4, l.kw},
             {l.dilation_h * lp.row_words(), l.kh},
             {l.stride_w * lp.cin / 4, lp.blocks},
             {int64_t{l.stride_h} * lp.row_words(), rows},
             {1, words}},
            8, " m3")(" in.tflags=0x01 out.base=")
      .hex(static_cast<uint64_t>(t.base + kColumns * (g0 - p.g0) + dy * t.row_words * 4))(" out=")
      .walk({{1, 1}, {t.pixel_bytes / 4, lp.blocks}, {t.row_words, rows}, {1, words}}, 8,
            " m3")(" out.tflags=0x1 par.base=")
      .hex(static_cast<uint64_t>(par_unit))(" par=")
      .walk({{1, taps}, {0, positions}, {lp.dense() || lp.same_words ? 0 : taps, words}}, 8, " m1");
  if (lp.dense()) f(" par.tflags=0x80 par.fifo=").hex(static_cast<uint64_t>(taps));
  f(" psum=(0 x ").dec(taps)(")");
  op_tail(f, lp, lp.zp_row(part) * kRowUnits, 4);
  e.add(tile_bit(p.tile), "op", std::move(f).take());
}

// A dense depthwise part's words [0, words) of its groups: their tap entries from the block at
// wide row `row` of tile `holder` to the FIFO rows of the tiles of `mask`. Only an infeed from
// scalar memory sends 16-byte ring packets, so the block goes there and back: the scalar core's
// infeed (which sends what the next outfeed writes), the outfeed of the holder's rows into scalar
// memory from word 0, the holder's producer of those rows to the scalar core, then the tiles'
// consumer (one FIFO row per tap, one fill per word) and the op (docs/compiler.md "How Google
// stores depthwise parameters"; Google issues the consumer and op first). `outfed`: the
// scalar-memory words outfed so far.
std::string depthwise_fifo_consumer(int taps, int words) {
  return cat("addr=", hex(kDepthwiseFifo), " dst=(1 x ", taps, ")(", 1 - taps, " x 1)(", 1 - taps,
             " x 1)(", 1 - taps, " x ", words, ") sdims=1 cbuf=1 slots=", taps, " mode=3");
}

struct RoundTrip {
  int holder = 0, row = 0;
  uint32_t mask = 0;
  int taps = 0, words = 0;
};

void depthwise_round_trip(Emitter& e, const RoundTrip& r, int& outfed) {
  const auto [holder, row, mask, taps, words] = r;
  const int bytes = words * taps * kEntryBytes;
  const int smem_words = bytes / 4, rows = (bytes + kRowBytes - 1) / kRowBytes;
  const int full = smem_words / 64, rest = smem_words % 64;
  e.add(
      "infeed",
      cat("smem=1 walk=(1 x 64)(-63 x ", full + (rest ? 1 : 0), ")(-63 x 1) k157=1 k160=1 par168=1",
          rest ? cat(" count_m1=", rest - 1, " tail_en=1 count_neg=", hex(64 - rest)) : "",
          " f308=0xb par314=1 par315=3 pop_wait=", hex((outfed + 1) & 0xffff),
          " k336=1 f352=0x01 f391=2 dest=", hex(mask), " f434=0x3"));
  e.add("outfeed", cat("walk=(1 x 64)(-63 x ", rows,
                       ")(-63 x 1) walk.inc3=2057 k173=1 k178=1 k182=1 k214=1 f222=0x3f"));
  e.add("ringprod", cat("tiles=", hex(tile_bit(holder)), " addr=", hex(row * kRowUnits),
                        " src=(1 x ", rows, ") sdims=1 pcfg=4 dest=0x10000"));
  outfed += 64 * rows;
}

// Output rows of a band an op computes: `count` rows from row `first` on, `step` apart (count < 0:
// the whole band [oa, ob)). halo_first's two ops of a band.
struct RowPick {
  int first = 0, step = 1, count = -1;
};

// `head`: the fan-out head the op computes (of those with channels in the part; nullptr for
// other layers). `pick`: its rows (not of a pixel band).
void layer_op(TileBatch& e, const Plan& p, size_t i, const Part& part, const ConvLayer::Head* head,
              const RowPick& pick = {}) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const uint32_t tile = tile_bit(p.tile);
  const bool picked = pick.count >= 0;
  // (A pixel band: its pixels as one row of positions, from its first pixel on; its rows are
  // gapless in and out, pixel_stage.)
  const int rows = p.pixel_band() ? 1 : picked ? pick.count : lp.ob - lp.oa;
  const int blocks = p.pixel_band() ? p.pb - p.pa : lp.blocks;
  const int skip = pixel_skip(p, lp);
  const int groups = part.g1 - part.g0;
  const int64_t positions = picked ? int64_t{rows} * blocks : positions_of(p, lp);
  // (Picked rows: the first one's offset from the band's first, in rows, and their step.)
  const int dy = picked ? pick.first - lp.oa : 0, step = picked ? pick.step : 1;
  const int64_t row_step = int64_t{l.stride_h} * step * lp.row_words();  // input words a row
  const bool fifo = !part.owned.empty();
  // K-chunked (a FIFO part's window of `a` rows, LayerPlan::chunk): the positions inside the
  // chunks, each chunk `a` words of a tap row (n of them a row), every position's partial sums
  // kept in its psum row until the last chunk.
  const int a = fifo ? part.chunk : 0;
  const int n = a > 0 ? lp.window_words / a : 0, chunks = a > 0 ? lp.kwords / a : 0;
  // (Joined heads: each head's channels into its slot of the operand image.)
  const bool joins = joined(l);
  const OutTarget t = joins ? join_target(p, i) : out_target(p, i);
  const int out_base =
      joins ? t.base + join_slot(l) * head_index(l, part.g0)
            : t.base + kColumns * (part.g0 - p.g0) + skip * t.pixel_bytes + dy * t.row_words * 4;
  // A fan-out head whose channels end inside its last group (PoseNet's heatmaps 17, offsets 34)
  // writes only that group's words; a head of one group computes only its columns (out_ch 19,
  // as Google's heads), its pixels keeping their place in the output buffer's 64-channel groups.
  // A head sharing its group computes the columns before its channels too (they are the
  // other heads', whose ops run after it: ConvLayer::Head::c0).
  const ConvLayer::Head* h = joins ? nullptr : head;
  const int op_ch = joins ? join_slot(l) : lp.op_columns(part.g0, part.g1, h);
  const int head_end = h ? h->c0 + h->cout - kColumns * (h->g1 - 1 - h->g0) : 0;
  const int last_ch = joins                                               ? join_slot(l)
                      : h && part.g1 == h->g1 && head_end % kColumns != 0 ? round_up(head_end, 4)
                      : part.g1 == lp.groups && lp.groups > 1 && l.cout % kColumns != 0
                          ? round_up(l.cout % kColumns, 4)
                          : lp.group_ch;
  const int group_words = op_ch / 4;
  Fields f(e);
  f("loops=(");
  if (a > 0)
    f.dec(a)(")(").dec(positions)(")(").dec(chunks)(")(").dec(groups)(")");
  else if (groups > 1)
    f.dec(lp.kwords)(")(").dec(positions)(")(").dec(groups)(")");
  else
    f.dec(lp.kwords)(")(").dec(positions)(")");
  f(" in.base=")
      .hex(static_cast<uint64_t>(lp.op_in(0) - lp.window_off + skip * lp.cin +
                                 dy * l.stride_h * lp.row_words() * 4))(" in=");
  // `in`: the window's words, tap rows, blocks along x, output rows, group; K-chunked: a chunk's
  // words, blocks, rows, then the chunks along a tap row and over the tap rows, group.
  if (a > 0)
    f.walk({{1, a},
            {lp.block * l.stride_w * l.cin / 4, blocks},
            {row_step, rows},
            {a, n},
            {lp.row_words(), l.kh},
            {0, groups}},
           8, " m3");
  else
    f.walk({{1, lp.window_words},
            {lp.row_words(), l.kh},
            {lp.block * l.stride_w * l.cin / 4, blocks},
            {row_step, rows},
            {0, groups}},
           8, " m3");
  f(" in.tflags=0x01 out.base=")
      .hex(static_cast<uint64_t>(out_base))(" out=")
      .walk({{1, group_words},
             {(joins ? 1 : lp.block) * t.pixel_bytes / 4, blocks},
             {t.row_words * step, rows},
             {kColumns / 4, groups}},
            8, " m3")(" out.tflags=0x1 par.base=")
      .hex(static_cast<uint64_t>(lp.weight_row(part) * kRowUnits))(" par=");
  // `par`: the group's weight rows for every position (a FIFO part: its window, one group a
  // fill; K-chunked: one chunk a fill).
  if (a > 0)
    f.walk({{1, a}, {0, positions}, {0, chunks}, {0, groups}}, 8, " m1");
  else
    f.walk({{1, lp.kwords}, {0, positions}, {fifo ? 0 : lp.kwords, groups}}, 8, " m1");
  if (fifo) f(" par.tflags=0x40 par.fifo=").hex(static_cast<uint64_t>(a > 0 ? a : lp.kwords));
  // `psum`: one row a position (Google's walk, gen2021 MobileNet v1 0.25 word 1008).
  if (a > 0)
    f(" psum.base=")
        .hex(static_cast<uint64_t>((lp.weight_row(part) + a) * kRowUnits))(" psum=")
        .walk({{0, a}, {1, positions}, {0, chunks}, {0, groups}}, 8, " m2");
  else
    f(" psum=(0 x ").dec(lp.kwords)(")");
  op_tail(f, lp, lp.zp_row(part) * kRowUnits, op_ch, last_ch, head, a > 0);
  e.add(tile, "op", std::move(f).take());
}

// A residual ADD on one tile: its input image (the layer before wrote it) plus the kept image,
// into the next layer's image (or the output), pixel by pixel over the tile's rows.
// (`rows`: the wide unit of its weight rows.)
AddOp residual_op(const Plan& p, size_t i, int rows) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const LayerPlan& xp = p.layers[static_cast<size_t>(l.residual_of)];
  const int y_at = lp.op_in(0), x_at = xp.pixel(lp.oa - xp.top, xp.l->pad_left);
  const OutTarget t = out_target(p, i);
  AddOp op;
  op.a = l.add_flowing_first ? y_at : x_at;
  op.b_minus_a = l.add_flowing_first ? x_at - y_at : y_at - x_at;
  op.out = t.base;
  op.rows = rows;
  op.levels = {{l.cin / 4, 4, 1},
               {l.w, l.cin, t.pixel_bytes / 4},
               {lp.ob - lp.oa, 4 * lp.row_words(), t.row_words}};
  return op;
}

bool same_add(const AddOp& x, const AddOp& y) {
  auto level = [](const AddOp::Level& v) { return std::tuple(v.count, v.in_stride, v.out_stride); };
  return x.a == y.a && x.b_minus_a == y.b_minus_a && x.out == y.out && x.rows == y.rows &&
         std::equal(x.levels.begin(), x.levels.end(), y.levels.begin(), y.levels.end(),
                    [&](const auto& u, const auto& v) { return level(u) == level(v); });
}

// The joins of a joined heads layer on the tiles of `mask` (bands of one height at the same
// addresses as `p`'s), once the heads' ops have written the operand image: each MUL as the
// product and pack ops over runs of up to kMulRunWords words (whole rows of the band, or pieces
// of one), each ADD as one op over the band; operands read at their slots of each pixel, the
// last join's result written into the next layer's image (or the stage's output).
void emit_tile_joins(Emitter& e, const Plan& p, size_t i, uint32_t mask) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const int slot = join_slot(l), pitch = join_pitch(l), words = slot / 4;
  const int rows = lp.ob - lp.oa, pixels = lp.blocks, row_bytes = pixels * pitch;
  const int products = p.join_base + round_up(rows * row_bytes, 64);
  const int aux = products + kJoinProducts;  // 16 ADD words, then 4 identity words
  if (std::any_of(l.joins.begin(), l.joins.end(), [](const auto& j) { return j.mul; }))
    emit_identity_row(e, mask, aux + 64);
  const OutTarget next = out_target(p, i);
  const int heads = static_cast<int>(l.heads.size());
  for (size_t k = 0; k < l.joins.size(); ++k) {
    const ConvLayer::Join& j = l.joins[k];
    const bool last = k + 1 == l.joins.size();
    const int out = last ? next.base : p.join_base + slot * (heads + static_cast<int>(k));
    // (Words per position: a block of pixels of the next image.)
    const int out_pixel = (last ? lp.block * next.pixel_bytes : pitch) / 4;
    const int out_row = last ? next.row_words : row_bytes / 4;
    const int a = p.join_base + slot * j.a, b = p.join_base + slot * j.b;
    if (!j.mul) {
      emit_add_rows(e, mask, aux, kAddRows, j.w1, j.w2, AddRowFills::kPaired);
      AddOp op;
      op.a = a;
      op.b_minus_a = b - a;
      op.out = out;
      op.rows = kAddRows;
      op.levels = {{words, 4, 1}, {pixels, pitch, out_pixel}, {rows, row_bytes, out_row}};
      emit_add_op(e, mask, op, j.mult, j.clamp_min, j.clamp_max, j.offset, j.out_zp);
      tile_fence(e, "counters=0x1ffff units=0x3ff");
      continue;
    }
    auto mul = [&](int y, int x, int n_pixels, int n_rows) {
      MulOp op;
      op.a = a + y * row_bytes + x * pitch;
      op.b = b + y * row_bytes + x * pitch;
      op.products = products;
      op.out = out + 4 * (y * out_row + x * out_pixel);
      op.levels = {{words, 4, 1}, {n_pixels, pitch, out_pixel}, {n_rows, row_bytes, out_row}};
      emit_mul_op(e, mask, op, j.a_zp, j.b_zp, j.mult, j.clamp_min, j.clamp_max, j.out_zp);
    };
    if (words * pixels <= kMulRunWords) {
      const int per = kMulRunWords / (words * pixels);
      for (int y = 0; y < rows; y += per) mul(y, 0, pixels, std::min(per, rows - y));
    } else {
      const int per = kMulRunWords / words;
      for (int y = 0; y < rows; ++y)
        for (int x = 0; x < pixels; x += per) mul(y, x, std::min(per, pixels - x), 1);
    }
  }
}

// emit_tile_joins on every tile of the stage, one instruction for tiles of the same addresses.
void emit_joins(Emitter& e, const Stage& stage, size_t i) {
  std::vector<std::pair<const Plan*, uint32_t>> alike;
  for (const Plan& p : stage.tiles) {
    auto at = std::find_if(alike.begin(), alike.end(), [&](const auto& q) {
      const LayerPlan &x = p.layers[i], &y = q.first->layers[i];
      return x.ob - x.oa == y.ob - y.oa && p.join_base == q.first->join_base &&
             out_target(p, i).base == out_target(*q.first, i).base;
    });
    if (at == alike.end()) at = alike.insert(alike.end(), {&p, 0u});
    at->second |= tile_bit(p.tile);
  }
  for (const auto& [p, mask] : alike) emit_tile_joins(e, *p, i, mask);
}

// Ring packets per transfer to the host: the outfeed's walk counts 8-byte units in 15 bits.
constexpr int kOutfeedPackets = 128;

// `bytes` from narrow word `n_addr` of `tile` (read with the narrow walk `walk`) to the host as
// one transfer: a narrowToWide filling the ring row once per packet, one outfeed and one ring
// producer. Several packets go as Google's programs send their outputs (gen2020 PoseNet word
// 7339: `w=(1 x 1)(0 x 12)`, a producer of 12 packets, outfeeds of 384 units), one packet in the
// single-fill form; the last packet may be short (the outfeed takes only `bytes`, in whole 8-byte
// units: a last half unit takes 4 bytes past them, as Google's PoseNet heatmaps of an odd number
// of 20-byte pixels, word 6717).
// The transfer's narrowToWide (its fields after `tiles=`): the sender's bytes into its ring row.
std::string outfeed_fill(int n_addr, const std::string& walk, int bytes) {
  const int packets = (bytes + kRowBytes - 1) / kRowBytes;
  if (packets == 1)
    return cat("n.addr=", hex(n_addr), " n=", walk, " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
               " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
               "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
               "tail_lvl=1");
  return cat("n.addr=", hex(n_addr), " n=", walk, " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
             " w=(1 x 1)(0 x ", packets,
             ") w.lvl_mask=0x1 w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
             "sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 f803=1");
}

// The transfer's outfeed and ring producer, once its narrowToWide has been issued.
void outfeed_send(Emitter& e, int tile, int bytes, int& ordinal) {
  const int packets = (bytes + kRowBytes - 1) / kRowBytes;
  e.add("outfeed", cat("walk=(0 x ", (bytes + 7) / 8, ") k173=3 f222=0x7f"));
  if (packets == 1) {
    ring_send(e, tile, kRingFifo, 0x10000, ordinal++);
    return;
  }
  e.add("ringprod",
        cat("tiles=", hex(tile_bit(tile)), " addr=", hex(kRingFifo), " src=(1 x 1)(0 x ", packets,
            ") sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", ordinal++,
            " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 "
            "dest=0x10000"));
}

void outfeed_transfer(Emitter& e, int tile, int n_addr, const std::string& walk, int bytes,
                      int& ordinal) {
  e.add("n2w", cat("tiles=", hex(tile_bit(tile)), " ", outfeed_fill(n_addr, walk, bytes)));
  outfeed_send(e, tile, bytes, ordinal);
}

// One tile's band of the last layer's output to the host, up to kOutfeedPackets a transfer.
void stream_tile_output(Emitter& e, const Plan& p, int& ordinal) {
  for (int at = 0; at < p.out_bytes; at += kOutfeedPackets * kRowBytes) {
    const int bytes = std::min(kOutfeedPackets * kRowBytes, p.out_bytes - at);
    outfeed_transfer(e, p.tile, (p.out_base + at) / 4, narrow_walk(bytes / 4), bytes, ordinal);
  }
}

// Bytes per pixel of a fan-out head's output: its channels in whole words (the host reads its
// channels), as Google's heads (17 channels: 20 bytes).
int head_pixel_bytes(const ConvLayer::Head& h) { return round_up(h.cout, 4); }

// Pixels of one tile's band of the last layer.
int band_pixels(const Plan& p) {
  const LayerPlan& lp = p.layers[p.end - 1];
  return (lp.ob - lp.oa) * lp.blocks * lp.block;
}

// Bytes of one tile's share of a head's output: its pixels in whole 8-byte units (the outfeed
// moves 8-byte units; the layout places each tile's share at its own offset).
int head_band_bytes(const Plan& p, const ConvLayer::Head& h) {
  return round_up(band_pixels(p) * head_pixel_bytes(h), 8);
}

// One tile's share of a head's output: its pixels' head channels (a 2-level narrow walk picks
// them out of the pixels of all heads), as many pixels a transfer as make up to kOutfeedPackets.
void stream_tile_head(Emitter& e, const Plan& p, const ConvLayer::Head& h, int& ordinal) {
  // (An even number of pixels a transfer: whole 8-byte units.)
  const int pb = head_pixel_bytes(h), per_transfer = (kOutfeedPackets * kRowBytes / pb) & ~1;
  const int pixels = band_pixels(p);
  for (int k = 0; k < pixels; k += per_transfer) {
    const int n = std::min(per_transfer, pixels - k);
    const int at = p.out_base + k * p.out_ch + kColumns * (h.g0 - p.g0) + h.c0;
    outfeed_transfer(e, p.tile, at / 4, strided_walk({{1, pb / 4}, {p.out_ch / 4, n}}, 6), n * pb,
                     ordinal);
  }
}

// The tiles that compute head `h` (all, or those of its slice when the heads are split by output
// groups over tiles), in tile order: the order their shares reach the host.
std::vector<Plan> head_tiles(const std::vector<Plan>& all, const ConvLayer::Head& h) {
  std::vector<Plan> tiles;
  for (const Plan& p : all)
    if (p.g1 == 0 || (h.g0 >= p.g0 && h.g1 <= p.g1)) tiles.push_back(p);
  std::sort(tiles.begin(), tiles.end(),
            [](const Plan& a, const Plan& b) { return a.tile < b.tile; });
  return tiles;
}

// Each fan-out head's output to its own host buffer, one after the other.
void stream_head_outputs(Emitter& e, const std::vector<Plan>& all, const ConvLayer& last,
                         int& ordinal) {
  for (const ConvLayer::Head& h : last.heads) {
    const std::vector<Plan> tiles = head_tiles(all, h);
    output_address(e, h.output_name);
    int total = 0;
    for (const Plan& p : tiles) total += head_band_bytes(p, h);
    descriptor(e, 5, 4, 6, total, 3);
    for (const Plan& p : tiles) stream_tile_head(e, p, h, ordinal);
    tile_fence(e, "counters=0x1ffff units=0x3ff");
    e.add("scsync",
          cat("tiles=0xffff smask=0x020 thr5=", (total + 31) / 32, " wait=0x020 sunits=0x0c"));
  }
}

int output_bytes(const std::vector<Plan>& tiles) {
  int total = 0;
  for (const Plan& t : tiles) total += t.out_bytes;
  return total;
}

// `kind`: the output, or the host's scratch buffer when a generator follows (emit_conv_head).
void stream_output(Emitter& e, const std::vector<Plan>& tiles, const std::string& output_name,
                   int& ordinal, BufferKind kind = BufferKind::kOutput) {
  const std::string name = kind == BufferKind::kOutput ? output_name : "";
  e.reloc_movi(10, kind, Half::kUpper32, name);
  e.reloc_movi(11, kind, Half::kLower32, name);
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  const int total = output_bytes(tiles);
  descriptor(e, 5, 4, 6, total, 3);
  // Where every tile sends its band in one transfer, their narrowToWides go first, those with the
  // same fields as one instruction (a split classifier's slices: one for 15 tiles, not 15), each
  // tile's into its own ring row before its producer as before.
  const bool one_each = std::all_of(tiles.begin(), tiles.end(), [](const Plan& p) {
    return p.out_bytes > 0 && p.out_bytes <= kOutfeedPackets * kRowBytes;
  });
  if (one_each) {
    {
      TileBatch fills(e);
      for (const Plan& p : tiles)
        fills.add(tile_bit(p.tile), "n2w",
                  outfeed_fill(p.out_base / 4, narrow_walk(p.out_bytes / 4), p.out_bytes));
    }
    for (const Plan& p : tiles) outfeed_send(e, p.tile, p.out_bytes, ordinal);
  } else {
    for (const Plan& p : tiles) stream_tile_output(e, p, ordinal);
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync",
        cat("tiles=0xffff smask=0x020 thr5=", (total + 31) / 32, " wait=0x020 sunits=0x0c"));
}

// `rows` wide rows of parameters, from byte `offset` of the executable's parameters (its address
// in s1/s0), into wide row `base_row` of the tiles in `mask`. (The offset is added to the lower
// word only: the parameters are far below 4 GiB and the host buffer does not straddle it in
// practice.)
void load_parameters(Emitter& e, int rows, uint32_t mask, int64_t offset, int base_row) {
  const int units = rows * kRowUnits;
  const int64_t bytes = int64_t{units} * 64;
  e.add("bundle",
        offset == 0 ? "s_op=0x0f s_x=3 imm=1" : cat("s_op=0x21 s_x=3 s_y=1 imm=", offset));
  e.add("bundle", "s_op=0x0f s_x=2 imm=0");
  descriptor(e, 3, 2, 4, bytes, 2);
  const Passes pop = passes_of(units, kParPassUnits);
  const int pop_rows = std::min((units + 1) / 2, 1024);
  const bool b183 = units % 2 == 0 || units >= 2048;
  e.add("pop",
        cat("walk=",
            nest({{1, kParPassUnits}, {1 - kParPassUnits, pop.count}, {1 - kParPassUnits, 1}}),
            " k121=1 k124=1 par136=1", pop.fields(), " k174=1 par177=1 k178=1 b183=", b183 ? 1 : 0,
            " rows_neg=", hex(0x8000 - pop_rows), " k199=1 k215=1"));
  const int r = rows;
  e.add("ringcons0", cat("tiles=", hex(mask), " addr=", hex(base_row * kRowUnits), " dst=(1 x ", r,
                         ")(", 1 - r, " x 1)(", 1 - r, " x 1)(", 1 - r, " x 1) sdims=1"));
  const Passes per_tile = passes_of(units, kParPassUnits);
  e.add("infeed",
        cat("walk=",
            nest({{1, kParPassUnits}, {1 - kParPassUnits, per_tile.count}, {1 - kParPassUnits, 1}}),
            " k157=1 k160=1 par172=1", per_tile.fields(),
            " f308=0x8 par314=1 pop_wait=0x1 k336=1 f352=1 f391=2 dest=", hex(mask),
            " f434=0xf lanes_m1=3"));
}

// What the caching program loads, in order: the first segment of every group into its tiles, then
// each segment with an owner (own_turns) into its owner's rows.
// Then the owner tiles' runs of FIFO weights (Part::owned), then the cached ADD rows
// (LayerPlan::add_row).
struct CachedLoad {
  int rows = 0;
  size_t offset = 0;  // into the parameter stream
  uint32_t mask = 0;
  int row = 0;
};
std::vector<CachedLoad> cached_loads(const Shapes& shapes) {
  std::vector<CachedLoad> loads;
  for (const Segment& seg : shapes.segments)
    if (seg.first_of_group) loads.push_back({seg.rows, seg.offset, seg.mask, seg.base_row});
  for (const Segment& seg : shapes.segments)
    if (seg.owner >= 0) loads.push_back({seg.rows, seg.offset, tile_bit(seg.owner), seg.owner_row});
  for (const LayerPlan& lp : shapes.layers)
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned)
        loads.push_back({run.r1 - run.r0, run.offset, tile_bit(run.tile), run.row});
  for (const LayerPlan& lp : shapes.layers)  // (and the residual ADDs' weight rows)
    if (lp.add_row >= 0) loads.push_back({kAddWeightRows, lp.add_offset, lp.add_mask, lp.add_row});
  return loads;
}

// The first `rows` rows of segment `seg` from its owner's wide memory to its tiles' rows over the
// ring: the owner's producer (the parameter form, pcfg 4, which Google's programs broadcast their
// weights with) and the tiles' consumer of the host's load (load_parameters) without the host.
void broadcast_parameters(Emitter& e, const Segment& seg, int rows) {
  const int r = rows;
  e.add("ringcons0",
        cat("tiles=", hex(seg.mask), " addr=", hex(seg.base_row * kRowUnits), " dst=(1 x ", r, ")(",
            1 - r, " x 1)(", 1 - r, " x 1)(", 1 - r, " x 1) sdims=1"));
  e.add("ringprod",
        cat("tiles=", hex(tile_bit(seg.owner)), " addr=", hex(seg.owner_row * kRowUnits),
            " src=(1 x ", r, ") sdims=1 pcfg=4 dest=", hex(seg.mask)));
}

// A FIFO part's weights (Part::owned) into the window of its tiles `mask`: their ringConsumer1,
// filling the window's `kwords` rows once per group (Google's weight FIFO, gen2020 MobileNet v2
// word 216, without the aux pair: the multipliers and biases stay resident).
// (Its fields after `tiles=`.)
std::string fifo_consumer(const LayerPlan& lp, const Part& part) {
  // (K-chunked: a window of `chunk` rows, filled kwords / chunk times a group.)
  const int s = part.chunk > 0 ? part.chunk : lp.kwords;
  const int fills = (part.g1 - part.g0) * lp.kwords / s;
  return cat("addr=", hex(lp.weight_row(part) * kRowUnits), " dst=(1 x ", s, ")(", 1 - s, " x ",
             fills, ")(", 1 - s, " x 1)(", 1 - s, " x 1) sdims=1 cbuf=1 slots=", s,
             " mode=3 s_id=0x21 s_val=-1 s_en_a=1 s_en_b=1 s_y=1");
}

// The owners' producers, run after run in send order (own_fifo_weights'); the producer form of
// Google's word 244 (pcfg 4, to_c1, the computing tiles as `dest`). Each run after the first waits
// on a fence on the tile of the run before (the consumer takes packets in the order they arrive).
// As many runs as possible go after the parts' bias loads, consumers and ops, since the scalar
// core's wait at a fence holds the ops back; but a fence on a tile that computes the layer
// (`computing`) waits for its op, which may wait for the very run behind the fence, so the runs
// before the last such fence and that fence go before the ops (kFencedBeforeOps; own_fifo_weights
// puts such runs first and makes them the short ones). A part without such a fence sends its first
// run before the ops (kFirstBeforeOps, Google's order, word 244 before 365); the rest go after them
// (kAfterOps).
enum class FifoSend { kFencedBeforeOps, kFirstBeforeOps, kAfterOps };

// A fence on `tiles`: the scalar core waits until each has run everything issued to it so far.
void fence_on(Emitter& e, uint32_t tiles) {
  e.add("sync", cat("tiles=", hex(tiles), " units=0x3ff signal=1"));
  e.add("scsync", cat("tiles=0xffff tokwait=1 tmask=", hex(tiles), " sunits=0x0c"));
}

// The fence before run k of `part`: on the tile of run k - 1.
void fifo_fence(Emitter& e, const Part& part, size_t k) {
  fence_on(e, tile_bit(part.owned[k - 1].tile));
}

void fifo_run(Emitter& e, const Part& part, size_t k, uint32_t mask) {
  const Part::Owned& run = part.owned[k];
  const int r = run.r1 - run.r0;
  e.add("ringprod",
        cat("tiles=", hex(tile_bit(run.tile)), " addr=", hex(run.row * kRowUnits), " src=(1 x ", r,
            ")(", 1 - r, " x 1)(", 1 - r, " x 1)(", 1 - r,
            " x 1) sdims=1 pcfg=4 r0.id=0x32 r0.en_a=1 r0.en_b=1 to_c1=1 dest=", hex(mask)));
}

// How many of `part`'s runs go before the ops: those up to the last fence on a computing tile (0:
// none, no such fence).
size_t runs_before_ops(const Part& part, uint32_t computing) {
  size_t fenced = 0;
  for (size_t k = 1; k < part.owned.size(); ++k)
    if (computing & tile_bit(part.owned[k - 1].tile)) fenced = k;
  return fenced;
}

// The runs of FIFO parts (with their tiles) that go before the ops (kFencedBeforeOps), run k of
// every part before run k + 1 of any, and one fence on the tiles of their last runs: the scalar
// core waits once for all of them.
using FifoParts = std::vector<std::pair<const Part*, uint32_t>>;
void fifo_fenced(Emitter& e, const FifoParts& parts, uint32_t computing) {
  uint32_t last = 0;
  for (size_t k = 0;; ++k) {
    bool any = false;
    for (const auto& [part, mask] : parts) {
      const size_t fenced = runs_before_ops(*part, computing);
      if (k >= fenced) continue;
      if (k > 0) fifo_fence(e, *part, k);
      fifo_run(e, *part, k, mask);
      if (k + 1 == fenced) last |= tile_bit(part->owned[k].tile);
      any = true;
    }
    if (!any) break;
  }
  if (last != 0) fence_on(e, last);
}

void fifo_broadcast(Emitter& e, const Part& part, uint32_t mask, uint32_t computing,
                    FifoSend when) {
  const size_t fenced = runs_before_ops(part, computing);
  if (when == FifoSend::kFencedBeforeOps) fifo_fenced(e, {{&part, mask}}, computing);
  if (when == FifoSend::kFirstBeforeOps && fenced == 0) fifo_run(e, part, 0, mask);
  if (when == FifoSend::kAfterOps)
    for (size_t k = fenced > 0 ? fenced : 1; k < part.owned.size(); ++k) {
      if (k != fenced) fifo_fence(e, part, k);
      fifo_run(e, part, k, mask);
    }
}

// Halo rows first (docs/compiler.md "Halo rows first"): where a stage's last layer writes its
// bands in place into the next stage's first image (Stage::halo_in), each tile computes the rows
// other tiles read ahead of the rest (a band's first and last, 3 rows or more) as an op of its
// own, and the rest after a fence: the hand-over's narrowToWides wait only for the first op, so
// the halo rows cross the ring while the rest computes. Per tile of stages[si]: its two ops'
// rows (`rest.count` 0: the band in one op); empty where the layer i does not take the form.
struct HaloFirst {
  RowPick first, rest;
};
std::vector<HaloFirst> halo_first(const ConvChain& chain, const std::vector<Stage>& stages,
                                  size_t si, size_t i) {
  std::vector<HaloFirst> picks;
  if (si + 1 >= stages.size()) return picks;
  const Stage& s = stages[si];
  const Stage& to = stages[si + 1];
  const ConvLayer& l = chain.layers[i];
  // (Nothing may come between the rest and the hand-over: the next stage fills no image before
  // it (not over the input, the stage after it not written in place early; its second image
  // filled before the first op instead, below) and no later stage keeps its image for an ADD.)
  if (i + 1 != s.end || !to.halo_in || to.over_input) return picks;
  if (s.tiles.front().rounds > 1 || to.tiles.front().rounds > 1) return picks;
  if (si + 2 < stages.size() && stages[si + 2].halo_in && !stages[si + 2].fill_late) return picks;
  if (l.depthwise || l.residual() || !l.heads.empty() || joined(l)) return picks;
  for (const ConvLayer& later : chain.layers)
    if (later.residual_of == static_cast<int>(to.first)) return picks;
  // A next stage of several layers has its second image filled while layer i runs: only where
  // that image lies off layer i's input, its output and the next stage's first image.
  auto apart = [](int a, int n, int b, int m) { return a + n <= b || b + m <= a; };
  for (const Plan& t : to.tiles) {
    if (to.end == to.first + 1 || !t.layers[to.first + 1].needs_fill()) continue;
    const auto p = std::find_if(s.tiles.begin(), s.tiles.end(),
                                [&](const Plan& q) { return q.tile == t.tile; });
    if (p == s.tiles.end()) return picks;
    const LayerPlan& second = t.layers[to.first + 1];
    const LayerPlan& in = p->layers[i];
    const LayerPlan& into = t.layers[to.first];
    const int at = second.in_base, n = second.in_bytes();
    if (!apart(at, n, in.in_base, in.in_bytes()) || !apart(at, n, into.in_base, into.in_bytes()) ||
        !apart(at, n, p->out_base, p->out_bytes))
      return picks;
  }
  bool rest = false;
  for (const Plan& p : s.tiles) {
    if (p.pixel_band() || p.into_base < 0) return {};
    const LayerPlan& lp = p.layers[i];
    const int n = lp.ob - lp.oa;
    // (The rows others read are the band's first or last or both.)
    bool edges = n >= 3 && (row_readers(p, to, lp.oa) != 0 || row_readers(p, to, lp.ob - 1) != 0);
    for (int y = lp.oa + 1; edges && y + 1 < lp.ob; ++y) edges = row_readers(p, to, y) == 0;
    if (edges)
      picks.push_back({{lp.oa, n - 1, 2}, {lp.oa + 1, 1, n - 2}});
    else
      picks.push_back({{lp.oa, 1, n}, {lp.oa, 1, 0}});
    rest = rest || edges;
  }
  if (!rest) picks.clear();
  return picks;
}

// The swap under the depthwise (docs/compiler.md "The swap under the depthwise"): where a stage's
// last layer is a depthwise one whose bands go to the next stage over the ring (not in place), each
// tile of the tallest bands (2 rows or more) computes its band but its last rows as one op and
// those rows as a second: the hand-over of the first op's rows runs while the second computes,
// then that of the last rows. Shorter bands (PoseNet's 2-row bands among 3-row ones) end as early
// in one op, so all their rows go in the first hand-over. The next stage's fills of its own images
// and the first hand-over's writes come before the second op, so on every tile they must lie off
// the layer's input image and output rows. The first op's rows per tile of stages[si]; empty
// where layer i does not take the form.
std::vector<RowRange> swap_split(const ConvChain& chain, const std::vector<Stage>& stages,
                                 size_t si, size_t i) {
  std::vector<RowRange> rows;
  if (si + 1 >= stages.size()) return rows;
  const Stage& s = stages[si];
  const Stage& to = stages[si + 1];
  const ConvLayer& l = chain.layers[i];
  if (i + 1 != s.end || !l.depthwise || to.halo_in) return rows;
  if (s.tiles.front().rounds > 1 || to.tiles.front().rounds > 1) return rows;
  for (const ConvLayer& later : chain.layers)
    if (later.residual_of == static_cast<int>(to.first)) return rows;
  // (The images the next stage's fills may write: its first two. The stage after it, written in
  // place, has its image filled after the hand-over.)
  struct Region {
    int tile, first, end;
  };
  std::vector<Region> written;
  auto image = [&](const Stage& st, size_t k) {
    for (const Plan& t : st.tiles) {
      const LayerPlan& lp = t.layers[k];
      written.push_back({t.tile, lp.in_base, lp.in_base + lp.in_bytes()});
    }
  };
  for (size_t k = to.first; k < std::min(to.first + 2, to.end); ++k) image(to, k);
  int tallest = 0;
  for (const Plan& p : s.tiles) tallest = std::max(tallest, p.layers[i].ob - p.layers[i].oa);
  if (tallest < 2) return rows;
  // (Bytes of every band and of a row of the tallest bands; cycles of a row of the op, taps x
  // positions x channel words / 4: the clock's 16 MACs a step.)
  int64_t band_bytes = 0, tall_rows = 0, row_cycles = 0;
  for (const Plan& p : s.tiles) {
    const LayerPlan& lp = p.layers[i];
    if (p.pixel_band() || p.into_base >= 0 || surplus_pixels(lp) > 0) return rows;
    const OutTarget t = out_target(p, i);
    const Region used[] = {{p.tile, lp.in_base, lp.in_base + lp.in_bytes()},
                           {p.tile, t.base, t.base + (lp.ob - lp.oa) * t.row_words * 4}};
    for (const Region& w : written)
      for (const Region& u : used)
        if (w.tile == u.tile && w.first < u.end && u.first < w.end) return rows;
    band_bytes += int64_t{lp.ob - lp.oa} * p.out_row;
    if (lp.ob - lp.oa == tallest) tall_rows += p.out_row;
    row_cycles = std::max(row_cycles, int64_t{lp.blocks} * l.kh * l.kw * (lp.cin / 4) / 4);
  }
  // The second op's rows: those that hide the most ring cycles, the fewer of the first
  // hand-over's at 64 bytes a cycle and the second op's. Only where that pays for the words the
  // form adds, some 100 to 130 (1.6 to 2 KB of USB transfer, about 1.5 k cycles): PoseNet's
  // 23 x 31 pairs hide 3.0 k cycles under their last row (of 3), DeepLab's last three depthwise
  // layers 2.4 to 6.7 k under their last 2, 3 and 6 rows; v1 0.5's 80 x 80 layer 3 (40 KB to
  // send) ran slower with it, and DeepLab's with only the last row in the second op.
  int last = 0;
  int64_t hidden = 0;
  for (int k = 1; k < tallest; ++k) {
    const int64_t h = std::min((band_bytes - k * tall_rows) / 64, k * row_cycles);
    if (h > hidden) hidden = h, last = k;
  }
  if (hidden < 1500) return rows;
  for (const Plan& p : s.tiles) {
    const LayerPlan& lp = p.layers[i];
    rows.push_back({lp.oa, lp.ob - lp.oa == tallest ? lp.ob - last : lp.ob});
  }
  return rows;
}

// The execution program into `e`; `loads` receives the segments it streams and how many of their
// first rows, in order (its parameters). `head`: a generator follows in the same program, so the
// last layer's bytes go to the host's scratch buffer and the program does not end here.
// `pricing`: the placement search prices the layout (hand_over's forms for it). `final_forms`:
// halo_first's and swap_split's two ops a band where they apply.
void emit_program(Emitter& e, const ConvChain& chain, const Shapes& shapes,
                  const std::vector<Stage>& stages, std::vector<std::pair<int, int>>& loads,
                  bool head, bool pricing, bool final_forms) {
  preamble(e, chain.input_name);
  auto stage_of = [&](size_t i) -> const Stage& {
    for (const Stage& s : stages)
      if (i >= s.first && i < s.end) return s;
    return stages.back();
  };
  // Padded images hold their zero point wherever the layer before does not write: a stage's first
  // two before its input arrives, image i + 1 once layer i - 1 has read the region it reuses.
  auto fill_image = [&](const Stage& s, size_t i) {
    TileBatch fills(e);
    for (const Plan& p : s.tiles) {
      const LayerPlan& lp = p.layers[i];
      if (lp.needs_fill()) fill_narrow(fills, p.tile, lp.in_base, lp.in_bytes(), lp.l->in_zp);
    }
  };
  // The end of a part (a layer or its parts, a stage's hand-over): every tile drains its units
  // and resets counters 0-16, then sends the scalar core its token; the scalar core waits for all
  // of them. A fence just before it that does the same without the token (a hand-over's last, a
  // pool's) adds nothing: dropped.
  uint32_t parts_end = 0;  // the word after the last part's end
  auto end_part = [&] {
    e.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff");
    tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
    wait_tokens(e);
    parts_end = e.words();
  };
  // The fence after fills of images, none where they emitted nothing since a part's end (the
  // tiles are drained and their counters reset already).
  auto fence_fills = [&] {
    if (e.words() != parts_end) tile_fence(e, "counters=0x1ffff units=0x3ff");
  };
  // (A stage written in place (Stage::halo_in) has its first image filled with the stage before's,
  // which then writes its rows there.)
  // (A stage after halo rows first has its second image filled already: halo_first.)
  size_t filled_early = stages.size();
  // (`next`: also the image of the stage after it written in place; swap_split's fills leave it
  // until after the hand-over.)
  auto fill_stage = [&](size_t si, bool next = true) {
    const Stage& s = stages[si];
    // (A stage in rounds fills its other images round by round.)
    const size_t images = s.tiles.front().rounds > 1 ? 1 : 2;
    const size_t skip = (s.halo_in ? 1 : 0) + (si == filled_early ? 1 : 0);
    for (size_t i = s.first + skip; i < std::min(s.first + images, s.end); ++i) fill_image(s, i);
    // (An image over the stage before's first image: the rows that stage did not write hold that
    // image's rows; they are padding rows, or halo rows the hand-over writes but their padding.)
    if (s.over_input) {
      TileBatch fills(e);
      for (size_t t = 0; t < s.tiles.size(); ++t) {
        const LayerPlan& lp = s.tiles[t].layers[s.first];
        const LayerPlan& written = stages[si - 1].tiles[t].layers[s.first - 1];
        const int pitch = lp.wp * lp.cin;
        if (written.oa > lp.top)
          fill_narrow(fills, s.tiles[t].tile, lp.in_base, (written.oa - lp.top) * pitch,
                      lp.l->in_zp);
        if (written.ob < lp.top + lp.hp)
          fill_narrow(fills, s.tiles[t].tile, lp.in_base + (written.ob - lp.top) * pitch,
                      (lp.top + lp.hp - written.ob) * pitch, lp.l->in_zp);
      }
    }
    if (next && si + 1 < stages.size() && stages[si + 1].halo_in && !stages[si + 1].fill_late)
      fill_image(stages[si + 1], stages[si + 1].first);
    fence_fills();
  };
  const std::optional<Staging> staging =
      chain.repack_w > 0 ? staging_of(chain, stages.front().tiles) : std::nullopt;
  if (staging) {
    // The first image's zero point also where the host's padded columns were (a layer without
    // padding of its own may read them: gen2021 PoseNet's folded PAD); the second image after
    // the repack (the staging may lie over it).
    {
      TileBatch fills(e);
      for (const Plan& p : stages.front().tiles) {
        const LayerPlan& lp = p.layers[stages.front().first];
        fill_narrow(fills, p.tile, lp.in_base, lp.in_bytes(), lp.l->in_zp);
      }
    }
    tile_fence(e, "counters=0x1ffff units=0x3ff");
    stream_staged(e, stages.front().tiles, *staging);
  } else {
    fill_stage(0);
    stream_input(e, stages.front().tiles);
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  if (staging) {
    repack_input(e, stages.front().tiles, *staging);
    const Stage& s = stages.front();
    if (s.tiles.front().rounds == 1 && s.first + 1 < s.end) {
      fill_image(s, s.first + 1);
      tile_fence(e, "counters=0x1ffff units=0x3ff");
    }
  }
  int64_t streamed = 0;  // bytes of the execution program's own parameters loaded so far
  // The segment each group has in wide memory (the caching program put the first of each), and
  // how many of the first segment's rows the others have overwritten since (all load at row 0).
  // (Indexed by group: a stage without parameters, a residual ADD's of its own, has a group
  // number but no segment.)
  size_t groups = 0;
  for (const Segment& seg : shapes.segments)
    groups = std::max(groups, static_cast<size_t>(seg.group) + 1);
  std::vector<int> resident(groups, -1), dirty(groups, 0);
  for (size_t k = 0; k < shapes.segments.size(); ++k)
    if (shapes.segments[k].first_of_group)
      resident[static_cast<size_t>(shapes.segments[k].group)] = static_cast<int>(k);
  auto load = [&](int segment, int rows) {
    const Segment& seg = shapes.segments[static_cast<size_t>(segment)];
    if (seg.owner >= 0) {
      broadcast_parameters(e, seg, rows);
    } else {
      load_parameters(e, rows, seg.mask, streamed, seg.base_row);
      streamed += int64_t{rows} * kRowBytes;
      loads.push_back({segment, rows});
    }
    const auto group = static_cast<size_t>(seg.group);
    resident[group] = segment;
    dirty[group] = seg.first_of_group ? 0 : std::max(dirty[group], rows);
    tile_fence(e, "b43=1 units=0x3ff signal=1 f109=3");
    wait_tokens(e);
  };
  int ordinal = 0;  // ring producers so far
  int outfed = 0;   // scalar-memory words outfed so far (dense depthwise layers)
  // A pool's (shared rows') groups in turn, the multipliers of each 64-channel group (the op
  // reads them from the start of the store), then its op on every tile of `runs` (each tile's
  // k-th group of its part; the same instruction where their addresses agree), the shared rows
  // for all of them. The parts have one group count and their rows at one place.
  auto pool_groups = [&](const LayerPlan& lp, size_t i,
                         const std::vector<std::pair<const Plan*, const Part*>>& runs,
                         uint32_t mask) {
    const Part& one = *runs.front().second;
    for (int k = 0; k < one.g1 - one.g0; ++k) {
      bias_load(e, lp, one.row + k * lp.planes, 1, mask);
      {
        TileBatch ops(e);
        for (const auto& [p, part] : runs)
          depthwise_op(ops, *p, i, *part, part->g0 + k, part->g0 + k + 1);
      }
      if (k + 1 < one.g1 - one.g0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    }
  };
  // The swap under the depthwise (swap_split), after the first op of layer i (the first `swap`
  // rows of each band) on the tiles of stages[si]: the dense parts' taps round again and their
  // consumers, the end of the first op (the scalar core waits for every tile: all taps have
  // arrived before any hand-over packet can), the next stage's fills, the second op (the rest
  // of each band) and at once the hand-over of the first op's rows, which crosses the ring while
  // the second op computes. The hand-over into the next stage then sends the rest (swap_into).
  size_t swap_into = stages.size();
  std::vector<RowRange> swap_rest;
  auto emit_swap = [&](size_t si, size_t i, const std::vector<RowRange>& swap,
                       const std::vector<RoundTrip>& trips) {
    const Stage& stage = stages[si];
    const LayerPlan& lp = shapes.layers[i];
    for (const RoundTrip& trip : trips) depthwise_round_trip(e, trip, outfed);
    {
      TileBatch consumers(e);
      for (const RoundTrip& trip : trips)
        consumers.add(trip.mask, "ringcons0", depthwise_fifo_consumer(trip.taps, trip.words));
    }
    end_part();
    fill_stage(si + 1, false);
    swap_rest.clear();
    {
      TileBatch ops(e);
      for (size_t t = 0; t < stage.tiles.size(); ++t) {
        const Plan& p = stage.tiles[t];
        const RowRange rest{swap[t].end, p.layers[i].ob};
        swap_rest.push_back(rest);
        if (rest.first >= rest.end) continue;
        for (const Part& part : lp.parts)
          if (p.g1 == 0 || (part.g0 >= p.g0 && part.g1 <= p.g1))
            depthwise_op(ops, p, i, part, part.g0, part.g1, rest);
      }
    }
    hand_over(e, stage, stages[si + 1], ordinal, pricing, swap);
    swap_into = si + 1;
  };
  // The stages in order, each in its rounds (Plan::rounds; one otherwise): the hand-over into a
  // stage comes before its first round, each round fills its own images.
  std::vector<std::pair<size_t, int>> work;
  std::vector<std::vector<Stage>> rounds(stages.size());
  for (size_t si = 0; si < stages.size(); ++si) {
    const int n = stages[si].tiles.front().rounds;
    for (int k = 0; k < n; ++k) {
      if (n > 1) {
        Stage r = stages[si];
        for (Plan& t : r.tiles) t = round_plan(chain, shapes, t, k);
        rounds[si].push_back(std::move(r));
      }
      work.push_back({si, k});
    }
  }
  for (const auto& [si, round] : work) {
    const Stage& stage = rounds[si].empty() ? stages[si] : rounds[si][static_cast<size_t>(round)];
    if (si > 0 && round == 0) {
      // (After the swap under the depthwise: filled, and the rest of the bands to send.)
      if (swap_into != si) fill_stage(si);
      hand_over(e, stages[si - 1], stages[si], ordinal, pricing,
                swap_into == si ? swap_rest : std::vector<RowRange>{});
      // The same image to the tiles of a later stage whose residual ADD reads it (keep_operands:
      // they keep it where no stage in between writes).
      for (size_t i = stage.end; i < chain.layers.size(); ++i)
        if (chain.layers[i].residual_of == static_cast<int>(stage.first)) {
          Stage kept = stage_of(i);
          kept.first = stage.first;
          kept.end = stage.first + 1;
          hand_over(e, stages[si - 1], kept, ordinal, pricing);
        }
      end_part();
      // (The next stage's image written in place over the output just handed over, or left by
      // the swap under the depthwise.)
      if (si + 1 < stages.size() && stages[si + 1].halo_in &&
          (stages[si + 1].fill_late || swap_into == si)) {
        fill_image(stages[si + 1], stages[si + 1].first);
        fence_fills();
      }
      if (surplus_pixels(shapes.layers[stage.first - 1]) > 0) {
        {
          TileBatch fills(e);
          for (const Plan& p : stages[si].tiles) hand_over_surplus_fill(fills, p);
        }
        tile_fence(e, "counters=0x1ffff units=0x3ff");
      }
    }
    if (!rounds[si].empty()) {
      fill_image(stage, stage.first + 1);
      fence_fills();
    }
    for (size_t i = stage.first; i < stage.end; ++i) {
      const LayerPlan& lp = shapes.layers[i];
      if (i >= stage.first + 1 && i + 1 < stage.end) {
        fill_image(stage, i + 1);
        fence_fills();
      }
      if (lp.l->residual()) {
        // Tiles whose scratch words sit at one address build the weight rows together (not only
        // neighbours: bands of two heights alternate between two addresses).
        std::vector<std::pair<int, uint32_t>> scratch;
        for (const Plan& p : stage.tiles) {
          auto at = std::find_if(scratch.begin(), scratch.end(),
                                 [&](const auto& s) { return s.first == p.add_scratch; });
          if (at == scratch.end())
            at = scratch.insert(scratch.end(), std::pair<int, uint32_t>{p.add_scratch, 0});
          at->second |= tile_bit(p.tile);
        }
        // (Rows cached once, cache_add_rows, where the stage's tiles had room.)
        if (lp.add_row < 0)
          for (const auto& [at, mask] : scratch)
            emit_add_rows(e, mask, at, kAddRows, lp.l->add_w1, lp.l->add_w2, AddRowFills::kPaired);
        const int rows = lp.add_row < 0 ? kAddRows : lp.add_row * kRowUnits;
        // (Tiles whose ADDs read and write the same addresses run one instruction.)
        std::vector<std::pair<AddOp, uint32_t>> adds;
        for (const Plan& p : stage.tiles) {
          AddOp op = residual_op(p, i, rows);
          auto at = std::find_if(adds.begin(), adds.end(),
                                 [&](const auto& a) { return same_add(a.first, op); });
          if (at == adds.end())
            at = adds.insert(adds.end(), std::pair<AddOp, uint32_t>{std::move(op), 0u});
          at->second |= tile_bit(p.tile);
        }
        const ConvLayer& l = *lp.l;
        for (const auto& [op, mask] : adds)
          emit_add_op(e, mask, op, l.mult.at(0), l.clamp_min, l.clamp_max, l.add_offset, l.out_zp);
        end_part();
        continue;
      }
      // A pool (shared rows) split by output groups, one resident part per tile, every part at
      // the same rows: group k of every tile at once, its bias load and op the same instruction
      // on each (the tiles keep only their own channels, at the same addresses), rather than
      // each tile's groups in turn.
      if (lp.l->depthwise && lp.shared_rows && stage.tiles.front().g1 > 0 &&
          lp.parts.size() == stage.tiles.size()) {
        std::vector<const Part*> part_of;
        for (const Plan& p : stage.tiles)
          for (const Part& part : lp.parts)
            if (part.g0 == p.g0 && part.g1 == p.g1) part_of.push_back(&part);
        const Part& one = lp.parts.front();
        bool together = part_of.size() == stage.tiles.size();
        for (const Part& part : lp.parts) {
          const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
          together = together && seg.first_of_group &&
                     resident[static_cast<size_t>(seg.group)] == part.segment &&
                     part.row == one.row && part.g1 - part.g0 == one.g1 - one.g0;
        }
        if (together) {
          std::vector<std::pair<const Plan*, const Part*>> runs;
          for (size_t t = 0; t < stage.tiles.size(); ++t)
            runs.push_back({&stage.tiles[t], part_of[t]});
          pool_groups(lp, i, runs, tile_mask(stage.tiles));
          end_part();
          continue;
        }
      }
      // The tiles of a layer split by output groups run their parts at once (one part each, all
      // resident): one fence after the last.
      // (Not when some part is streamed: its rows take turns with the part before on its tile.)
      // FIFO parts too: their first runs, the parts' consumers and ops with the others', then
      // their other runs (a fence per part had run the parts one after the other).
      bool at_once = stage.tiles.front().g1 > 0 && !(lp.l->depthwise && lp.shared_rows);
      for (const Part& part : lp.parts)
        at_once = at_once && shapes.segments[static_cast<size_t>(part.segment)].first_of_group;
      // Their parts that differ only in the tile (the same rows and addresses on each) go out as
      // one bias load and one op on all of them.
      std::optional<TileBatch> parts_at_once;
      FifoParts broadcasts;  // (FIFO parts at once)
      auto flush_at_once = [&] {
        uint32_t computing = 0;
        for (const auto& [part, mask] : broadcasts) computing |= mask;
        fifo_fenced(e, broadcasts, computing);
        for (const auto& [part, mask] : broadcasts)
          fifo_broadcast(e, *part, mask, computing, FifoSend::kFirstBeforeOps);
        parts_at_once.reset();
        for (const auto& [part, mask] : broadcasts)
          fifo_broadcast(e, *part, mask, computing, FifoSend::kAfterOps);
        broadcasts.clear();
      };
      if (at_once) parts_at_once.emplace(e);
      // Halo rows first where each tile computes one part, resident or through a FIFO of one run
      // (its bias store and window serve both ops).
      std::vector<HaloFirst> picks;
      auto computes = [](const Plan& p, const Part& part) {
        return p.g1 == 0 || (part.g0 >= p.g0 && part.g1 <= p.g1);
      };
      if (final_forms && (at_once || lp.parts.size() == 1)) {
        bool fits = true;
        for (const Part& part : lp.parts) {
          const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
          fits = fits && resident[static_cast<size_t>(seg.group)] == part.segment &&
                 part.owned.size() <= 1;
        }
        for (const Plan& p : stage.tiles)
          fits = fits && std::count_if(lp.parts.begin(), lp.parts.end(),
                                       [&](const Part& part) { return computes(p, part); }) <= 1;
        if (fits) picks = halo_first(chain, stages, si, i);
      }
      // (Into a stage of several layers: its second image filled now, off this layer's images;
      // the fence after the first op orders the fills before anything else there.)
      if (!picks.empty() && stages[si + 1].end > stages[si + 1].first + 1) {
        fill_image(stages[si + 1], stages[si + 1].first + 1);
        filled_early = si + 1;
      }
      auto first_rows = [&](const Plan* p) {
        return picks.empty() ? RowPick{} : picks[static_cast<size_t>(p - stage.tiles.data())].first;
      };
      // The swap under the depthwise, where each tile computes one part, resident (its bias
      // store serves both ops; a dense part's taps go round again for the second).
      std::vector<RowRange> swap;
      if (final_forms && lp.l->depthwise && !lp.shared_rows && (at_once || lp.parts.size() == 1)) {
        bool fits = true;
        for (const Part& part : lp.parts) {
          const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
          fits = fits && resident[static_cast<size_t>(seg.group)] == part.segment &&
                 part.owned.empty();
        }
        for (const Plan& p : stage.tiles)
          fits = fits && std::count_if(lp.parts.begin(), lp.parts.end(),
                                       [&](const Part& part) { return computes(p, part); }) <= 1;
        if (fits) swap = swap_split(chain, stages, si, i);
      }
      auto swap_rows = [&](const Plan* p) {
        return swap.empty() ? RowRange{} : swap[static_cast<size_t>(p - stage.tiles.data())];
      };
      std::vector<RoundTrip> trips;  // (the swap's dense parts)
      for (const Part& part : lp.parts) {
        // The part's segment once the layers before have run.
        const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
        if (resident[static_cast<size_t>(seg.group)] != part.segment) {
          if (parts_at_once) {  // (the parts before run on the rows this load replaces)
            flush_at_once();
            parts_at_once.emplace(e);
          }
          load(part.segment, seg.rows);
        }
        // The tiles that compute the part: all of the stage's, or the one that holds its groups
        // (a layer split by output groups).
        std::vector<const Plan*> runs;
        uint32_t mask = 0;
        for (const Plan& p : stage.tiles)
          if (p.g1 == 0 || (part.g0 >= p.g0 && part.g1 <= p.g1)) {
            runs.push_back(&p);
            mask |= tile_bit(p.tile);
          }
        // A dense depthwise part: its taps through scalar memory into its tiles' FIFO rows.
        const int taps = lp.l->kh * lp.l->kw;
        const RoundTrip trip{runs.front()->tile, lp.weight_row(part), mask, taps,
                             lp.dense() ? depthwise_words(lp, part.g0, part.g1) : 0};
        if (trip.words > 0) depthwise_round_trip(e, trip, outfed);
        if (trip.words > 0 && !swap.empty()) trips.push_back(trip);
        if (lp.l->depthwise && lp.shared_rows) {
          std::vector<std::pair<const Plan*, const Part*>> pooling;
          for (const Plan* p : runs) pooling.push_back({p, &part});
          pool_groups(lp, i, pooling, mask);
        } else {
          // One op per fan-out head with channels in the part (heads sharing a group: each
          // with its bias load, the head of the highest columns first), else one.
          std::vector<const ConvLayer::Head*> heads = {nullptr};
          if (!lp.l->heads.empty()) heads = lp.l->heads_in(part.g0, part.g1);
          for (const ConvLayer::Head* head : heads) {
            if (at_once) {
              TileBatch& batch = *parts_at_once;
              batch.begin_sequence();
              batch.add(mask, "w2n", bias_load_fields(lp, part.row, part.g1 - part.g0));
              if (trip.words > 0)
                batch.add(mask, "ringcons0", depthwise_fifo_consumer(taps, trip.words));
              if (!part.owned.empty()) batch.add(mask, "ringcons1", fifo_consumer(lp, part));
              for (const Plan* p : runs)
                if (lp.l->depthwise)
                  depthwise_op(batch, *p, i, part, part.g0, part.g1, swap_rows(p));
                else
                  layer_op(batch, *p, i, part, head, first_rows(p));
              batch.end_sequence();
              if (!part.owned.empty()) broadcasts.push_back({&part, mask});
              continue;
            }
            if (!part.owned.empty())
              for (const FifoSend when : {FifoSend::kFencedBeforeOps, FifoSend::kFirstBeforeOps})
                fifo_broadcast(e, part, mask, mask, when);
            bias_load(e, lp, part.row, part.g1 - part.g0, mask);
            if (trip.words > 0)
              e.add("ringcons0",
                    cat("tiles=", hex(mask), " ", depthwise_fifo_consumer(taps, trip.words)));
            if (!part.owned.empty())
              e.add("ringcons1", cat("tiles=", hex(mask), " ", fifo_consumer(lp, part)));
            {
              TileBatch ops(e);
              for (const Plan* p : runs)
                if (lp.l->depthwise)
                  depthwise_op(ops, *p, i, part, part.g0, part.g1, swap_rows(p));
                else
                  layer_op(ops, *p, i, part, head, first_rows(p));
            }
            if (!part.owned.empty()) fifo_broadcast(e, part, mask, mask, FifoSend::kAfterOps);
          }
        }
        if (at_once && &part != &lp.parts.back()) continue;
        flush_at_once();  // (emits the parts before their fence)
        if (!swap.empty()) {
          emit_swap(si, i, swap, trips);
          continue;
        }
        if (picks.empty()) {
          end_part();
          continue;
        }
        // The rest of the bands after a fence, on the tiles that have rows left: the FIFO's run
        // again to them alone. The hand-over follows at once (halo_first: no fills between), and
        // its end drains the tiles.
        tile_fence(e, "counters=0x1ffff units=0x3ff");
        std::vector<std::pair<const Part*, uint32_t>> rest;
        for (const Part& q : lp.parts) {
          uint32_t m = 0;
          for (size_t t = 0; t < stage.tiles.size(); ++t)
            if (computes(stage.tiles[t], q) && picks[t].rest.count > 0)
              m |= tile_bit(stage.tiles[t].tile);
          if (m != 0) rest.push_back({&q, m});
        }
        for (const auto& [q, m] : rest)
          if (!q->owned.empty()) fifo_run(e, *q, 0, m);
        {
          TileBatch ops(e);
          for (const auto& [q, m] : rest) {
            ops.begin_sequence();
            if (!q->owned.empty()) ops.add(m, "ringcons1", fifo_consumer(lp, *q));
            for (size_t t = 0; t < stage.tiles.size(); ++t)
              if (m & tile_bit(stage.tiles[t].tile))
                layer_op(ops, stage.tiles[t], i, *q, nullptr, picks[t].rest);
            ops.end_sequence();
          }
        }
        parts_end = e.words();  // (no fence for fills: none come before the hand-over)
      }
      if (joined(*lp.l)) {
        emit_joins(e, stage, i);
        end_part();
      }
      if (surplus_pixels(lp) > 0 && i + 1 < stage.end) {
        {
          TileBatch fills(e);
          for (const Plan& p : stage.tiles) surplus_fill(fills, p, i);
        }
        tile_fence(e, "counters=0x1ffff units=0x3ff");
      }
    }
  }
  // Each group's first segment back where the caching program put it, for the next inference:
  // the rows the others overwrote.
  for (size_t k = 0; k < shapes.segments.size(); ++k) {
    const auto group = static_cast<size_t>(shapes.segments[k].group);
    if (shapes.segments[k].first_of_group && resident[group] != static_cast<int>(k))
      load(static_cast<int>(k), std::min(dirty[group], shapes.segments[k].rows));
  }
  if (chain.layers.back().heads.empty())
    stream_output(e, stages.back().tiles, chain.output_name, ordinal,
                  head ? BufferKind::kScratch : BufferKind::kOutput);
  else
    stream_head_outputs(e, stages.back().tiles, chain.layers.back(), ordinal);
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  if (head) return;
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
}

// How the program keeps its stages' whole first images (slide_full_images, align_full_images):
// as planned (the search prices its layouts so), or, in the final program, sets of receivers slid
// onto each other and every tile of a stage aligned where the words it changes are then fewer.
enum class Slides { kAsPlanned, kSlid };

void apply_slides(Stage& s, const std::vector<int>& slides) {
  for (size_t k = 0; k < slides.size(); ++k) s.tiles[k].layers[s.first].slide = slides[k];
}

// `planned` with its slides, or nothing where no image slides.
std::optional<std::vector<Stage>> slid_stages(const std::vector<Stage>& planned, Slides slides) {
  std::optional<std::vector<Stage>> stages;
  if (slides == Slides::kAsPlanned) return stages;
  // A stage after a partial last block keeps its image where planned: the hand-over's surplus
  // fill (hand_over_surplus_fill) walks every row of the region as planned.
  auto fills_surplus = [&](size_t si) {
    const Stage& stage = planned[si];
    return stage.first > 0 &&
           std::any_of(stage.tiles.begin(), stage.tiles.end(), [&](const Plan& t) {
             return surplus_pixels(t.layers[stage.first - 1]) > 0;
           });
  };
  for (size_t si = 1; si < planned.size(); ++si) {
    if (fills_surplus(si)) continue;
    const std::vector<int> by_set = slide_full_images(planned[si - 1], planned[si]);
    if (by_set.empty()) continue;
    if (!stages) stages = planned;
    apply_slides((*stages)[si], by_set);
  }
  // What aligning changes: the hand-over into the stage and its first layer's ops (one per
  // distinct first read row, band and groups); counted alone, not the whole program again.
  auto words = [&](const Stage& from, const Stage& to) {
    Emitter count = Emitter::counting();
    int ordinal = 0;
    hand_over(count, from, to, ordinal, false);
    const uint32_t hand_over_words = count.words();
    std::set<std::tuple<int, int, int, int>> ops;
    for (const Plan& t : to.tiles) {
      const LayerPlan& lp = t.layers[to.first];
      ops.insert({lp.op_in(0), lp.ob - lp.oa, t.g0, t.g1});
    }
    count.add("op");
    return count.words() +
           static_cast<uint32_t>(ops.size() - 1) * (count.words() - hand_over_words);
  };
  for (size_t si = 1; si < planned.size(); ++si) {
    if (fills_surplus(si)) continue;
    // (Nothing to gain where the tiles' first read rows already sit at one place.)
    const std::vector<Plan>& tiles = (stages ? *stages : planned)[si].tiles;
    if (std::all_of(tiles.begin(), tiles.end(), [&](const Plan& t) {
          return t.layers[t.first].op_in(0) == tiles.front().layers[t.first].op_in(0);
        }))
      continue;
    const std::vector<int> aligned = align_full_images(planned[si - 1], planned[si]);
    if (aligned.empty()) continue;
    if (!stages) stages = planned;
    Stage trial = planned[si];
    apply_slides(trial, aligned);
    if (words((*stages)[si - 1], trial) < words((*stages)[si - 1], (*stages)[si]))
      (*stages)[si] = std::move(trial);
  }
  return stages;
}

// (`final_forms`: halo_first's and swap_split's ops, in the final program only: the search's counts
// keep the forms its layouts were tuned with.)
void emit_execution(Emitter& e, const ConvChain& chain, const Shapes& shapes,
                    const std::vector<Stage>& planned, std::vector<std::pair<int, int>>& loads,
                    bool head, bool pricing, Slides slides, bool final_forms) {
  const std::optional<std::vector<Stage>> slid = slid_stages(planned, slides);
  emit_program(e, chain, shapes, slid ? *slid : planned, loads, head, pricing, final_forms);
}

container::Bitstream execution_program(const ConvChain& chain, const Shapes& shapes,
                                       const std::vector<Stage>& stages,
                                       std::vector<std::pair<int, int>>& loads) {
  Emitter e;
  emit_execution(e, chain, shapes, stages, loads, false, false, Slides::kSlid, true);
  return e.finish();
}

// A layout's execution program as the search counts it (the stages as planned; `pricing`:
// hand_over's forms for the placement search) into `e`; returns the parameter loads.
std::vector<std::pair<int, int>> count_execution(Emitter& e, const ConvChain& chain,
                                                 const Layout& layout, bool pricing) {
  std::vector<std::pair<int, int>> loads;
  emit_execution(e, chain, layout.shapes, layout.stages, loads, false, pricing, Slides::kAsPlanned,
                 false);
  return loads;
}

// Bytes one inference of a layout sends besides its input and output: its instructions and the
// parameter rows it streams (counted, not encoded: the search prices many layouts).
double program_bytes(const ConvChain& chain, const Layout& layout, bool pricing) {
  Emitter program = Emitter::counting();
  const std::vector<std::pair<int, int>> loads = count_execution(program, chain, layout, pricing);
  double bytes = double(program.finished_bytes());
  for (const auto& [segment, rows] : loads) bytes += double(rows) * kRowBytes;
  return bytes;
}

Layout layout_of(const ConvChain& chain) {
  return make_layout(
      chain, [&](const Layout& layout) { return program_bytes(chain, layout, true); },
      [&](const Layout& layout) { return program_bytes(chain, layout, false); });
}

// The first segment of every group into its tiles' wide memory, once: the caching program's
// start and loads into `e` (`head`: without its end, a generator's loads follow).
void emit_caching(Emitter& e, const Shapes& shapes, bool head) {
  tile_fence(e, "b43=1 counters=0x7ffff units=0x3ff signal=1");
  e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
  e.reloc_movi(1, BufferKind::kParameter, Half::kLower32);
  e.reloc_movi(0, BufferKind::kParameter, Half::kUpper32);
  int64_t offset = 0;
  for (const CachedLoad& load : cached_loads(shapes)) {
    load_parameters(e, load.rows, load.mask, offset, load.row);
    offset += int64_t{load.rows} * kRowBytes;
    tile_fence(e, "b43=1 units=0x3ff signal=1 f109=3");
    wait_tokens(e);
  }
  if (!head) interrupt(e, 3, 2, 4);
}

container::Bitstream caching_program(const Shapes& shapes) {
  Emitter e;
  emit_caching(e, shapes, false);
  return e.finish();
}

}  // namespace

namespace {

// A residual ADD reads its other operand where layer `residual_of` read its input: that image must
// be in the ADD's stage, hold the ADD's rows on every tile with the ADD's row pitch, and no two
// kept images of one region may be live at once.
std::string residual_shape_unsupported(const ConvChain& chain, size_t i) {
  const ConvLayer& l = chain.layers[i];
  if (l.cin % 4 != 0)
    return cat("an ADD in a chain over ", l.cin, " channels (a multiple of 4 yet)");
  if (i == 0) return "an ADD as a chain's first layer";
  const ConvLayer& x = chain.layers[static_cast<size_t>(l.residual_of)];
  if (x.h != l.h || x.w != l.w || x.cin != l.cin)
    return "an ADD in a chain whose operand's shape differs";
  return "";
}

std::string residual_unsupported(const ConvChain& chain, size_t i, const Layout& layout) {
  const size_t j = static_cast<size_t>(chain.layers[i].residual_of);
  for (const Stage& s : layout.stages) {
    if (i < s.first || i >= s.end) continue;
    for (const Plan& t : s.tiles) {
      if (j < s.first && !t.layers[j].kept)
        return "a residual block split over two stages without its operand kept (no placement "
               "found: the maps may exceed the tiles' narrow memory)";
      const LayerPlan &a = t.layers[i], &xp = t.layers[j];
      if (xp.row_words() != a.row_words() || a.oa < xp.top || a.ob > xp.top + xp.hp)
        return "an ADD in a chain whose operand rows are not all kept on its tile";
    }
  }
  int kept = 0, last_end[2] = {-1, -1};
  for (size_t k = 0; k < chain.layers.size(); ++k) {
    if (!chain.layers[k].residual()) continue;
    const int from = chain.layers[k].residual_of;
    if (from <= last_end[kept % 2]) return "residual ADDs whose spans overlap";
    last_end[kept++ % 2] = static_cast<int>(k);
  }
  return "";
}

}  // namespace

namespace {

// conv_unsupported, keeping the layout it made (when it got that far) for generate_conv.
std::string unsupported(const ConvChain& chain, Layout& layout) {
  if (chain.layers.empty()) return "no CONV_2D layer";
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    const ConvLayer& l = chain.layers[i];
    if (joined(l)) {
      if (i + 1 == chain.layers.size()) return "fan-out heads joined as a chain's last layer";
      if (l.heads.front().cout > kColumns)
        return cat("fan-out heads of ", l.heads.front().cout,
                   " channels joined by MUL/ADD (up to 64 yet)");
      if (block_of(l) > 1 && l.ow % block_of(l) != 0)
        return "joined fan-out heads with a partial last block of pixels (not generated yet)";
      if (chain.layers[i + 1].cin % 4 != 0 && (block_of(l) == 1 || chain.layers[i + 1].depthwise))
        return cat("a layer reading ", chain.layers[i + 1].cin,
                   " channels after joined fan-out heads (a multiple of 4, or a pool, yet)");
    }
    if (l.residual()) {
      if (const std::string why = residual_shape_unsupported(chain, i); !why.empty()) return why;
      continue;
    }
    const int block = block_of(l);
    if (!l.heads.empty() && !joined(l) && block > 1)
      return cat("fan-out heads reading ", l.cin, " channels (a multiple of 4 yet)");
    if (block > 1 && (block * block_cout(l) > kColumns || block * block_cout(l) % 4 != 0))
      return cat("CONV_2D with ", l.cin, " input channels, stride ", l.stride_w, " and ", l.cout,
                 " output channels (", block, " x Cout must be a multiple of 4 up to 64 yet)");
    if (block > 1 && i + 1 < chain.layers.size() && l.ow % block != 0 &&
        chain.layers[i + 1].residual())
      return "a CONV_2D whose partial last block of pixels a residual ADD reads (not generated "
             "yet)";
    // Channels past whole groups of 64: a partial last group (op_tail) of whole words, or, for
    // the last layer, padding to whole groups (the output layout skips it).
    if (l.cout > kColumns && l.cout % kColumns != 0 &&
        (block > 1 || (l.cout % 4 != 0 && (i + 1 < chain.layers.size() || l.depthwise))))
      return cat("a layer with ", l.cout,
                 " output channels (up to 64, or a multiple of 4 past 64, yet)");
    if (i + 1 < chain.layers.size() && l.cout % 4 != 0)
      return "a CONV_2D inside a chain with output channels not a multiple of 4";
    if (l.depthwise && l.cin % 4 != 0)
      return cat("DEPTHWISE_CONV_2D with ", l.cin, " channels (a multiple of 4 yet)");
    if (l.oh <= 0 || l.ow <= 0) return "CONV_2D with an empty output";
  }
  const ConvLayer& first = chain.layers.front();
  if (!input_streamable(first))
    return "a CONV_2D input whose rows cannot be streamed in 8-byte units (not generated yet)";
  layout = layout_of(chain);
  for (size_t i = 0; i < chain.layers.size(); ++i)
    if (chain.layers[i].residual())
      if (const std::string why = residual_unsupported(chain, i, layout); !why.empty()) return why;
  for (const Stage& s : layout.stages)
    for (size_t i = s.first; i < s.end; ++i)
      if (joined(chain.layers[i]) && (s.tiles.front().rounds > 1 || s.tiles.front().g1 > 0))
        return "joined fan-out heads in a stage in rounds or split by groups (placement error)";
  for (const LayerPlan& lp : layout.shapes.layers)
    if (lp.dense() && lp.l->kh * lp.l->kw > kDepthwiseFifoRows)
      return cat("DEPTHWISE_CONV_2D with more than ", kDepthwiseFifoRows, " taps (its FIFO rows)");
  for (const LayerPlan& lp : layout.shapes.layers)
    for (const Part& part : lp.parts)
      if (lp.rows_of(part.g1 - part.g0) * kRowUnits > kWideUnitsLimit)
        return cat("one 64-channel group of a layer needs ", lp.rows_of(1) * kRowBytes,
                   " bytes of wide memory (", kWideUnitsLimit * 64, ")");
  const std::vector<Stage>& stages = layout.stages;
  for (size_t s = 1; s < stages.size(); ++s)
    if (!nests(stages[s - 1], stages[s]))
      return "a split depthwise layer after a stage that is not split likewise (placement error)";
  for (size_t s = 0; s < stages.size(); ++s)
    if (!stage_fits(stages[s], s > 0 ? &stages[s - 1] : nullptr))
      return cat("layer ", stages[s].first, "'s activations need more than the ", kNarrowBytes,
                 " bytes of narrow memory on a tile (split over its output rows and the tiles; ",
                 "channels are not split yet)");
  return "";
}

}  // namespace

std::string conv_unsupported(const ConvChain& chain) {
  Layout layout;
  return unsupported(chain, layout);
}

std::vector<uint8_t> conv_parameters(const ConvChain& chain) {
  return parameters_of(layout_of(chain).shapes);
}

namespace {

// The output layout of the bands of `tiles` as they arrive, in tile order: each band row-major,
// `pixel` bytes a pixel and `row` bytes a row, `bytes(t)` bytes in all (tiles without output
// rows take none). (A layer split by output groups: one pixel, its channels from the tiles in
// order, so only the first slice's tiles name rows.)
template <typename BandBytes>
container::OutputLayout band_layout(const std::vector<Plan>& tiles, int ow, int pixel, int row,
                                    const BandBytes& bytes) {
  container::OutputLayout layout;
  layout.x_coordinate_to_linear_tile_id_map.assign(static_cast<size_t>(ow), 0);
  int offset = 0;
  size_t next = 0;
  for (int tile = 0; tile < kTiles; ++tile) {
    layout.linearized_tile_byte_offset.push_back(offset);
    if (next == tiles.size() || tiles[next].tile != tile) continue;
    const Plan& t = tiles[next++];
    if (!(t.g1 > 0 && t.g0 > 0))
      for (int y = t.layers[t.end - 1].oa; y < t.layers[t.end - 1].ob; ++y) {
        layout.y_coordinate_to_linear_tile_id_map.push_back(t.tile);
        layout.y_coordinate_to_local_y_offset.push_back(y - t.y0);
      }
    offset += bytes(t);
  }
  for (int x = 0; x < ow; ++x) {
    layout.x_coordinate_to_local_byte_offset.push_back(x * pixel);
    layout.x_coordinate_to_local_y_row_size.push_back(row);
  }
  return layout;
}

// The output layers of fan-out heads (stream_head_outputs): per head, the tiles' bands one after
// the other, each row-major with the head's bytes per pixel.
std::vector<container::Layer> head_layers(const std::vector<Plan>& all, const ConvLayer& last) {
  std::vector<container::Layer> layers;
  for (const ConvLayer::Head& h : last.heads) {
    // (Each of the head's tiles holds every row of its band: band_layout maps the rows of the
    // tiles of one slice only.)
    std::vector<Plan> tiles = head_tiles(all, h);
    for (Plan& t : tiles) t.g0 = t.g1 = 0;
    const int pb = head_pixel_bytes(h);
    const LayerPlan& lp = tiles.front().layers[tiles.front().end - 1];
    int total = 0;
    for (const Plan& t : tiles) total += head_band_bytes(t, h);
    container::Layer layer =
        boundary_layer(h.output_name, total, h.out_zp, h.out_scale, true, h.signed_output);
    layer.y_dim = last.oh;
    layer.x_dim = last.ow;
    layer.z_dim = h.cout;
    layer.output_layout = band_layout(tiles, last.ow, pb, lp.blocks * lp.block * pb,
                                      [&](const Plan& t) { return head_band_bytes(t, h); });
    layer.shape = {{0, 0}, {0, last.oh - 1}, {0, last.ow - 1}, {0, h.cout - 1}};
    layers.push_back(std::move(layer));
  }
  return layers;
}

// Both executables of a supported chain from its layout; the output has `out_channels` of the
// last layer's channels (fewer than it computes after widen_pool).
ConvPrograms programs_of(const ConvChain& chain, const Layout& layout_of, int out_channels) {
  const Shapes& shapes = layout_of.shapes;
  const std::vector<Stage>& stages = layout_of.stages;
  const std::vector<Plan>& tiles = stages.back().tiles;
  const Plan& p = tiles.front();
  const ConvLayer& first = chain.layers.front();
  const ConvLayer& last = chain.layers.back();
  ConvPrograms out;
  std::vector<std::pair<int, int>> loads;
  container::Executable& eo = out.execution =
      execution_executable(execution_program(chain, shapes, stages, loads));
  // (An image repacked on the chip: the host's rows as they are, the last unit padded.)
  const int in_w = chain.repack_w > 0 ? chain.repack_w : first.w;
  const int in_bytes = round_up(first.h * in_w * first.cin, 8);
  eo.input_layers.push_back(boundary_layer(chain.input_name, first.h, in_w, first.cin, first.in_zp,
                                           first.in_scale, false, chain.signed_input));
  eo.input_layers.back().size_bytes = in_bytes;
  const int out_total = output_bytes(tiles);
  container::Layer out_layer = boundary_layer(chain.output_name, out_total, last.out_zp,
                                              last.out_scale, true, chain.signed_output);
  out_layer.y_dim = last.oh;
  out_layer.x_dim = last.ow;
  out_layer.z_dim = out_channels;
  // Tile t holds its band of rows, row-major, p.out_ch bytes per position.
  out_layer.output_layout = band_layout(tiles, last.ow, p.out_ch, p.g1 > 0 ? out_total : p.out_row,
                                        [](const Plan& t) { return t.out_bytes; });
  out_layer.shape = {{0, 0}, {0, last.oh - 1}, {0, last.ow - 1}, {0, out_channels - 1}};
  if (last.heads.empty()) {
    eo.output_layers.push_back(std::move(out_layer));
    eo.dma_hints = execution_hints(chain.input_name, in_bytes, chain.output_name, out_total);
  } else {
    eo.output_layers = head_layers(tiles, last);
    eo.dma_hints.fully_deterministic = true;
    eo.dma_hints.hints = {
        instruction_hint(),
        dma_hint(BufferKind::kInput, container::Direction::kInfeed, chain.input_name, in_bytes)};
    for (const container::Layer& h : eo.output_layers)
      eo.dma_hints.hints.push_back(
          dma_hint(BufferKind::kOutput, container::Direction::kOutfeed, h.name, h.size_bytes));
    eo.dma_hints.hints.push_back(interrupt_hint());
  }
  int narrow_end = 0;
  for (const Stage& s : stages)
    for (const Plan& t : s.tiles) narrow_end = std::max(narrow_end, t.narrow_end);
  if (chain.repack_w > 0)
    narrow_end = std::max(narrow_end, staging_end(*staging_of(chain, stages.front().tiles)));
  eo.used_narrow_memory_bytes_per_tile = narrow_end;
  // The caching program holds the first segment of every group; the execution program's own
  // parameters are the segments it streams, in the order it loads them, one DMA hint each after
  // the input (the host sends its streams in hint order).
  const std::vector<uint8_t> parameters = parameters_of(shapes);
  auto bytes_of = [&](const Segment& seg) {
    const auto at = parameters.begin() + static_cast<std::ptrdiff_t>(seg.offset);
    return std::pair{at, at + static_cast<std::ptrdiff_t>(seg.rows) * kRowBytes};
  };
  std::vector<uint8_t> cached;
  for (const CachedLoad& load : cached_loads(shapes)) {
    const auto from = parameters.begin() + static_cast<std::ptrdiff_t>(load.offset);
    cached.insert(cached.end(), from, from + static_cast<std::ptrdiff_t>(load.rows) * kRowBytes);
  }
  int64_t streamed = 0;
  for (size_t k = 0; k < loads.size(); ++k) {
    const auto [segment, rows] = loads[k];
    const auto from = bytes_of(shapes.segments[static_cast<size_t>(segment)]).first;
    eo.parameters.insert(eo.parameters.end(), from,
                         from + static_cast<std::ptrdiff_t>(rows) * kRowBytes);
    container::DmaHint h =
        dma_hint(BufferKind::kParameter, container::Direction::kInfeed, "", rows * kRowBytes);
    h.offset_in_bytes = static_cast<int32_t>(streamed);
    streamed += int64_t{rows} * kRowBytes;
    eo.dma_hints.hints.insert(eo.dma_hints.hints.begin() + 2 + static_cast<std::ptrdiff_t>(k), h);
  }
  const container::Executable& pc = out.caching =
      caching_executable(caching_program(shapes), std::move(cached));
  eo.parameter_caching_token = out.caching.parameter_caching_token = caching_token(pc.parameters);
  return out;
}

}  // namespace

namespace {

// A depthwise layer (looming's pool) that ends the chain after joined heads whose channels are
// not whole words: the joins write whole words (join_slot), so it takes them all, its extra
// channels with the last channel's weights; the host reads only the graph's channels. After
// heads in blocks of pixels (1-3 channel images) the joins write the pixels packed instead, and
// the pool becomes the CONV_2D it equals.
ConvChain widen_pool(const ConvChain& chain) {
  ConvChain wide = chain;
  const size_t n = wide.layers.size();
  if (n < 2 || !joined(wide.layers[n - 2])) return wide;
  ConvLayer& l = wide.layers[n - 1];
  if (!l.depthwise || l.cin % 4 == 0) return wide;
  const int c = l.cin, c4 = round_up(c, 4);
  const size_t taps = static_cast<size_t>(l.kh) * l.kw;
  if (block_of(wide.layers[n - 2]) > 1) {
    // Joined heads in blocks write the pool's image packed (c bytes a pixel): the pool as the
    // CONV_2D it equals (each output channel its own input channel's weights), which reads
    // packed pixels in windows.
    std::vector<uint8_t> weights;
    for (int oc = 0; oc < c; ++oc)
      for (size_t tap = 0; tap < taps; ++tap)
        for (int k = 0; k < c; ++k)
          weights.push_back(
              k == oc ? l.weights.at(tap * static_cast<size_t>(c) + static_cast<size_t>(k))
                      : static_cast<uint8_t>(l.weight_zp_of(oc)));
    l.weights = std::move(weights);
    l.depthwise = false;
    return wide;
  }
  std::vector<uint8_t> weights;
  for (size_t tap = 0; tap < taps; ++tap)
    for (int k = 0; k < c4; ++k)
      weights.push_back(
          l.weights.at(tap * static_cast<size_t>(c) + static_cast<size_t>(std::min(k, c - 1))));
  l.weights = std::move(weights);
  l.mult.resize(static_cast<size_t>(c4), l.mult.back());
  if (!l.bias.empty()) l.bias.resize(static_cast<size_t>(c4), 0);
  l.cin = l.cout = c4;
  return wide;
}

}  // namespace

ConvPrograms generate_conv(const ConvChain& chain) {
  const ConvChain wide = widen_pool(chain);
  Layout layout;
  if (const std::string why = unsupported(wide, layout); !why.empty()) fail(why);
  if (wide.repack_w > 0 && !staging_of(wide, layout.stages.front().tiles))
    fail("no narrow memory for the host's image beside the first stage's images");
  return programs_of(wide, layout, chain.layers.back().cout);
}

std::optional<ConvHead> emit_conv_head(const ConvChain& chain, Emitter& execution, Emitter& caching,
                                       std::string& why) {
  Layout layout;
  why = unsupported(chain, layout);
  if (!why.empty()) return std::nullopt;
  const ConvLayer& last = chain.layers.back();
  const std::vector<Plan>& tiles = layout.stages.back().tiles;
  if (output_bytes(tiles) != last.oh * last.ow * last.cout)
    return why = "the chain's output bands are not its bytes in order", std::nullopt;
  std::vector<std::pair<int, int>> loads;
  // (The probe and the program emit the same stages: slid once.)
  const std::optional<std::vector<Stage>> slid = slid_stages(layout.stages, Slides::kSlid);
  const std::vector<Stage>& stages = slid ? *slid : layout.stages;
  // A generator after the chain writes its own rows near the top of wide memory (the softmax's
  // stream FIFO and gather rows) every inference: ADD rows cached there once would be overwritten,
  // so the head's ADDs build their rows by fills each inference, as before caching.
  for (LayerPlan& lp : layout.shapes.layers) lp.add_row = -1;
  // (The program streams no parameters of its own: one inference = one pass.)
  Emitter probe = Emitter::counting();
  emit_program(probe, chain, layout.shapes, stages, loads, true, false, true);
  if (!loads.empty()) return why = "a chain that streams its parameters", std::nullopt;
  ConvHead head;
  head.tiles = all_tiles(layout.stages);
  // (Owner tiles keep segments that take turns, own_turns: the generator after must leave them.)
  for (const Segment& seg : layout.shapes.segments)
    if (seg.owner >= 0) head.tiles |= tile_bit(seg.owner);
  for (const LayerPlan& lp : layout.shapes.layers)  // (and FIFO weights)
    for (const Part& part : lp.parts)
      for (const Part::Owned& run : part.owned) head.tiles |= tile_bit(run.tile);
  head.out_bytes = output_bytes(tiles);
  for (const Stage& s : layout.stages)
    for (const Plan& t : s.tiles) head.narrow_end = std::max(head.narrow_end, t.narrow_end);
  const std::vector<uint8_t> parameters = parameters_of(layout.shapes);
  for (const CachedLoad& load : cached_loads(layout.shapes)) {
    const auto at = parameters.begin() + static_cast<std::ptrdiff_t>(load.offset);
    head.cached.insert(head.cached.end(), at, at + std::ptrdiff_t{load.rows} * kRowBytes);
    head.param_units = std::max(head.param_units, (load.row + load.rows) * kRowUnits);
  }
  emit_program(execution, chain, layout.shapes, stages, loads, true, false, true);
  emit_caching(caching, layout.shapes, true);
  return head;
}

std::optional<ConvPrograms> try_generate_conv(const ConvChain& chain, std::string& why) {
  const ConvChain wide = widen_pool(chain);
  Layout layout;
  why = unsupported(wide, layout);
  if (why.empty() && wide.repack_w > 0 && !staging_of(wide, layout.stages.front().tiles))
    why = "no narrow memory for the host's image beside the first stage's images";
  if (!why.empty()) return std::nullopt;
  return programs_of(wide, layout, chain.layers.back().cout);
}

std::vector<std::pair<uint32_t, uint32_t>> priced_program_words(const ConvChain& chain) {
  const ConvChain wide = widen_pool(chain);
  std::vector<std::pair<uint32_t, uint32_t>> words;
  auto priced = [&](const Layout& layout) {
    Emitter counted = Emitter::counting(), emitted;
    count_execution(counted, wide, layout, true);
    count_execution(emitted, wide, layout, true);
    words.push_back({counted.words(), emitted.words()});
    return program_bytes(wide, layout, true);
  };
  make_layout(wide, priced,
              [&](const Layout& layout) { return program_bytes(wide, layout, false); });
  return words;
}

}  // namespace tinycoral::compiler
