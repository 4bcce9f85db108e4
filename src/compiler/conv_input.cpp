// The host's image into the first stage (conv_input.h): the infeeds of its rows (ImageInfeeds),
// one run per tile (stream_runs) or pieces of rows to every tile that reads them, and the staging
// and narrow copies of an image repacked on the chip.
#include "compiler/conv_input.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <utility>

#include "compiler/conv_input_pops.h"
#include "compiler/conv_packets.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/fields.h"
#include "compiler/program_parts.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler::conv {

namespace {

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

// A tile's run: rows [y, y + rows) of the image.
struct Run {
  const Plan* tile;
  int y, rows;
};

// The runs of the tiles that take their rows in one transfer, by their first row (each infeed
// starts near where the one before ended); `all`: whether every tile with rows does.
std::vector<Run> image_runs(const std::vector<Plan>& tiles, bool* all = nullptr) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  std::vector<Run> runs;
  if (all) *all = true;
  for (const Plan& t : tiles) {
    const LayerPlan& lp = t.layers.front();
    const int y = std::max(lp.top, 0), rows = std::min(lp.top + lp.hp, l.h) - y;
    if (rows <= 0) continue;
    if (rows_in_one_transfer(row_bytes, rows))
      runs.push_back({&t, y, rows});
    else if (all)
      *all = false;
  }
  std::stable_sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.y < b.y; });
  return runs;
}

// The runs' units of the image.
std::vector<UnitRun> unit_runs(const std::vector<Run>& runs, int row_bytes) {
  std::vector<UnitRun> units;
  for (const Run& r : runs) units.push_back({r.y * row_bytes / 8, (r.y + r.rows) * row_bytes / 8});
  return units;
}

// The host's image as one run per tile (`runs`, image_runs: the rows its band reads, halo rows
// included), when the
// first stage is in bands (not whole images): each tile's run in one transfer of its own, the
// rows shared with a neighbouring band read a second time from the pop's staging (the infeeds of
// one pop may re-read what an earlier one sent, docs/chip.md "Infeed"; Google's PoseNet does so
// by a unit), so the host still sends the image once. A run may cross a pop pass (Google's v1 1.0
// infeed at word 153 sends units 14112-18815 of its 16384-unit passes). All runs share one FIFO
// row (each tile has its own wide memory), so their wideToNarrows and consumers, equal on tiles
// whose bands have one height, are one instruction each, and an infeed per tile follows: one
// transfer per tile instead of runs of rows for the same tiles cut into whole packets and a short
// piece, with the halo rows in transfers of their own (v1 1.0: 99 infeeds -> 16). `taken[y]`
// gets the tiles that received row y so. `cuts` (units, from image_pop_cuts): the image is
// popped here, a pop from each cut on, each run's infeed cut where a pop starts (the runs then
// take every row: nothing is sent after them); none: popped before, whole.
void stream_runs(Emitter& e, const std::vector<Plan>& tiles, const std::vector<Run>& runs,
                 int& piece, std::vector<uint32_t>& taken, ImageInfeeds& infeeds,
                 const std::vector<int>& cuts) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  if (runs.empty()) return;
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
  for (const Run& r : runs)
    for (int y = r.y; y < r.y + r.rows; ++y)
      taken[static_cast<size_t>(y)] |= tile_bit(r.tile->tile);
  if (cuts.empty()) {
    for (const Run& r : runs)
      infeeds.add(e, r.y * row_bytes / 8, r.rows * row_bytes / 8, tile_bit(r.tile->tile));
    return;
  }
  const std::vector<UnitRun> units = unit_runs(runs, row_bytes);
  const int pop_units = l.h * row_bytes / 8;
  std::vector<int> bounds = cuts;
  bounds.push_back(pop_units);
  int from = 0;
  for (const int to : bounds) {
    if (from == 0)
      host_pop(e, int64_t{pop_units} * 8, int64_t{to} * 8);
    else
      pop_more(e, int64_t{to - from} * 8);
    infeeds.new_pop();
    for (size_t k = 0; k < runs.size(); ++k) {
      const int a = std::max(units[k].u0, from), b = std::min(units[k].u1, to);
      if (a < b) infeeds.add(e, a - from, b - a, tile_bit(runs[k].tile->tile));
    }
    from = to;
  }
}

bool stream_input(Emitter& e, const std::vector<Plan>& tiles, bool runs, bool pieces);

// The image rows [first, end) a tile of the first stage holds (padding rows excluded).
std::pair<int, int> image_rows(const LayerPlan& lp) {
  const int top = lp.full ? lp.need_top : lp.top, hp = lp.full ? lp.need_rows : lp.hp;
  return {std::max(top, 0), std::min(top + hp, lp.l->h)};
}

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
  s.row_bytes = chain.repack_w * chain.host_channels();
  s.pixel_bytes = chain.repack_cin;
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

}  // namespace

// Aligned to packets where that fits, else to units.
std::optional<Staging> staging_of(const ConvChain& chain, const std::vector<Plan>& tiles) {
  if (auto s = staging_of(chain, tiles, kPieceUnits)) return s;
  return staging_of(chain, tiles, 1);
}

int staging_end(const Staging& s) { return s.identity + 16; }

namespace {

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

}  // namespace

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
  stream_input(e, views, false);
}

