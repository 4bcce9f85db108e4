// The CONV_2D chain generator (conv_codegen.h). Every address below is derived from the layers'
// shapes; the fields around the data movement (fences, sync records, DMA fields) are the ones the
// FULLY_CONNECTED generator reproduces from edgetpu_compiler 16.0 (program_parts.h).
#include "compiler/conv_codegen.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <map>
#include <optional>
#include <tuple>

#include "common/error.h"
#include "compiler/conv_placement.h"
#include "compiler/conv_plan.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

using namespace conv;

namespace {

// Walk levels (stride, count), innermost first (strided_walk's input).
using Levels = std::vector<std::pair<int64_t, int64_t>>;

// Logical strides (in words) of the place a layer writes its outputs: position, row, group.
struct OutTarget {
  int base = 0;  // bytes
  int pixel_bytes = 0, row_words = 0;
};

OutTarget out_target(const Plan& p, size_t i) {
  OutTarget t;
  if (i + 1 == p.end) {
    t.base = p.out_base;
    t.pixel_bytes = p.out_ch;
    t.row_words = p.out_row / 4;
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

// Tile instructions collected per tile and sent as few as possible: those with the same fields
// (the ops and fills of bands of one height at the same addresses) go out as one instruction on
// all their tiles, which is what most of a stage's per-tile instructions are. A batch's
// instructions on one tile must not depend on each other's order (one op per tile, fills of
// disjoint regions).
class TileBatch {
 public:
  explicit TileBatch(Emitter& e) : e_(e) {}
  TileBatch(const TileBatch&) = delete;
  TileBatch& operator=(const TileBatch&) = delete;
  ~TileBatch() {
    for (const Item& item : items_)
      e_.add(item.mnemonic, cat("tiles=", hex(item.tiles), " ", item.fields));
    for (const std::vector<Item>& items : sequences_)
      for (const Item& item : items)
        e_.add(item.mnemonic, cat("tiles=", hex(item.tiles), " ", item.fields));
  }
  void add(uint32_t tiles, const std::string& mnemonic, const std::string& fields) {
    if (group_) {
      pending_.push_back({tiles, mnemonic, fields});
      return;
    }
    for (Item& item : items_)
      if (item.mnemonic == mnemonic && item.fields == fields) {
        item.tiles |= tiles;
        return;
      }
    items_.push_back({tiles, mnemonic, fields});
  }
  // Instructions in order on the same tiles (a part's bias load and op): the whole sequence goes
  // out once for all sequences with the same instructions on tiles no other of them uses, each
  // instruction on the tiles it has in any of them (the slices of a layer split over 2-D blocks:
  // the same bias load on each slice's bands, the same op on each slice's first band ...), so
  // every tile keeps its instructions and their order.
  void begin_sequence() { group_ = true; }
  void end_sequence() {
    group_ = false;
    std::vector<Item> sequence = std::move(pending_);
    pending_.clear();
    auto tiles_of = [](const std::vector<Item>& items) {
      uint32_t tiles = 0;
      for (const Item& item : items) tiles |= item.tiles;
      return tiles;
    };
    const uint32_t tiles = tiles_of(sequence);
    for (std::vector<Item>& items : sequences_)
      if (items.size() == sequence.size() && (tiles_of(items) & tiles) == 0 &&
          std::equal(items.begin(), items.end(), sequence.begin(),
                     [](const Item& a, const Item& b) {
                       return a.mnemonic == b.mnemonic && a.fields == b.fields;
                     })) {
        for (size_t k = 0; k < items.size(); ++k) items[k].tiles |= sequence[k].tiles;
        return;
      }
    sequences_.push_back(std::move(sequence));
  }

 private:
  struct Item {
    uint32_t tiles;
    std::string mnemonic, fields;
  };
  Emitter& e_;
  std::vector<Item> items_;
  bool group_ = false;
  std::vector<Item> pending_;
  std::vector<std::vector<Item>> sequences_;
};

void fill_narrow(TileBatch& b, int tile, int base, int bytes, int zp) {
  const uint32_t value = 0x01010101u * static_cast<uint32_t>(zp);
  for (int done = 0; done < bytes; done += 4 * kMeshFillWords) {
    const int words = std::min(kMeshFillWords, (bytes - done) / 4);
    b.add(tile_bit(tile), "mesh_n",
          cat("i.addr=", hex(base + done), " i=(1 x ", words, ")(", 1 - words, " x 1)(", 1 - words,
              " x 1)(", 1 - words, " x 1) i.sdims=1 fill_en=1 fill=", hex(value)));
  }
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
  void add(Emitter& e, int offset, int units, uint32_t mask) {
    constexpr int kHalf = kActPassUnits / 2;
    if (end < 0 ? offset >= kActPassUnits : offset + kHalf < end || offset >= end + kHalf)
      ordered = false;
    end = offset + units;
    image_infeed(e, offset, units, mask);
  }
};

int packets_of(int bytes) { return (bytes + kPiece - 1) / kPiece; }

// Whether `bytes` of rows of `row_bytes` can go as packets whose last is short: rows over a packet
// (as many rows as packets would read as one row's words per fill, the wideToNarrow's short-row
// form) and words that do not split evenly over the packets (the same form for any walk).
bool ends_inside_a_packet(int row_bytes, int bytes) {
  return row_bytes > kPiece && bytes % kPiece != 0 && bytes % 4 == 0 &&
         (bytes / 4) % packets_of(bytes) != 0;
}

// Whether `rows` whole rows of `row_bytes` go as one multi-packet transfer whose last packet may
// be short, by the wideToNarrow's rule (docs/chip.md "A wideToNarrow that takes less than a row
// per wide step"): its walk {a row's words, rows} hands over a shorter share of each fill only
// when its outer level iterates once per fill and the words split evenly into shares under 64
// words. Finer than ends_inside_a_packet, which keeps whole packets whenever the words split
// evenly (v1 1.0's 15 rows of 672 bytes: 2,520 words in 40 packets of 63 - but 15 outer
// iterations for 40 fills, so the rows stream whole).
bool rows_in_one_transfer(int row_bytes, int rows) {
  const int bytes = rows * row_bytes, packets = packets_of(bytes), words = bytes / 4;
  if (row_bytes % 4 != 0 || packets < 2 || packets > kHandOverPackets) return false;
  return !(words % packets == 0 && words / packets < kPiece / 4 && std::max(rows, 1) == packets);
}

// Whether a transfer of `bytes` in packets_of(bytes) fills, the last short, reaches the narrow
// walk `walk` (words; innermost first) whole, by the wideToNarrow's rule (docs/chip.md "A
// wideToNarrow that takes less than a row per wide step"): the walk takes only a share of each
// fill when the words split evenly into shares under 64 words and its outer levels, multiplied
// from the outermost inwards until they reach the fills, iterate once per fill.
// rows_in_one_transfer is this for the walk {a row's words, rows}.
bool streams_whole(const Levels& walk, int bytes) {
  const int64_t packets = packets_of(bytes), words = bytes / 4;
  if (bytes % 4 != 0 || packets < 2 || packets > kHandOverPackets) return false;
  if (words % packets != 0 || words / packets >= kPiece / 4) return true;
  int64_t outer = 1;
  for (size_t d = walk.size(); d-- > 1 && outer < packets;)
    if (walk[d].second > 1) outer *= walk[d].second;
  return outer != packets;
}

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

// The host's image both ways (below, and with a run per tile first) and the one of fewer
// instruction words whose infeeds read the rows meant (ImageInfeeds).
void stream_input(Emitter& e, const std::vector<Plan>& tiles) {
  Emitter with, without;
  const bool ordered = stream_input(with, tiles, true);
  stream_input(without, tiles, false);
  stream_input(e, tiles, ordered && with.words() < without.words());
}

// Returns whether the infeeds are ordered (ImageInfeeds).
bool stream_input(Emitter& e, const std::vector<Plan>& tiles, bool runs) {
  const ConvLayer& l = *tiles.front().layers.front().l;
  const int row_bytes = l.w * l.cin;
  const int units = l.h * row_bytes / 8;
  // Images over 128 KiB (224 x 224 x 3) are popped in several passes; the infeeds' offsets
  // count modulo one pass (the staging ring).
  const Passes passes = passes_of(units, kActPassUnits);
  e.add("pop",
        cat("stream=1 walk=",
            nest({{1, kActPassUnits}, {1 - kActPassUnits, passes.count}, {1 - kActPassUnits, 1}}),
            " k121=1 k124=1 av140=1", passes.fields(), " k174=1 k178=1 k199=1 k215=1"));
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  descriptor(e, 5, 4, 6, int64_t{l.h} * row_bytes, 1);
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
  auto mask_of = [&](int y) {
    uint32_t mask = 0;
    for (const Plan& t : tiles) {
      const LayerPlan& lp = t.layers.front();
      const int top = lp.full ? lp.need_top : lp.top, hp = lp.full ? lp.need_rows : lp.hp;
      if (y >= top && y < top + hp) mask |= tile_bit(t.tile);
    }
    return mask & ~taken[static_cast<size_t>(y)];
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
std::string op_tail(const LayerPlan& lp, int zp_unit, int out_ch, int last_ch = 0, int g0 = 0) {
  // A last group of fewer channels (MobileNet v2's 96, 144, 160) writes its words only and skips
  // the rest of its `out` group level (Google's out_ch_last / out.last_*, e.g. 31 and 8 words
  // skipped in gen2020 MobileNet v2).
  if (last_ch == 0) last_ch = out_ch;
  const std::string last_group = last_ch == out_ch
                                     ? ""
                                     : cat(" out.last_mode=3 out.last_cnt=", last_ch / 4 - 1,
                                           " out.last_skip=", out_ch / 4 - last_ch / 4);
  const ConvLayer& l = *lp.l;
  // (A fan-out head's groups: the head's output stage.)
  const ConvLayer::Head* head = l.head_of(g0);
  const float clamp_max = head ? head->clamp_max : l.clamp_max;
  const float clamp_min = head ? head->clamp_min : l.clamp_min;
  const int32_t out_zp = head ? head->out_zp : l.out_zp;
  return cat(" cfg0=0x0a5 cfg1=0x14e sync0=0x4000 sync1=0x4000 cfg2=0x07 cfg3=8 in_zp=", l.in_zp,
             " pc_aux_unit=", hex(zp_unit), " pc_aux_rows=", lp.planes,
             " pc_zp_unit=", hex(zp_unit), l.bias.empty() ? "" : " cfg4=1", last_group,
             " dp_mode=2 reduce_mask=0x01 out_ch_last=", last_ch - 1, " out_ch=", out_ch - 1,
             " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(clamp_max),
             " clamp_min=", f32_bits(clamp_min), " out_zp=", out_zp, " pc_mult=1");
}

// The words of groups [g0, g1) of a depthwise layer (the last group's only, when the channels
// end before a whole group of 64).
int depthwise_words(const LayerPlan& lp, int g0, int g1) {
  return std::min((g1 - g0) * lp.dw_words, lp.l->cin / 4 - g0 * lp.dw_words);
}

// A depthwise layer's groups [g0, g1) of a part: one op group per 4-channel input word (out_ch 3:
// the clock charges the 16 MACs of the four columns a step uses, not all 64 columns' 256), its
// taps' rows holding the word's 4x4 diagonal in columns 0..3.
void depthwise_op(TileBatch& e, const Plan& p, size_t i, const Part& part, int g0, int g1) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const int rows = lp.ob - lp.oa;
  const int64_t positions = int64_t{rows} * lp.blocks;
  const int taps = l.kh * l.kw;
  const int words = depthwise_words(lp, g0, g1);
  // (A tile of a split layer keeps only its groups' channels: lp.cin of them, from group p.g0.)
  const int first = lp.cin == l.cin ? 0 : p.g0;
  const std::string in_walk = strided_walk({{lp.cin / 4, l.kw},
                                            {lp.row_words(), l.kh},
                                            {l.stride_w * lp.cin / 4, lp.blocks},
                                            {int64_t{l.stride_h} * lp.row_words(), rows},
                                            {1, words}},
                                           8, " m3");
  const int in_base = lp.op_in(0) - lp.window_off + 4 * lp.dw_words * (g0 - first);
  // Shared rows: read in place. Dense weights: fill `word` of FIFO row `tap` (depthwise_fifo).
  const int par_unit = lp.dense() ? kDepthwiseFifo : lp.weight_row(part) * kRowUnits;
  const std::string par_walk = strided_walk(
      {{1, taps}, {0, positions}, {lp.dense() || lp.same_words ? 0 : taps, words}}, 8, " m1");
  const std::string par_fifo = lp.dense() ? cat(" par.tflags=0x80 par.fifo=", hex(taps)) : "";
  const OutTarget t = out_target(p, i);
  const std::string out_walk = strided_walk(
      {{1, 1}, {t.pixel_bytes / 4, lp.blocks}, {t.row_words, rows}, {1, words}}, 8, " m3");
  e.add(tile_bit(p.tile), "op",
        cat("loops=(", taps, ")(", positions, ")(", words, ") in.base=", hex(in_base),
            " in=", in_walk, " in.tflags=0x01 out.base=", hex(t.base + kColumns * (g0 - p.g0)),
            " out=", out_walk, " out.tflags=0x1 par.base=", hex(par_unit), " par=", par_walk,
            par_fifo, " psum=(0 x ", taps, ")", op_tail(lp, lp.zp_row(part) * kRowUnits, 4)));
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

void layer_op(TileBatch& e, const Plan& p, size_t i, const Part& part) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const uint32_t tile = tile_bit(p.tile);
  const int rows = lp.ob - lp.oa;
  const int groups = part.g1 - part.g0;
  const int64_t positions = int64_t{rows} * lp.blocks;
  // `in`: the window's words, tap rows, blocks along x, output rows, group.
  const std::string in_walk = strided_walk({{1, lp.window_words},
                                            {lp.row_words(), l.kh},
                                            {lp.block * l.stride_w * l.cin / 4, lp.blocks},
                                            {int64_t{l.stride_h} * lp.row_words(), rows},
                                            {0, groups}},
                                           8, " m3");
  // `par`: the group's weight rows for every position.
  const std::string par_walk =
      strided_walk({{1, lp.kwords}, {0, positions}, {lp.kwords, groups}}, 8, " m1");
  // (Joined heads: each head's channels into its slot of the operand image.)
  const bool joins = joined(l);
  const OutTarget t = joins ? join_target(p, i) : out_target(p, i);
  const int out_base =
      joins ? t.base + join_slot(l) * head_index(l, part.g0) : t.base + kColumns * (part.g0 - p.g0);
  // A fan-out head whose channels end inside its last group (PoseNet's heatmaps 17, offsets 34)
  // writes only that group's words; a head of one group computes only its columns (out_ch 19,
  // as Google's heads), its pixels keeping their place in the output buffer's 64-channel groups.
  const ConvLayer::Head* h = joins ? nullptr : l.head_of(part.g0);
  const int op_ch = joins ? join_slot(l) : lp.op_columns(part.g0, part.g1);
  const int last_ch = joins ? join_slot(l)
                      : h && part.g1 == h->g1 && h->cout % kColumns != 0
                          ? round_up(h->cout % kColumns, 4)
                      : part.g1 == lp.groups && lp.groups > 1 && l.cout % kColumns != 0
                          ? round_up(l.cout % kColumns, 4)
                          : lp.group_ch;
  const int group_words = op_ch / 4;
  const std::string out_walk =
      strided_walk({{1, group_words},
                    {(joins ? 1 : lp.block) * t.pixel_bytes / 4, lp.blocks},
                    {t.row_words, rows},
                    {kColumns / 4, groups}},
                   8, " m3");
  const std::string loops = groups > 1 ? cat("(", lp.kwords, ")(", positions, ")(", groups, ")")
                                       : cat("(", lp.kwords, ")(", positions, ")");
  e.add(tile, "op",
        cat("loops=", loops, " in.base=", hex(lp.op_in(0) - lp.window_off), " in=", in_walk,
            " in.tflags=0x01 out.base=", hex(out_base), " out=", out_walk,
            " out.tflags=0x1 par.base=", hex(lp.weight_row(part) * kRowUnits), " par=", par_walk,
            " psum=(0 x ", lp.kwords, ")",
            op_tail(lp, lp.zp_row(part) * kRowUnits, op_ch, last_ch, part.g0)));
}

// A residual ADD on one tile: its input image (the layer before wrote it) plus the kept image,
// into the next layer's image (or the output), pixel by pixel over the tile's rows.
AddOp residual_op(const Plan& p, size_t i) {
  const LayerPlan& lp = p.layers[i];
  const ConvLayer& l = *lp.l;
  const LayerPlan& xp = p.layers[static_cast<size_t>(l.residual_of)];
  const int y_at = lp.op_in(0), x_at = xp.pixel(lp.oa - xp.top, xp.l->pad_left);
  const OutTarget t = out_target(p, i);
  AddOp op;
  op.a = l.add_flowing_first ? y_at : x_at;
  op.b_minus_a = l.add_flowing_first ? x_at - y_at : y_at - x_at;
  op.out = t.base;
  op.rows = kAddRows;
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
      emit_add_rows(e, mask, aux, kAddRows, j.w1, j.w2);
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
void outfeed_transfer(Emitter& e, int tile, int n_addr, const std::string& walk, int bytes,
                      int& ordinal) {
  const int packets = (bytes + kRowBytes - 1) / kRowBytes;
  const std::string tiles = cat("tiles=", hex(tile_bit(tile)));
  if (packets == 1) {
    e.add("n2w", cat(tiles, " n.addr=", hex(n_addr), " n=", walk,
                     " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                     "tail_lvl=1"));
    e.add("outfeed", cat("walk=(0 x ", (bytes + 7) / 8, ") k173=3 f222=0x7f"));
    ring_send(e, tile, kRingFifo, 0x10000, ordinal++);
    return;
  }
  e.add("n2w", cat(tiles, " n.addr=", hex(n_addr), " n=", walk,
                   " n.lvl_mask=0x01 w.addr=", hex(kRingFifo), " w=(1 x 1)(0 x ", packets,
                   ") w.lvl_mask=0x1 w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                   "sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 f803=1"));
  e.add("outfeed", cat("walk=(0 x ", (bytes + 7) / 8, ") k173=3 f222=0x7f"));
  e.add("ringprod", cat(tiles, " addr=", hex(kRingFifo), " src=(1 x 1)(0 x ", packets,
                        ") sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", ordinal++,
                        " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 "
                        "dest=0x10000"));
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
    const int at = p.out_base + k * p.out_ch + kColumns * (h.g0 - p.g0);
    outfeed_transfer(e, p.tile, at / 4, strided_walk({{1, pb / 4}, {p.out_ch / 4, n}}, 6), n * pb,
                     ordinal);
  }
}

// Each fan-out head's output to its own host buffer, one after the other.
void stream_head_outputs(Emitter& e, const std::vector<Plan>& tiles, const ConvLayer& last,
                         int& ordinal) {
  for (const ConvLayer::Head& h : last.heads) {
    e.reloc_movi(10, BufferKind::kOutput, Half::kUpper32, h.output_name);
    e.reloc_movi(11, BufferKind::kOutput, Half::kLower32, h.output_name);
    e.add("bundle", "s_op=0x0f s_x=5 imm=11");
    e.add("bundle", "s_op=0x0f s_x=4 imm=10");
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
  for (const Plan& p : tiles) stream_tile_output(e, p, ordinal);
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

// Between two stages: every tile of `from` sends its band of the stage's last output (rows of
// the next layer's input) to the tiles of `to` whose bands read the rows, piece by piece (up to
// 256 bytes of one row): a narrowToWide into the sender's ring row and a ring producer to all of
// them, a ring consumer into a FIFO row of its own and a wideToNarrow into the interior of the
// padded image on each receiver (the host image's form, stream_input).
// Set while the placement search prices a candidate (program_bytes): its hand-overs then keep
// the receivers' order (below). Priced with the shorter of both schedules, the search picks
// layouts the simulator runs slower (v1 1.0: 4.021 against 3.964 ms); the final program takes the
// shorter schedule on the layout the search picked.
thread_local bool pricing = false;

void hand_over(Emitter& e, const Stage& from, const Stage& to, int& ordinal) {
  const size_t i = to.first;
  // (A receiver computing some groups of a split depthwise layer reads only their channels.)
  auto mask_of_ = [&](int y, const Plan& src) {
    uint32_t mask = 0;
    for (const Plan& t : to.tiles) {
      const LayerPlan& lp = t.layers[i];
      if (lp.cin != lp.l->cin && (src.g1 <= t.g0 || t.g1 <= src.g0)) continue;
      if (y >= lp.need_top && y < lp.need_top + lp.need_rows) mask |= tile_bit(t.tile);
    }
    return mask;
  };
  // Receivers that keep the whole image (LayerPlan::full) hold every row at one address: rows
  // that several of them read go to all of them in one transfer, each writing every row.
  bool full = true;
  for (const Plan& t : to.tiles) full = full && t.layers[i].full;
  // One transfer of `bytes` from narrow byte `from_at` of the sender to the tiles in `mask`,
  // each writing them with the narrow walk `walk(t)` from byte `narrow(t)`: `packets` >= 2 whole
  // packets (the softmax gather's multi-packet form: k fills of one FIFO row), else one packet of
  // up to 256 bytes.
  // The transfers are collected first and sent in rounds: each round takes the next transfer of
  // every sender whose receivers no other transfer of the round has (in one schedule only when
  // its receivers got every transfer before it, in the order they were made; below), all of one
  // form. The round shares one FIFO row (each tile has its own wide memory), so the receivers'
  // wideToNarrows and consumers and the senders' narrowToWides that differ only in their tile go
  // out as one instruction (a split layer's slices handing over to the next split layer: one
  // instead of one per slice).
  struct Write {
    uint32_t tile = 0;  // the receiver's bit
    int at = 0;         // narrow byte address of the walk's start
    Levels walk;        // its narrow walk (words)
  };
  struct Transfer {
    int src = 0;        // sending tile
    uint32_t mask = 0;  // receiving tiles
    int from_at = 0, bytes = 0, packets = 0;
    std::vector<Write> writes;  // per receiver, in tile order
  };
  std::vector<Transfer> transfers;
  auto transfer = [&](const Plan& src, int from_at, int bytes, int packets, uint32_t mask,
                      const auto& narrow, const auto& walk) {
    Transfer t{src.tile, mask, from_at, bytes, packets, {}};
    for (const Plan& r : to.tiles)
      if (mask & tile_bit(r.tile)) t.writes.push_back({tile_bit(r.tile), narrow(r), walk(r)});
    transfers.push_back(std::move(t));
  };
  // What a round sends: items of one transfer, or all-gathers (`gathered`, below): transfers
  // (parts) of several senders, or several of one, to the same receivers, in order, which the
  // receivers take with one consumer and one wideToNarrow each. `steps[w]`: the walk levels from
  // one part's write to the next's on the item's w-th receiver (none for one transfer).
  struct Item {
    std::vector<const Transfer*> parts;
    std::vector<Levels> steps;
  };
  using Round = std::vector<Item>;
  auto send = [&](Emitter& e, const Round& round, int& piece, int& ordinal) {
    if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
    const bool multi = round.front().parts.front()->packets >= 2;  // the senders' form
    {
      TileBatch writes(e);
      for (const Item& item : round) {
        const Transfer& t = *item.parts.front();
        const int fills = static_cast<int>(item.parts.size()) * t.packets;
        for (size_t w = 0; w < t.writes.size(); ++w) {
          Levels walk;
          if (item.parts.size() == 1) {
            walk = t.writes[w].walk;
          } else {
            for (const auto& level : t.writes[w].walk)
              if (level.second > 1 || walk.empty()) walk.push_back(level);
            walk.insert(walk.end(), item.steps[w].begin(), item.steps[w].end());
          }
          // (A gather's walk names its levels, as Google's do: DeepLab gen2021 word 9628.)
          const std::string narrow =
              cat(" n.addr=", hex(t.writes[w].at / 4), " n=", strided_walk(walk, 6),
                  " n.lvl_mask=", item.parts.size() > 1 ? hex((1u << walk.size()) - 1) : "0x01");
          if (fills >= 2)
            writes.add(t.writes[w].tile, "w2n",
                       cat("w.addr=", hex(fifo), " w=(0 x ", fills, ") w.rows=1", narrow,
                           " sync.en0=1 sync.id=14 sync.en1=1 "
                           "sync.val=0x08000 sync.en2=1 tail_en870=1"));
          else
            writes.add(t.writes[w].tile, "w2n",
                       cat("w.addr=", hex(fifo), " w=(1 x 1)", narrow,
                           " mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                           "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                           "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 tail_en870=1"));
        }
      }
    }
    {
      TileBatch consumers(e);
      for (const Item& item : round) {
        const Transfer& t = *item.parts.front();
        const int fills = static_cast<int>(item.parts.size()) * t.packets;
        if (fills >= 2)
          consumers.add(t.mask, "ringcons0",
                        cat("addr=", hex(fifo), " dst=(0 x ", fills,
                            ") slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
        else
          consumers.add(t.mask, "ringcons0",
                        cat("addr=", hex(fifo),
                            " dst=(1 x 1) cbuf=1 slots=1 mode=3 s_id=0x2b s_val=-64 s_cnt=1 "
                            "s_en_b=1 s_y=1"));
      }
    }
    std::vector<const Transfer*> order;  // in the order the receivers take them
    for (const Item& item : round) order.insert(order.end(), item.parts.begin(), item.parts.end());
    // The senders' side in runs of parts of different senders (a gather may take several parts
    // of one sender: each goes through the sender's ring row after the one before, as in
    // successive rounds), the producers in the receivers' order.
    std::vector<const Transfer*> sent;
    auto narrow_to_wide = [&]() {
      TileBatch reads(e);
      for (const Transfer* t : sent)
        if (multi)
          reads.add(tile_bit(t->src), "n2w",
                    cat("n.addr=", hex(t->from_at / 4), " n=", narrow_walk(t->bytes / 4),
                        " n.lvl_mask=0x01 w.addr=", hex(kRingFifo), " w=(0 x ", t->packets,
                        ") w.rows=1 sync.en0=1 sync.id=16 sync.en1=1 sync.val=0x0ffff "
                        "sync.en2=1 sync.f45=1 tail_lvl=1"));
        else
          reads.add(tile_bit(t->src), "n2w",
                    cat("n.addr=", hex(t->from_at / 4), " n=", narrow_walk(t->bytes / 4),
                        " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                        " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                        "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                        "tail_lvl=1"));
    };
    for (size_t at = 0; at < order.size();) {
      sent.clear();
      for (uint32_t from = 0; at < order.size() && !(from & tile_bit(order[at]->src)); ++at) {
        from |= tile_bit(order[at]->src);
        sent.push_back(order[at]);
      }
      // (A multi-packet producer waits for its narrowToWide, issued after it; a one-packet one
      // follows it.)
      if (!multi) narrow_to_wide();
      for (const Transfer* t : sent) {
        if (multi)
          e.add("ringprod",
                cat("tiles=", hex(tile_bit(t->src)), " addr=", hex(kRingFifo), " src=(1 x 1)(0 x ",
                    t->packets,
                    ") sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", ordinal++,
                    " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 "
                    "dest=",
                    hex(t->mask)));
        else
          ring_send(e, t->src, kRingFifo, t->mask, ordinal++);
      }
      if (multi) narrow_to_wide();
    }
  };
  for (const Plan& src : from.tiles) {
    const LayerPlan& band = src.layers[i - 1];
    const int row_bytes = src.out_row;
    // A sender computing some output groups of a split layer holds `slice` bytes of each pixel,
    // channels from `ch0`: each receiver writes them into its pixels (whole pixels per packet or
    // whole packets per pixel, `splittable`), from byte `off(t)` of each pixel - a receiver
    // keeping a slice of the channels (a split depthwise layer) holds the sender's inside its own
    // (`nests`).
    const int slice = src.out_ch, ch0 = src.g1 > 0 ? src.g0 * kColumns : 0;
    auto sliced = [&](const Plan& t) { return src.g1 > 0 && slice != t.layers[i].cin; };
    auto off = [&](const Plan& t) {
      const LayerPlan& lp = t.layers[i];
      return ch0 - (lp.cin != lp.l->cin ? t.g0 * kColumns : 0);
    };
    auto slice_walk = [&](const Plan& t, int bytes, int rows) {
      return Levels{
          {1, slice / 4}, {t.layers[i].cin / 4, bytes / slice}, {t.layers[i].row_words(), rows}};
    };
    auto mask_of = [&](int y) { return mask_of_(y, src); };
    const bool whole_rows =
        std::none_of(to.tiles.begin(), to.tiles.end(), [&](const Plan& t) { return sliced(t); });
    for (int y = band.oa, rows = 1; y < band.ob; y += rows) {
      uint32_t mask = mask_of(y);
      // Several whole rows for the same tiles (contiguous in the sender's output) go in one
      // transfer when they make 2 to kHandOverPackets whole packets, or, short rows, fit one
      // packet; each receiver drops them into its image's rows with a 2-level walk.
      // Rows over a packet may end inside one (the last fill short).
      // Rows that end inside a packet also by the wideToNarrow's own rule (rows_in_one_transfer,
      // as the host's image runs; streams_whole for receivers writing a slice of each pixel): a
      // 1,344-byte row of v2's 56 x 56 x 24 bands as one transfer of 6 packets, the last short
      // (gen2021 PoseNet word 6657 sends 960 bytes as fills of 256, 256, 256 and 192), not 5 and
      // a short rest; two of PoseNet's 1,984-byte slice rows (31 pixels of 64 channels) into a
      // head band as one of 16 packets, not four. Not while pricing: the search then
      // picks layouts the simulator runs slower (v1 0.5 1.300, 1.0 3.614, v2 4.232 against
      // 1.276, 3.611 and 4.174 ms; with the all-gathers priced too, v1 0.25 and 0.5 ran faster,
      // 0.681 and 1.271, but v2 4.226).
      auto inside = [&](int m) {
        if (ends_inside_a_packet(row_bytes, m * row_bytes)) return true;
        if (pricing || (m * row_bytes) % kPiece == 0) return false;
        if (whole_rows) return rows_in_one_transfer(row_bytes, m);
        return std::all_of(to.tiles.begin(), to.tiles.end(), [&](const Plan& t) {
          return !sliced(t) ? rows_in_one_transfer(row_bytes, m)
                            : streams_whole(slice_walk(t, row_bytes, m), m * row_bytes);
        });
      };
      rows = 1;
      int packets = inside(1) ? packets_of(row_bytes) : 0;
      uint32_t together = mask;
      for (int m = 2; y + m <= band.ob && m * row_bytes <= kHandOverPackets * kPiece &&
                      (full || mask_of(y + m - 1) == mask);
           ++m) {
        together |= mask_of(y + m - 1);
        if ((m * row_bytes % kPiece == 0 && m * row_bytes >= 2 * kPiece) || inside(m)) {
          rows = m;
          packets = packets_of(m * row_bytes);
          mask = together;
        } else if (packets == 0 && m * row_bytes <= kPiece) {
          rows = m;
          packets = 1;
          mask = together;
        }
      }
      if (mask == 0) continue;
      const int from_at = src.out_base + (y - band.oa) * src.out_row;
      if (packets > 0) {
        transfer(
            src, from_at, rows * row_bytes, packets, mask,
            [&](const Plan& t) {
              const LayerPlan& lp = t.layers[i];
              return lp.pixel(y - lp.top, lp.l->pad_left) + off(t);
            },
            [&](const Plan& t) {
              if (sliced(t)) return slice_walk(t, row_bytes, rows);
              return Levels{{1, row_bytes / 4}, {t.layers[i].row_words(), rows}};
            });
        continue;
      }
      // One row: whole 256-byte packets up to kHandOverPackets at a time, the rest of the row
      // as one short packet.
      for (int at = 0, bytes = 0; at < row_bytes; at += bytes) {
        int whole = std::min(kHandOverPackets, (row_bytes - at) / kPiece);
        if (src.g1 > 0 && slice > kPiece) whole -= whole % (slice / kPiece);
        bytes = whole >= 2 ? whole * kPiece : std::min(kPiece, row_bytes - at);
        transfer(
            src, from_at + at, bytes, whole >= 2 ? whole : 1, mask,
            [&](const Plan& t) {
              const LayerPlan& lp = t.layers[i];
              if (sliced(t)) return lp.pixel(y - lp.top, lp.l->pad_left + at / slice) + off(t);
              return lp.pixel(y - lp.top, lp.l->pad_left) + at;
            },
            [&](const Plan& t) {
              if (sliced(t)) return slice_walk(t, bytes, 1);
              return whole >= 2 ? Levels{{1, bytes / 4}}
                                : Levels{{1, bytes / 4}, {t.layers[i].row_words(), 1}};
            });
      }
    }
  }
  // The rounds (above): per sender the transfers keep their order. `in_order`: per receiver too
  // (the order they were made in). Without it a receiver takes them in any order - every transfer
  // writes bytes of its image no other transfer writes (each row or channel slice comes from the
  // one sender that computed it) - so a band pipeline's senders each handing rows to their
  // neighbours go in a few rounds, not one round per sender; with it, rounds of transfers of one
  // shape (which merge into fewer instructions) can come out fewer instructions in all.
  std::vector<std::vector<size_t>> by_sender;
  std::vector<int> sender_of(kTiles, -1);
  std::array<std::vector<size_t>, kTiles> by_receiver;
  for (size_t k = 0; k < transfers.size(); ++k) {
    const int src = transfers[k].src;
    if (sender_of[static_cast<size_t>(src)] < 0) {
      sender_of[static_cast<size_t>(src)] = static_cast<int>(by_sender.size());
      by_sender.emplace_back();
    }
    by_sender[static_cast<size_t>(sender_of[static_cast<size_t>(src)])].push_back(k);
    for (int r = 0; r < kTiles; ++r)
      if (transfers[k].mask & tile_bit(r)) by_receiver[static_cast<size_t>(r)].push_back(k);
  }
  enum class Senders { kInTileOrder, kLongestFirst, kCommonShapeFirst };
  auto schedule = [&](bool in_order, Senders order = Senders::kInTileOrder) {
    std::vector<Round> rounds;
    std::vector<size_t> next_of_sender(by_sender.size(), 0);
    std::array<size_t, kTiles> next_of_receiver{};
    for (size_t sent = 0; sent < transfers.size();) {
      Round round;
      uint32_t receivers = 0;
      // The senders with the most transfers left first, or those whose next transfer has the
      // shape (packets, first receiver's write) most of the senders' next transfers have (their
      // wideToNarrows and consumers merge).
      std::vector<size_t> senders(by_sender.size());
      for (size_t q = 0; q < senders.size(); ++q) senders[q] = q;
      auto left = [&](size_t q) { return by_sender[q].size() - next_of_sender[q]; };
      if (order == Senders::kLongestFirst)
        std::stable_sort(senders.begin(), senders.end(),
                         [&](size_t a, size_t b) { return left(a) > left(b); });
      if (order == Senders::kCommonShapeFirst) {
        auto shape = [&](size_t q) {
          const Transfer& t = transfers[by_sender[q][next_of_sender[q]]];
          return std::tuple{t.packets, t.writes.empty() ? 0 : t.writes.front().at,
                            t.writes.empty() ? Levels{} : t.writes.front().walk};
        };
        std::vector<size_t> alike(senders.size(), 0);
        for (size_t a = 0; a < senders.size(); ++a)
          for (size_t b = 0; b < senders.size() && left(a) > 0; ++b)
            if (left(b) > 0 && shape(a) == shape(b)) ++alike[a];
        std::stable_sort(senders.begin(), senders.end(),
                         [&](size_t a, size_t b) { return alike[a] > alike[b]; });
      }
      for (size_t q : senders) {
        if (next_of_sender[q] == by_sender[q].size()) continue;
        const size_t k = by_sender[q][next_of_sender[q]];
        const Transfer& t = transfers[k];
        bool ready =
            (t.mask & receivers) == 0 &&
            (round.empty() || (round.front().parts.front()->packets >= 2) == (t.packets >= 2));
        for (int r = 0; r < kTiles && ready && in_order; ++r) {
          const auto& queue = by_receiver[static_cast<size_t>(r)];
          ready = !(t.mask & tile_bit(r)) || queue[next_of_receiver[static_cast<size_t>(r)]] == k;
        }
        if (!ready) continue;
        round.push_back({{&t}, {}});
        receivers |= t.mask;
        ++next_of_sender[q];
        for (int r = 0; r < kTiles; ++r)
          if (t.mask & tile_bit(r)) ++next_of_receiver[static_cast<size_t>(r)];
      }
      rounds.push_back(std::move(round));
      sent += rounds.back().size();
    }
    return rounds;
  };
  // All-gathers: the transfers of several senders to the same receivers go in one round as one
  // item (send, above): the receivers' consumer takes all their packets, in the order the
  // producers are issued (docs/chip.md "Producers that send to tiles run in program order"), as
  // fills of one FIFO row, and their wideToNarrow walks one part's write after the other, one or
  // two walk levels more. The fills must be whole packets (a part's short last fill would leave a
  // gap in the stream) or one short packet per part: the wideToNarrow's short-row form, one
  // iteration of the outer levels per fill (DeepLab gen2021 word 9628). A transfer ending inside
  // a packet goes as its whole packets and the short rest where every receiver's walk is runs of
  // equal length at one stride (an unpadded image: the pointwise layer after a split depthwise).
  // `parts` keeps the transfers the items point to.
  auto gathered = [&](std::vector<Transfer>& parts) {
    parts.reserve(2 * transfers.size());  // (the items point into it)
    struct Runs {
      int64_t run = 0, stride = 0, n = 1;  // n runs of `run` words, `stride` words apart
    };
    auto runs_of = [](const Levels& walk) -> std::optional<Runs> {
      Levels l;
      for (const auto& level : walk)
        if (level.second > 1) l.push_back(level);
      if (l.empty() || l[0].first != 1) return std::nullopt;
      Runs r{l[0].second, l[0].second, 1};
      size_t k = 1;
      for (; k < l.size() && l[k].first == r.run; ++k) r.run *= l[k].second;
      r.stride = r.run;
      if (k < l.size()) r.stride = l[k].first, r.n = l[k++].second;
      for (; k < l.size() && l[k].first == r.stride * r.n; ++k) r.n *= l[k].second;
      if (k < l.size()) return std::nullopt;
      return r;
    };
    auto split = [&](const Transfer& t) {
      if (t.packets < 2 || t.bytes % kPiece == 0) return false;
      const int whole = t.bytes / kPiece * kPiece;
      Transfer head = t, rest = t;
      head.bytes = whole;
      head.packets = whole / kPiece;
      rest.from_at += whole;
      rest.bytes -= whole;
      rest.packets = 1;
      for (size_t w = 0; w < t.writes.size(); ++w) {
        const std::optional<Runs> r = runs_of(t.writes[w].walk);
        const int64_t words = whole / 4;
        if (!r) return false;
        if (r->stride == r->run || r->n == 1) {
          head.writes[w].walk = {{1, words}};
          rest.writes[w].walk = {{1, r->run * r->n - words}};
          rest.writes[w].at += whole;
        } else {
          if (words % r->run != 0) return false;
          const int64_t n = words / r->run;
          head.writes[w].walk = {{1, r->run}, {r->stride, n}};
          rest.writes[w].walk = {{1, r->run}, {r->stride, r->n - n}};
          rest.writes[w].at += static_cast<int>(4 * r->stride * n);
        }
      }
      parts.push_back(std::move(head));
      parts.push_back(std::move(rest));
      return true;
    };
    for (const Transfer& t : transfers)
      if (!split(t)) parts.push_back(t);
    // Parts of one shape (receivers, size, walks) gather when their places on every receiver
    // step regularly: one level (a, a + d, a + 2d ...) or two (c steps of d1, those c2 times d2).
    auto steps_of =
        [&](const std::vector<const Transfer*>& ps) -> std::optional<std::vector<Levels>> {
      const size_t k = ps.size();
      const Transfer& t = *ps.front();
      if (k * static_cast<size_t>(t.packets) > static_cast<size_t>(kHandOverPackets))
        return std::nullopt;
      // Inner count: where the first receiver's step changes.
      size_t c = 1;
      auto at = [&](size_t j, size_t w) { return int64_t{ps[j]->writes[w].at}; };
      while (c < k && at(c, 0) - at(c - 1, 0) == at(1, 0) - at(0, 0)) ++c;
      if (k % c != 0) return std::nullopt;
      std::vector<Levels> out;
      for (size_t w = 0; w < t.writes.size(); ++w) {
        const int64_t d1 = at(1, w) - at(0, w), d2 = at(c % k, w) - at(0, w);
        for (size_t j = 0; j < k; ++j)
          if (at(j, w) !=
              at(0, w) + static_cast<int64_t>(j % c) * d1 + static_cast<int64_t>(j / c) * d2)
            return std::nullopt;
        if (d1 % 4 != 0 || d2 % 4 != 0 || d1 == 0) return std::nullopt;
        Levels steps{{d1 / 4, static_cast<int64_t>(c)}};
        if (c < k) steps.push_back({d2 / 4, static_cast<int64_t>(k / c)});
        size_t levels = steps.size();
        for (size_t l = 0; l < t.writes[w].walk.size(); ++l)
          levels += l == 0 || t.writes[w].walk[l].second > 1 ? 1 : 0;
        if (levels > 6) return std::nullopt;
        out.push_back(std::move(steps));
      }
      return out;
    };
    std::vector<std::vector<const Transfer*>> shapes;
    std::map<std::string, size_t> shape_of;
    std::vector<Item> items;
    for (const Transfer& p : parts) {
      if (!(p.packets == 1 && p.bytes < kPiece) && p.bytes != p.packets * kPiece) {
        items.push_back({{&p}, {}});
        continue;
      }
      std::string key = cat(p.mask, " ", p.packets, " ", p.bytes);
      for (const Write& w : p.writes) key += cat(" ", w.tile, strided_walk(w.walk, 6));
      auto [it, fresh] = shape_of.emplace(key, shapes.size());
      if (fresh) shapes.emplace_back();
      shapes[it->second].push_back(&p);
    }
    for (std::vector<const Transfer*>& ps : shapes) {
      std::stable_sort(ps.begin(), ps.end(), [](const Transfer* a, const Transfer* b) {
        return a->writes.front().at < b->writes.front().at;
      });
      if (ps.size() > 1)
        if (auto steps = steps_of(ps)) {
          items.push_back({ps, std::move(*steps)});
          continue;
        }
      // Else runs of consecutive parts that step regularly.
      for (size_t j = 0; j < ps.size();) {
        Item item{{ps[j]}, {}};
        for (++j; j < ps.size(); ++j) {
          std::vector<const Transfer*> more = item.parts;
          more.push_back(ps[j]);
          auto steps = steps_of(more);
          if (!steps) break;
          item = {std::move(more), std::move(*steps)};
        }
        items.push_back(std::move(item));
      }
    }
    // Rounds: the largest items first, each round items of other receivers and senders.
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.parts.size() > b.parts.size(); });
    std::vector<Round> rounds;
    std::vector<bool> done(items.size(), false);
    for (size_t left = items.size(); left > 0;) {
      Round round;
      uint32_t receivers = 0, senders = 0;
      for (size_t q = 0; q < items.size(); ++q) {
        if (done[q]) continue;
        const Item& item = items[q];
        uint32_t from = 0;
        for (const Transfer* p : item.parts) from |= tile_bit(p->src);
        const bool multi = item.parts.front()->packets >= 2;
        if ((item.parts.front()->mask & receivers) || (from & senders) ||
            (!round.empty() && (round.front().parts.front()->packets >= 2) != multi))
          continue;
        round.push_back(item);
        receivers |= item.parts.front()->mask;
        senders |= from;
        done[q] = true;
        --left;
      }
      rounds.push_back(std::move(round));
    }
    return rounds;
  };
  auto emit_rounds = [&](Emitter& out, const std::vector<Round>& rounds, int& ord) {
    int piece = 0;
    for (const auto& round : rounds) send(out, round, piece, ord);
    tile_fence(out, "counters=0x1ffff units=0x3ff");
  };
  // The schedules are emitted and the one of fewest instruction words is kept (but while
  // pricing).
  const auto in_order = schedule(true);
  if (pricing) {
    emit_rounds(e, in_order, ordinal);
    return;
  }
  // (Receivers in any order, and so with the senders of most transfers left first.)
  std::vector<Transfer> parts;
  std::vector<std::vector<Round>> schedules{
      in_order, schedule(false), schedule(false, Senders::kLongestFirst),
      schedule(false, Senders::kCommonShapeFirst), gathered(parts)};
  size_t best = 0;
  uint32_t fewest = 0;
  for (size_t k = 0; k < schedules.size(); ++k) {
    Emitter trial;
    int ord = ordinal;
    emit_rounds(trial, schedules[k], ord);
    if (k == 0 || trial.words() < fewest) {
      best = k;
      fewest = trial.words();
    }
  }
  emit_rounds(e, schedules[best], ordinal);
}

// The execution program into `e`; `loads` receives the segments it streams and how many of their
// first rows, in order (its parameters). `head`: a generator follows in the same program, so the
// last layer's bytes go to the host's scratch buffer and the program does not end here.
void emit_execution(Emitter& e, const ConvChain& chain, const Shapes& shapes,
                    const std::vector<Stage>& stages, std::vector<std::pair<int, int>>& loads,
                    bool head) {
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
  auto fill_stage = [&](const Stage& s) {
    // (A stage in rounds fills its other images round by round.)
    const size_t images = s.tiles.front().rounds > 1 ? 1 : 2;
    for (size_t i = s.first; i < std::min(s.first + images, s.end); ++i) fill_image(s, i);
    tile_fence(e, "counters=0x1ffff units=0x3ff");
  };
  fill_stage(stages.front());
  stream_input(e, stages.front().tiles);
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
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
    load_parameters(e, rows, seg.mask, streamed, seg.base_row);
    streamed += int64_t{rows} * kRowBytes;
    loads.push_back({segment, rows});
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
      fill_stage(stages[si]);
      hand_over(e, stages[si - 1], stages[si], ordinal);
      // The same image to the tiles of a later stage whose residual ADD reads it (keep_operands:
      // they keep it where no stage in between writes).
      for (size_t i = stage.end; i < chain.layers.size(); ++i)
        if (chain.layers[i].residual_of == static_cast<int>(stage.first)) {
          Stage kept = stage_of(i);
          kept.first = stage.first;
          kept.end = stage.first + 1;
          hand_over(e, stages[si - 1], kept, ordinal);
        }
      tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
      wait_tokens(e);
    }
    if (!rounds[si].empty()) {
      fill_image(stage, stage.first + 1);
      tile_fence(e, "counters=0x1ffff units=0x3ff");
    }
    for (size_t i = stage.first; i < stage.end; ++i) {
      const LayerPlan& lp = shapes.layers[i];
      if (i >= stage.first + 1 && i + 1 < stage.end) {
        fill_image(stage, i + 1);
        tile_fence(e, "counters=0x1ffff units=0x3ff");
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
        for (const auto& [at, mask] : scratch)
          emit_add_rows(e, mask, at, kAddRows, lp.l->add_w1, lp.l->add_w2);
        // (Tiles whose ADDs read and write the same addresses run one instruction.)
        std::vector<std::pair<AddOp, uint32_t>> adds;
        for (const Plan& p : stage.tiles) {
          AddOp op = residual_op(p, i);
          auto at = std::find_if(adds.begin(), adds.end(),
                                 [&](const auto& a) { return same_add(a.first, op); });
          if (at == adds.end())
            at = adds.insert(adds.end(), std::pair<AddOp, uint32_t>{std::move(op), 0u});
          at->second |= tile_bit(p.tile);
        }
        const ConvLayer& l = *lp.l;
        for (const auto& [op, mask] : adds)
          emit_add_op(e, mask, op, l.mult.at(0), l.clamp_min, l.clamp_max, l.add_offset, l.out_zp);
        tile_fence(e, "counters=0x1ffff units=0x3ff");
        tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
        wait_tokens(e);
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
          tile_fence(e, "counters=0x1ffff units=0x3ff");
          tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
          wait_tokens(e);
          continue;
        }
      }
      // The tiles of a layer split by output groups run their parts at once (one part each, all
      // resident): one fence after the last.
      // (Not when some part is streamed: its rows take turns with the part before on its tile.)
      bool at_once = stage.tiles.front().g1 > 0 && !(lp.l->depthwise && lp.shared_rows);
      for (const Part& part : lp.parts)
        at_once = at_once && shapes.segments[static_cast<size_t>(part.segment)].first_of_group;
      // Their parts that differ only in the tile (the same rows and addresses on each) go out as
      // one bias load and one op on all of them.
      std::optional<TileBatch> parts_at_once;
      if (at_once) parts_at_once.emplace(e);
      for (const Part& part : lp.parts) {
        // The part's segment once the layers before have run.
        const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
        if (resident[static_cast<size_t>(seg.group)] != part.segment) {
          if (parts_at_once) {  // (the parts before run on the rows this load replaces)
            parts_at_once.reset();
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
        if (lp.l->depthwise && lp.shared_rows) {
          std::vector<std::pair<const Plan*, const Part*>> pooling;
          for (const Plan* p : runs) pooling.push_back({p, &part});
          pool_groups(lp, i, pooling, mask);
        } else if (at_once) {
          TileBatch& batch = *parts_at_once;
          batch.begin_sequence();
          batch.add(mask, "w2n", bias_load_fields(lp, part.row, part.g1 - part.g0));
          if (trip.words > 0)
            batch.add(mask, "ringcons0", depthwise_fifo_consumer(taps, trip.words));
          for (const Plan* p : runs)
            if (lp.l->depthwise)
              depthwise_op(batch, *p, i, part, part.g0, part.g1);
            else
              layer_op(batch, *p, i, part);
          batch.end_sequence();
        } else {
          bias_load(e, lp, part.row, part.g1 - part.g0, mask);
          if (trip.words > 0)
            e.add("ringcons0",
                  cat("tiles=", hex(mask), " ", depthwise_fifo_consumer(taps, trip.words)));
          TileBatch ops(e);
          for (const Plan* p : runs)
            if (lp.l->depthwise)
              depthwise_op(ops, *p, i, part, part.g0, part.g1);
            else
              layer_op(ops, *p, i, part);
        }
        if (at_once && &part != &lp.parts.back()) continue;
        parts_at_once.reset();  // (emits the parts before their fence)
        tile_fence(e, "counters=0x1ffff units=0x3ff");
        tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
        wait_tokens(e);
      }
      if (joined(*lp.l)) {
        emit_joins(e, stage, i);
        tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
        wait_tokens(e);
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

container::Bitstream execution_program(const ConvChain& chain, const Shapes& shapes,
                                       const std::vector<Stage>& stages,
                                       std::vector<std::pair<int, int>>& loads) {
  Emitter e;
  emit_execution(e, chain, shapes, stages, loads, false);
  return e.finish();
}

// Bytes one inference of a layout sends besides its input and output: its instructions and the
// parameter rows it streams.
double program_bytes(const ConvChain& chain, const Layout& layout) {
  std::vector<std::pair<int, int>> loads;
  struct Pricing {
    Pricing() { pricing = true; }
    ~Pricing() { pricing = false; }
  } priced;
  const container::Bitstream program =
      execution_program(chain, layout.shapes, layout.stages, loads);
  double bytes = double(program.data.size());
  for (const auto& [segment, rows] : loads) bytes += double(rows) * kRowBytes;
  return bytes;
}

Layout layout_of(const ConvChain& chain) {
  return make_layout(chain, [&](const Layout& layout) { return program_bytes(chain, layout); });
}

// The first segment of every group into its tiles' wide memory, once: the caching program's
// start and loads into `e` (`head`: without its end, a generator's loads follow).
void emit_caching(Emitter& e, const Shapes& shapes, bool head) {
  tile_fence(e, "b43=1 counters=0x7ffff units=0x3ff signal=1");
  e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
  e.reloc_movi(1, BufferKind::kParameter, Half::kLower32);
  e.reloc_movi(0, BufferKind::kParameter, Half::kUpper32);
  int64_t offset = 0;
  for (const Segment& seg : shapes.segments) {
    if (!seg.first_of_group) continue;
    load_parameters(e, seg.rows, seg.mask, offset, seg.base_row);
    offset += int64_t{seg.rows} * kRowBytes;
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
        return "a residual block split over two stages without its operand kept (placement error)";
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
  for (const Stage& stage : stages)
    if (stage.end < chain.layers.size() && surplus_pixels(layout.shapes.layers[stage.end - 1]) > 0)
      return "a stage that ends with a partial last block of pixels (not generated yet)";
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
std::vector<container::Layer> head_layers(const std::vector<Plan>& tiles, const ConvLayer& last) {
  std::vector<container::Layer> layers;
  for (const ConvLayer::Head& h : last.heads) {
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
  const int in_bytes = first.h * first.w * first.cin;
  eo.input_layers.push_back(boundary_layer(chain.input_name, first.h, first.w, first.cin,
                                           first.in_zp, first.in_scale, false, chain.signed_input));
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
  for (const Segment& seg : shapes.segments)
    if (seg.first_of_group) {
      const auto [from, to] = bytes_of(seg);
      cached.insert(cached.end(), from, to);
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
  Emitter probe;  // the program streams no parameters of its own (one inference = one pass)
  emit_execution(probe, chain, layout.shapes, layout.stages, loads, true);
  if (!loads.empty()) return why = "a chain that streams its parameters", std::nullopt;
  ConvHead head;
  head.tiles = all_tiles(layout.stages);
  head.out_bytes = output_bytes(tiles);
  for (const Stage& s : layout.stages)
    for (const Plan& t : s.tiles) head.narrow_end = std::max(head.narrow_end, t.narrow_end);
  const std::vector<uint8_t> parameters = parameters_of(layout.shapes);
  for (const Segment& seg : layout.shapes.segments) {
    if (!seg.first_of_group) continue;
    const auto at = parameters.begin() + static_cast<std::ptrdiff_t>(seg.offset);
    head.cached.insert(head.cached.end(), at, at + std::ptrdiff_t{seg.rows} * kRowBytes);
    head.param_units = std::max(head.param_units, (seg.base_row + seg.rows) * kRowUnits);
  }
  emit_execution(execution, chain, layout.shapes, layout.stages, loads, true);
  emit_caching(caching, layout.shapes, true);
  return head;
}

std::optional<ConvPrograms> try_generate_conv(const ConvChain& chain, std::string& why) {
  const ConvChain wide = widen_pool(chain);
  Layout layout;
  why = unsupported(wide, layout);
  if (!why.empty()) return std::nullopt;
  return programs_of(wide, layout, chain.layers.back().cout);
}

}  // namespace tinycoral::compiler