namespace {

// One narrow copy (dp 3 cfg0 0x07, docs/chip_ops.md): `bytes` (1-4) bytes of `in` a step times
// the identity row's lanes make each output word, `words` words a row over `rows` rows; with
// in_zp = out_zp = zp the word's bytes past `bytes` get the zero point.
std::string narrow_copy(int in, int in_row, int out, int out_row, int bytes, int words, int rows,
                        int zp, int in_step = 4) {
  int in_hmode = 0, out_hmode = 0, par_hmode = 0;
  const std::string in_walk =
      byte_walk({{1, bytes}, {in_step, words}, {in_row, rows}}, 3, &in_hmode);
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

}  // namespace

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
      if (s.pixel_bytes > 0) {  // (each pixel one word, its last bytes the zero point)
        ops.add(tile_bit(t.tile), "op",
                narrow_copy(in, s.row_bytes, out, row, s.pixel_bytes, s.row_bytes / s.pixel_bytes,
                            yb - ya, l.in_zp, s.pixel_bytes));
        continue;
      }
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
void stream_input(Emitter& e, const std::vector<Plan>& tiles, bool pieces) {
  Emitter with = Emitter::counting(), without = Emitter::counting();
  const bool ordered = stream_input(with, tiles, true, false);
  stream_input(without, tiles, false, false);
  const bool runs = ordered && with.words() < without.words();
  // (Popped in pieces only where those infeeds read the rows meant too.)
  Emitter popped = Emitter::counting();
  stream_input(e, tiles, runs, runs && pieces && stream_input(popped, tiles, true, true));
}

namespace {

// Returns whether the infeeds are ordered (ImageInfeeds). `pieces`: the runs' image popped in
// pieces where every tile takes its rows as one run (stream_runs).
bool stream_input(Emitter& e, const std::vector<Plan>& tiles, bool runs, bool pieces) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  // Tiles that keep the whole image (LayerPlan::full) take every row of a transfer any of them
  // reads, at one address (one wideToNarrow for all).
  bool full = true;
  for (const Plan& t : tiles) full = full && t.layers.front().full;
  runs = runs && !full && row_bytes % 8 == 0;
  std::vector<Run> tile_runs;  // (image_runs, for stream_runs)
  std::vector<int> cuts;
  if (runs) {
    bool all = false;
    tile_runs = image_runs(tiles, &all);
    if (pieces && all && !tile_runs.empty())
      cuts = image_pop_cuts(unit_runs(tile_runs, row_bytes), l.h * row_bytes / 8);
  }
  // Images over 128 KiB (224 x 224 x 3) are popped in several passes; the infeeds' offsets
  // count modulo one pass (the staging ring).
  if (cuts.empty()) host_pop(e, int64_t{l.h} * row_bytes);
  // A piece is up to `max_rows` whole image rows needed by the same tiles (rows of up to 256
  // bytes), or 256 bytes of one row; every piece is a whole number of 8-byte units
  // (input_streamable; rows 4 bytes past whole units only on one tile, two rows at a time).
  const int max_rows = row_bytes > kPiece ? 1 : rows_per_packet(row_bytes);
  // (Rows a tile got in its run, stream_runs, are not sent to it again.)
  int piece = 0, rows = 1;
  std::vector<uint32_t> taken(static_cast<size_t>(l.h), 0);
  ImageInfeeds infeeds;
  if (runs) stream_runs(e, tiles, tile_runs, piece, taken, infeeds, cuts);
  // The tiles each row still goes to, found once (the search below asks for rows many times).
  std::vector<uint32_t> row_masks(static_cast<size_t>(l.h), 0);
  for (const Plan& t : tiles) {
    const auto [first, end] = image_rows(t.layers.front());
    for (int y = first; y < end; ++y) row_masks[static_cast<size_t>(y)] |= tile_bit(t.tile);
  }
  for (int y = 0; y < l.h; ++y) row_masks[static_cast<size_t>(y)] &= ~taken[static_cast<size_t>(y)];
  auto mask_of = [&](int y) { return row_masks[static_cast<size_t>(y)]; };
  // Whole packets in one transfer (the multi-packet form) into the tiles of `mask` at their pixel
  // (y, pad_left), each tile's narrow walk from `walk`: the fence every kInputRows pieces, the
  // wideToNarrows, the ring's receive and the infeed of `units` 8-byte units from `offset`.
  auto whole_packets = [&](int y, uint32_t mask, int packets, int offset, int units,
                           const auto& walk) {
    if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
    const std::string dst = cat("(0 x ", packets, ")");
    {
      TileBatch writes(e);
      for (const Plan& t : tiles) {
        if (!(mask & tile_bit(t.tile))) continue;
        const LayerPlan& lp = t.layers.front();
        writes.add(tile_bit(t.tile), "w2n",
                   cat("w.addr=", hex(fifo), " w=", dst, " w.rows=1 n.addr=",
                       hex(lp.pixel(y - lp.top, l.pad_left) / 4), " n=", walk(lp),
                       " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 "
                       "sync.en2=1 tail_en870=1"));
      }
    }
    e.add("ringcons0", cat("tiles=", hex(mask), " addr=", hex(fifo), " dst=", dst,
                           " slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
    infeeds.add(e, offset, units, mask);
  };
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
      const int bytes = whole * row_bytes;
      whole_packets(y, mask, packets_of(bytes), y * row_bytes / 8, bytes / 8,
                    [&](const LayerPlan& lp) {
                      return strided_walk({{1, row_bytes / 4}, {lp.row_words(), whole}}, 6);
                    });
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
      whole_packets(y, mask, first_at / kPiece, y * row_bytes / 8, first_at / 8,
                    [&](const LayerPlan&) { return narrow_walk(first_at / 4); });
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

}  // namespace

}  // namespace tinycoral::compiler::conv
