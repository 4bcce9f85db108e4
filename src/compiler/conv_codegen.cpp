// The CONV_2D chain generator (conv_codegen.h). Every address below is derived from the layers'
// shapes; the fields around the data movement (fences, sync records, DMA fields) are the ones the
// FULLY_CONNECTED generator reproduces from edgetpu_compiler 16.0 (program_parts.h).
#include "compiler/conv_codegen.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "common/error.h"
#include "compiler/eltwise_codegen.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kTiles = 16;         // the chip's tiles
constexpr int kColumns = 64;       // output channels per group (one weight row)
constexpr int kRowBytes = 256;     // one wide row
constexpr int kRowUnits = 4;       // 64-byte units per wide row
constexpr int kPiece = 256;        // input bytes per ring packet
constexpr int kRingFifo = 0x2078;  // wide row of the output packets
// Input packets land in rows of their own (one writer per row and fence region, so each
// wideToNarrow reads its own packet): kInputRows rows from unit kInputFifo, then a fence.
constexpr int kInputFifo = 0x1e00;
constexpr int kInputRows = 32;
constexpr int kAddRows = kInputFifo + 4 * kInputRows;  // a residual ADD's 4 weight rows
constexpr int kHandOverPackets = 16;                   // ring packets per hand-over transfer
constexpr int kNarrowBytes = 196608;                   // narrow memory of a tile
constexpr int kWideUnitsLimit = kInputFifo;            // weights stay below the program's FIFO rows
constexpr int kActPassUnits = 16384;                   // activation units (8 bytes) per pass
constexpr int kParPassUnits = 1024;                    // parameter units (64 bytes) per pass
constexpr int kMeshFillWords = 4096;                   // words per mesh fill instruction

int round_up(int v, int m) { return (v + m - 1) / m * m; }

// A run of a layer's 64-channel groups whose parameter rows sit together in one segment (a layer
// whose weights exceed one wide memory is split by output groups over several segments, each
// streamed in before its part runs).
struct Part {
  int g0 = 0, g1 = 0;  // groups [g0, g1)
  int row = 0;         // first wide row of the part's parameters (within its segment)
  int segment = 0;     // the parameter segment that holds them
};

// Where one layer's data lives and how its op walks it.
// A layer whose input pixels are not whole words (Cin % 4 != 0) computes `block` output pixels
// per op position: block x Cout columns, each pixel's weights placed at its byte offset in a
// word-aligned window of the input row (the other bytes of the window get the weight zero point,
// so they add nothing), so every read is a whole aligned word.
struct LayerPlan {
  const ConvLayer* l = nullptr;
  int block = 1;         // output pixels per position: the least B with B s Cin % 4 == 0
  int extra = 0;         // pixels left of the padded image so that its interior is word aligned
  int window_off = 0;    // byte of padded column 0 in its word: (extra Cin) % 4
  int window_words = 0;  // words per tap row of a block's window
  int blocks = 0;        // positions per output row: ceil(OW / block)
  int kwords = 0;        // reduction words per position: kh * window_words
  // Depthwise layers: the input words of one group's channels (the group's columns read only
  // their own words, through diagonal weight rows); 0 for CONV_2D.
  int dw_words = 0;
  int hp = 0, wp = 0;  // padded input image; wp counts the extra pixels and the window overrun
  int in_base = 0;     // narrow byte address of the padded image
  int groups = 0;      // 64-channel groups
  int group_ch = 0;    // columns per group (the op's out_ch + 1)
  int planes = 0;      // aux rows per group: multipliers (and biases)
  std::vector<Part> parts;
  // Every group of a depthwise layer has the same weights (an AVERAGE_POOL_2D: all 1): the
  // groups share one set of weight rows (MobileNet v1 1.0's 7x7 pool: 784 rows instead of 12,544).
  bool shared_rows = false;
  int rows_of(int groups_in_part) const {
    if (l->residual()) return 0;  // a residual ADD has no parameters
    return groups_in_part * planes + 1 + (shared_rows ? 1 : groups_in_part) * kwords;
  }
  int zp_row(const Part& part) const { return part.row + (part.g1 - part.g0) * planes; }
  int weight_row(const Part& part) const { return zp_row(part) + 1; }
  int rows() const { return rows_of(groups); }
  int in_bytes() const { return round_up(hp * wp * l->cin, 4); }
  int row_words() const { return wp * l->cin / 4; }
  // Narrow byte address of padded pixel (y, x), x counted from the image's padded column 0.
  int pixel(int y, int x) const { return in_base + (y * wp + extra + x) * l->cin; }
  // The band of rows this tile computes: output rows [oa, ob); buffer row 0 holds the layer's
  // input row `top` (negative: padding rows above the image).
  int oa = 0, ob = 0, top = 0;
  // The input rows the band reads, [need_top, need_top + need_rows) (padding rows included);
  // the buffer holds them from row need_top - top. A stage's first image after a hand-over
  // holds the whole padded image (`full`) on every tile at one address, so that rows that
  // several tiles read travel to all of them in one transfer.
  int need_top = 0, need_rows = 0;
  bool full = false;
  bool needs_fill() const { return top < 0 || top + hp > l->h || wp != l->w || extra != 0; }
  // Narrow byte address of the first input row the op reads.
  int op_in(int x) const { return pixel(need_top - top, x); }
};

// One tile's part of a stage of the chain (layers [first, end)): its band of the stage's last
// output rows and, going back through the stage's layers, the rows each layer must compute for
// it (the halo rows are computed again by the neighbouring tile rather than exchanged). `layers`
// holds every layer of the chain (the same shapes and parameter parts on every tile); only those
// of the stage have bands and narrow addresses.
struct Plan {
  int tile = 0;
  // The output groups [g0, g1) this tile computes of a last layer split by output groups over
  // tiles (share_tiles); g1 == 0: all of them.
  int g0 = 0, g1 = 0;
  int y0 = 0;  // the tile's first output row of the stage's last layer
  size_t first = 0, end = 0;
  std::vector<LayerPlan> layers;
  int out_base = 0;   // narrow byte address of the stage's [OH][OW][Cp] output
  int out_ch = 0;     // Cp: the last layer's channels as stored (a multiple of 4)
  int out_row = 0;    // bytes per output row (whole blocks)
  int out_bytes = 0;  // the band's rows * out_row, rounded up to 8
  int regions_end = 0;
  int add_scratch =
      0;  // 16 narrow words for a residual ADD's weight rows  // end of the two image regions
  int narrow_end = 0;
};

// The stages of the chain: each runs on its own tiles (bands of its last layer's output rows);
// between two stages every tile sends its band to the tiles of the next stage that need the rows
// (narrow memory to narrow memory over the ring).
struct Stage {
  size_t first = 0, end = 0;
  std::vector<Plan> tiles;
};

// Whole image rows per 256-byte input packet, an even number when a row is 4 bytes short of
// whole 8-byte units (the host streams 8-byte units).
int rows_per_packet(int row_bytes) {
  int rows = kPiece / row_bytes;
  if (row_bytes % 8 != 0) rows -= rows % 2;
  return rows;
}

// Whether the host's image can be streamed in whole 8-byte units, row pieces at a time.
bool input_streamable(const ConvLayer& l) {
  const int row_bytes = l.w * l.cin;
  if (row_bytes % 4 != 0) return false;
  if (row_bytes % 8 == 0) return true;
  return row_bytes <= kPiece && rows_per_packet(row_bytes) > 0 && l.h % 2 == 0;
}

// Channels per output pixel as a layer writes them.
int channels_stored(const ConvLayer& l, int block) {
  if (block > 1) return l.cout;
  return l.cout <= kColumns || l.cout % 4 == 0 ? round_up(l.cout, 4) : round_up(l.cout, kColumns);
}

int block_of(const ConvLayer& l) {
  int b = 1;
  while (b * l.stride_w * l.cin % 4 != 0) ++b;
  return b;
}

// A run of parameter rows loaded into wide row `base_row` of the tiles in `mask` at once: a
// contiguous range of the parameter stream (conv_parameters). Each group of segments takes turns
// in the same wide memory: the group's first is cached, the others are streamed with every
// inference. Groups whose tiles overlap sit at different base rows (stages sharing a tile keep
// their parameters side by side in its wide memory).
struct Segment {
  int rows = 0;
  int group = 0;
  bool first_of_group = false;
  uint32_t mask = 0;
  size_t offset = 0;  // bytes into the parameter stream
  int base_row = 0;
};

// The shapes every tile shares and, once the stages are known, the parameter parts.
struct Shapes {
  std::vector<LayerPlan> layers;
  std::vector<Segment> segments;
};

constexpr int kSegmentRows = kWideUnitsLimit / kRowUnits;

Shapes shapes_of(const ConvChain& chain) {
  Shapes s;
  for (const ConvLayer& l : chain.layers) {
    LayerPlan lp;
    lp.l = &l;
    lp.block = block_of(l);
    while ((l.pad_left + lp.extra) * l.cin % 4 != 0) ++lp.extra;
    lp.window_off = lp.extra * l.cin % 4;
    lp.window_words = (lp.window_off + ((lp.block - 1) * l.stride_w + l.kw) * l.cin + 3) / 4;
    lp.blocks = (l.ow + lp.block - 1) / lp.block;
    lp.kwords = l.kh * lp.window_words;
    lp.groups = (l.cout + kColumns - 1) / kColumns;
    if (l.depthwise) {
      lp.dw_words = std::min(l.cin, kColumns) / 4;
      lp.kwords = l.kh * l.kw * lp.dw_words;
    }
    lp.group_ch = lp.block > 1         ? lp.block * l.cout
                  : l.cout <= kColumns ? channels_stored(l, 1)
                                       : kColumns;
    lp.planes = l.bias.empty() ? 1 : 2;
    lp.shared_rows = l.depthwise && lp.groups > 1;
    for (size_t i = 0; i < l.weights.size() && lp.shared_rows; ++i)
      lp.shared_rows =
          l.weights[i] ==
          l.weights[i - i % static_cast<size_t>(l.cout) + i % static_cast<size_t>(kColumns)];
    s.layers.push_back(lp);
  }
  return s;
}

// The parameter parts: layers in order fill segments of up to kWideUnitsLimit units; a layer that
// does not fit the rest of a segment starts the next one, and a layer larger than a whole segment
// is split by groups over as many as it needs. `group_of[i]` is layer i's group of segments (a
// new group starts a new segment), `masks[g]` the tiles that hold group g and `bases[g]` the
// wide row its segments load at (parts' rows count from wide row 0). A layer split by output
// groups over `splits[i]` tiles has one part per tile, each the first segment of its own group
// (group_of[i] + t).
void assign_segments(Shapes& s, const std::vector<int>& group_of,
                     const std::vector<uint32_t>& masks, const std::vector<int>& bases,
                     const std::vector<int>& splits) {
  s.segments.clear();
  size_t offset = 0;
  for (size_t i = 0; i < s.layers.size(); ++i) {
    LayerPlan& lp = s.layers[i];
    lp.parts.clear();
    if (lp.l->residual()) continue;  // no parameters
    const int group = group_of[i];
    const int base = bases[static_cast<size_t>(group)];
    if (splits[i] > 1) {
      for (int t = 0; t < splits[i]; ++t) {
        const int g0 = lp.groups * t / splits[i], g1 = lp.groups * (t + 1) / splits[i];
        const auto own = static_cast<size_t>(group + t);
        s.segments.push_back(
            {lp.rows_of(g1 - g0), group + t, true, masks[own], offset, bases[own]});
        lp.parts.push_back({g0, g1, bases[own], static_cast<int>(s.segments.size()) - 1});
        offset += static_cast<size_t>(lp.rows_of(g1 - g0)) * kRowBytes;
      }
      continue;
    }
    for (int g = 0; g < lp.groups;) {
      const int left = lp.groups - g;
      if (s.segments.empty() || s.segments.back().group != group ||
          (s.segments.back().rows > 0 &&
           base + s.segments.back().rows + lp.rows_of(left) > kSegmentRows)) {
        const bool first = s.segments.empty() || s.segments.back().group != group;
        s.segments.push_back({0, group, first, masks[static_cast<size_t>(group)], offset, base});
      }
      Segment& seg = s.segments.back();
      int n = left;
      while (n > 1 && base + seg.rows + lp.rows_of(n) > kSegmentRows) --n;
      lp.parts.push_back({g, g + n, base + seg.rows, static_cast<int>(s.segments.size()) - 1});
      seg.rows += lp.rows_of(n);
      offset += static_cast<size_t>(lp.rows_of(n)) * kRowBytes;
      g += n;
    }
  }
}

// Tile `tile`'s plan of layers [first, end) computing output rows [y0, y1) of layer end - 1.
// `out_at_top`: the output goes to the next stage, so it sits at the top of narrow memory, out of
// the way of the next stage's images.
Plan plan_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end, int tile,
             int y0, int y1, bool out_at_top, bool full_input) {
  Plan p;
  p.tile = tile;
  p.y0 = y0;
  p.first = first;
  p.end = end;
  p.layers = shapes.layers;
  // The bands, from the stage's last layer back.
  int oa = y0, ob = y1;
  for (size_t i = end; i-- > first;) {
    const ConvLayer& l = chain.layers[i];
    LayerPlan& lp = p.layers[i];
    lp.oa = oa;
    lp.ob = ob;
    const int top = oa * l.stride_h - l.pad_top;
    const int bottom = (ob - 1) * l.stride_h - l.pad_top + l.kh;
    oa = std::max(top, 0);
    ob = std::min(bottom, l.h);
  }
  for (size_t i = first; i < end; ++i) {
    const ConvLayer& l = chain.layers[i];
    LayerPlan& lp = p.layers[i];
    lp.top = lp.oa * l.stride_h - l.pad_top;
    lp.hp = (lp.ob - 1) * l.stride_h - l.pad_top + l.kh - lp.top;
    lp.need_top = lp.top;
    lp.need_rows = lp.hp;
    if (i == first && full_input) {
      lp.full = true;
      lp.top = -l.pad_top;
      lp.hp = std::max((l.oh - 1) * l.stride_h + l.kh, l.h + l.pad_top);
    }
    // Rows 4 bytes past whole 8-byte units travel two to a packet (one tile): the first image
    // then keeps every row, also those no output reads (VALID), so that the pairs stay whole.
    if (i == 0 && l.w * l.cin % 8 != 0) lp.hp = std::max(lp.hp, l.h - lp.top);
    // Wide enough for the image, the extra pixels and the last block's window.
    const int window_end = lp.extra * l.cin - lp.window_off +
                           (lp.blocks - 1) * lp.block * l.stride_w * l.cin + 4 * lp.window_words;
    lp.wp = std::max(lp.extra + l.w + l.pad_left, (window_end + l.cin - 1) / l.cin);
    while (lp.wp * l.cin % 4 != 0) ++lp.wp;
    if (l.residual() && static_cast<size_t>(l.residual_of) >= first) {
      // A residual ADD's image takes its operand's geometry (the padded input of a 3x3 layer
      // in a ResNet block): one row pitch and one interior column for both, so the op reads
      // them with one offset.
      const LayerPlan& xp = p.layers.at(static_cast<size_t>(l.residual_of));
      lp.extra = xp.extra + xp.l->pad_left;
      lp.wp = xp.wp;
    }
  }
  // Two regions take turns: layer i reads its image from region i % 2 and writes the next one
  // into the other, which held image i - 1 (read by then); the images are filled just in time
  // (execution_program).
  // An image a residual ADD of the stage reads later is kept in one of two more regions (taking
  // turns, one per residual) until the ADD has run.
  std::vector<int> kept(p.layers.size(), -1);
  int kept_count = 0;
  for (size_t i = first; i < end; ++i) {
    const ConvLayer& l = chain.layers[i];
    if (l.residual() && static_cast<size_t>(l.residual_of) >= first)
      kept[static_cast<size_t>(l.residual_of)] = 2 + kept_count++ % 2;
  }
  auto region_of = [&](size_t i) {
    return kept[i] >= 0 ? kept[i] : static_cast<int>((i - first) % 2);
  };
  int region[4] = {0, 0, 0, 0};
  for (size_t i = first; i < end; ++i)
    region[region_of(i)] = std::max(region[region_of(i)], round_up(p.layers[i].in_bytes(), 64));
  const int region_base[4] = {0, region[0], region[0] + region[1],
                              region[0] + region[1] + region[2]};
  for (size_t i = first; i < end; ++i) p.layers[i].in_base = region_base[region_of(i)];
  p.regions_end = region_base[3] + region[3];
  p.add_scratch = p.regions_end;
  if (kept_count > 0) p.regions_end += 64;
  const LayerPlan& last = p.layers[end - 1];
  p.out_ch = channels_stored(*last.l, last.block);
  p.out_row = last.blocks * last.block * p.out_ch;
  p.out_bytes = round_up((last.ob - last.oa) * p.out_row, 8);
  p.out_base = out_at_top ? kNarrowBytes - round_up(p.out_bytes, 64) - 64 : p.regions_end;
  p.narrow_end = out_at_top ? kNarrowBytes : round_up(p.regions_end + p.out_bytes, 8) + 64;
  return p;
}

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
    t.pixel_bytes = n.l->cin;
    t.row_words = n.row_words();
  }
  return t;
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
  }
  void add(uint32_t tiles, const std::string& mnemonic, const std::string& fields) {
    for (Item& item : items_)
      if (item.mnemonic == mnemonic && item.fields == fields) {
        item.tiles |= tiles;
        return;
      }
    items_.push_back({tiles, mnemonic, fields});
  }

 private:
  struct Item {
    uint32_t tiles;
    std::string mnemonic, fields;
  };
  Emitter& e_;
  std::vector<Item> items_;
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

void stream_input(Emitter& e, const std::vector<Plan>& tiles) {
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
  auto mask_of = [&](int y) {
    uint32_t mask = 0;
    for (const Plan& t : tiles) {
      const LayerPlan& lp = t.layers.front();
      const int top = lp.full ? lp.need_top : lp.top, hp = lp.full ? lp.need_rows : lp.hp;
      if (y >= top && y < top + hp) mask |= tile_bit(t.tile);
    }
    return mask;
  };
  int piece = 0, rows = 1;
  for (int y = 0; y < l.h; y += rows) {
    uint32_t mask = mask_of(y);
    rows = 1;
    // Whole rows for the same tiles that make 2 to kHandOverPackets whole packets go in one
    // transfer (the hand-overs' multi-packet form: one FIFO row filled k times), within one pop
    // pass.
    int whole = 0;
    uint32_t together = mask;
    for (int m = 1;
         row_bytes % 8 == 0 && y + m <= l.h && m * row_bytes <= kHandOverPackets * kPiece &&
         (full || mask_of(y + m - 1) == mask);
         ++m) {
      together |= mask_of(y + m - 1);
      if (m * row_bytes % kPiece == 0 && m * row_bytes >= 2 * kPiece &&
          (y * row_bytes / 8) % kActPassUnits + m * row_bytes / 8 <= kActPassUnits) {
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
      const std::string packets = cat("(0 x ", bytes / kPiece, ")");
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
      image_infeed(e, offset, units, mask);
      continue;
    }
    while (rows < max_rows && y + rows < l.h && mask_of(y + rows) == mask) ++rows;
    if (mask == 0) continue;
    for (int at = 0; at < row_bytes; at += kPiece, ++piece) {
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
      image_infeed(e, offset, units, mask);
    }
  }
}

// One part of a layer: its multipliers (and biases) into the output stage, then the op over every
// output position and the part's groups.
void bias_load(Emitter& e, const LayerPlan& lp, int first_row, int groups, uint32_t tile) {
  const std::string level2 =
      groups > 1 ? cat("(", lp.planes == 2 ? -95 : 1, " x ", groups, ")") : "";
  e.add("w2n", cat("tiles=", hex(tile), " w.addr=", hex(first_row * kRowUnits), " w=(1 x ",
                   lp.planes * groups, ") w.lvl_mask=0x1 n=(1 x 32)(", lp.planes == 2 ? 33 : 1,
                   " x ", lp.planes == 2 ? 2 : 1, ")", level2,
                   " n.lvl_mask=0x03 mode=2 fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 "
                   "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 tail_en870=1"));
}

// The op fields every layer shares after its walks.
std::string op_tail(const LayerPlan& lp, int zp_unit, int out_ch, int last_ch = 0) {
  // A last group of fewer channels (MobileNet v2's 96, 144, 160) writes its words only and skips
  // the rest of its `out` group level (Google's out_ch_last / out.last_*, e.g. 31 and 8 words
  // skipped in gen2020 MobileNet v2).
  if (last_ch == 0) last_ch = out_ch;
  const std::string last_group = last_ch == out_ch
                                     ? ""
                                     : cat(" out.last_mode=3 out.last_cnt=", last_ch / 4 - 1,
                                           " out.last_skip=", out_ch / 4 - last_ch / 4);
  const ConvLayer& l = *lp.l;
  return cat(" cfg0=0x0a5 cfg1=0x14e sync0=0x4000 sync1=0x4000 cfg2=0x07 cfg3=8 in_zp=", l.in_zp,
             " pc_aux_unit=", hex(zp_unit), " pc_aux_rows=", lp.planes,
             " pc_zp_unit=", hex(zp_unit), l.bias.empty() ? "" : " cfg4=1", last_group,
             " dp_mode=2 reduce_mask=0x01 out_ch_last=", last_ch - 1, " out_ch=", out_ch - 1,
             " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(l.clamp_max),
             " clamp_min=", f32_bits(l.clamp_min), " out_zp=", l.out_zp, " pc_mult=1");
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
  // (The last group's words only, when the channels end before a whole group of 64.)
  const int words = std::min((g1 - g0) * lp.dw_words, l.cin / 4 - g0 * lp.dw_words);
  const std::string in_walk = strided_walk({{l.cin / 4, l.kw},
                                            {lp.row_words(), l.kh},
                                            {l.stride_w * l.cin / 4, lp.blocks},
                                            {int64_t{l.stride_h} * lp.row_words(), rows},
                                            {1, words}},
                                           8, " m3");
  const int in_base = lp.op_in(0) - lp.window_off + 4 * lp.dw_words * g0;
  const int par_row =
      lp.weight_row(part) + (lp.shared_rows ? 0 : (g0 - part.g0) * lp.dw_words * taps);
  const std::string par_walk = strided_walk({{1, taps}, {0, positions}, {taps, words}}, 8, " m1");
  const OutTarget t = out_target(p, i);
  const std::string out_walk = strided_walk(
      {{1, 1}, {t.pixel_bytes / 4, lp.blocks}, {t.row_words, rows}, {1, words}}, 8, " m3");
  e.add(tile_bit(p.tile), "op",
        cat("loops=(", taps, ")(", positions, ")(", words, ") in.base=", hex(in_base), " in=",
            in_walk, " in.tflags=0x01 out.base=", hex(t.base + kColumns * g0), " out=", out_walk,
            " out.tflags=0x1 par.base=", hex(par_row * kRowUnits), " par=", par_walk, " psum=(0 x ",
            taps, ")", op_tail(lp, lp.zp_row(part) * kRowUnits, 4)));
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
  const OutTarget t = out_target(p, i);
  const int group_words = lp.group_ch / 4;
  const std::string out_walk = strided_walk({{1, group_words},
                                             {lp.block * t.pixel_bytes / 4, lp.blocks},
                                             {t.row_words, rows},
                                             {kColumns / 4, groups}},
                                            8, " m3");
  const std::string loops = groups > 1 ? cat("(", lp.kwords, ")(", positions, ")(", groups, ")")
                                       : cat("(", lp.kwords, ")(", positions, ")");
  e.add(tile, "op",
        cat("loops=", loops, " in.base=", hex(lp.op_in(0) - lp.window_off), " in=", in_walk,
            " in.tflags=0x01 out.base=", hex(t.base + kColumns * (part.g0 - p.g0)),
            " out=", out_walk, " out.tflags=0x1 par.base=", hex(lp.weight_row(part) * kRowUnits),
            " par=", par_walk, " psum=(0 x ", lp.kwords, ")",
            op_tail(lp, lp.zp_row(part) * kRowUnits, lp.group_ch,
                    part.g1 == lp.groups && lp.groups > 1 && l.cout % kColumns != 0
                        ? round_up(l.cout % kColumns, 4)
                        : lp.group_ch)));
}

// A residual ADD on one tile: its input image (the layer before wrote it) plus the kept image,
// into the next layer's image (or the output), pixel by pixel over the tile's rows.
void residual_op(Emitter& e, const Plan& p, size_t i) {
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
  emit_add_op(e, tile_bit(p.tile), op, l.mult.at(0), l.clamp_min, l.clamp_max, l.add_offset,
              l.out_zp);
}

// The last layer's bytes to the host: 256-byte pieces through the ring to the scalar core.
// One tile's band of the last layer's output: 256-byte pieces through the ring to the scalar core.
void stream_tile_output(Emitter& e, const Plan& p, int& ordinal) {
  const uint32_t tile = tile_bit(p.tile);
  for (int at = 0; at < p.out_bytes; at += kRowBytes) {
    const int bytes = std::min(kRowBytes, p.out_bytes - at);
    e.add("n2w", cat("tiles=", hex(tile), " n.addr=", hex((p.out_base + at) / 4),
                     " n=", narrow_walk(bytes / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                     "tail_lvl=1"));
    e.add("outfeed", cat("walk=(0 x ", bytes / 8, ") k173=3 f222=0x7f"));
    ring_send(e, p.tile, kRingFifo, 0x10000, ordinal++);
  }
}

int output_bytes(const std::vector<Plan>& tiles) {
  int total = 0;
  for (const Plan& t : tiles) total += t.out_bytes;
  return total;
}

void stream_output(Emitter& e, const std::vector<Plan>& tiles, const std::string& output_name,
                   int& ordinal) {
  e.reloc_movi(10, BufferKind::kOutput, Half::kUpper32, output_name);
  e.reloc_movi(11, BufferKind::kOutput, Half::kLower32, output_name);
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  const int total = output_bytes(tiles);
  descriptor(e, 5, 4, 6, total, 3);
  for (const Plan& p : tiles) stream_tile_output(e, p, ordinal);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync",
        cat("tiles=0xffff smask=0x020 thr5=", (total + 31) / 32, " wait=0x020 sunits=0x0c"));
}

uint32_t tile_mask(const std::vector<Plan>& tiles) {
  uint32_t mask = 0;
  for (const Plan& t : tiles) mask |= tile_bit(t.tile);
  return mask;
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

uint32_t all_tiles(const std::vector<Stage>& stages) {
  uint32_t mask = 0;
  for (const Stage& s : stages) mask |= tile_mask(s.tiles);
  return mask;
}

// Between two stages: every tile of `from` sends its band of the stage's last output (rows of
// the next layer's input) to the tiles of `to` whose bands read the rows, piece by piece (up to
// 256 bytes of one row): a narrowToWide into the sender's ring row and a ring producer to all of
// them, a ring consumer into a FIFO row of its own and a wideToNarrow into the interior of the
// padded image on each receiver (the host image's form, stream_input).
void hand_over(Emitter& e, const Stage& from, const Stage& to, int& ordinal) {
  const size_t i = to.first;
  const int row_bytes = from.tiles.front().out_row;
  int piece = 0;
  auto mask_of = [&](int y) {
    uint32_t mask = 0;
    for (const Plan& t : to.tiles) {
      const LayerPlan& lp = t.layers[i];
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
  auto transfer = [&](const Plan& src, int from_at, int bytes, int packets, uint32_t mask,
                      const auto& narrow, const auto& walk) {
    if (piece > 0 && piece % kInputRows == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
    const int fifo = kInputFifo + 4 * (piece++ % kInputRows);
    const std::string rows = cat("(0 x ", packets, ")");
    {
      TileBatch writes(e);
      for (const Plan& t : to.tiles) {
        if (!(mask & tile_bit(t.tile))) continue;
        if (packets >= 2)
          writes.add(tile_bit(t.tile), "w2n",
                     cat("w.addr=", hex(fifo), " w=", rows, " w.rows=1 n.addr=", hex(narrow(t) / 4),
                         " n=", walk(t),
                         " n.lvl_mask=0x01 sync.en0=1 sync.id=14 sync.en1=1 "
                         "sync.val=0x08000 sync.en2=1 tail_en870=1"));
        else
          writes.add(
              tile_bit(t.tile), "w2n",
              cat("w.addr=", hex(fifo), " w=(1 x 1) n.addr=", hex(narrow(t) / 4), " n=", walk(t),
                  " n.lvl_mask=0x01 mode=1 fill_size=128 sync.en0=1 sync.id=14 "
                  "sync.wait_lvl=1 sync.en1=1 sync.val=0x08000 sync.en2=1 "
                  "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 tail_en870=1"));
      }
    }
    if (packets >= 2) {
      e.add("ringcons0", cat("tiles=", hex(mask), " addr=", hex(fifo), " dst=", rows,
                             " slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
      e.add("ringprod",
            cat("tiles=", hex(tile_bit(src.tile)), " addr=", hex(kRingFifo), " src=(1 x 1)", rows,
                " sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", ordinal++,
                " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 dest=", hex(mask)));
      e.add("n2w", cat("tiles=", hex(tile_bit(src.tile)), " n.addr=", hex(from_at / 4),
                       " n=", narrow_walk(bytes / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                       " w=", rows,
                       " w.rows=1 sync.en0=1 sync.id=16 sync.en1=1 sync.val=0x0ffff "
                       "sync.en2=1 sync.f45=1 tail_lvl=1"));
      return;
    }
    ring_receive(e, mask, fifo, 1, -64);
    e.add("n2w", cat("tiles=", hex(tile_bit(src.tile)), " n.addr=", hex(from_at / 4),
                     " n=", narrow_walk(bytes / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                     " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                     "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                     "tail_lvl=1"));
    ring_send(e, src.tile, kRingFifo, mask, ordinal++);
  };
  for (const Plan& src : from.tiles) {
    const LayerPlan& band = src.layers[i - 1];
    for (int y = band.oa, rows = 1; y < band.ob; y += rows) {
      uint32_t mask = mask_of(y);
      // Several whole rows for the same tiles (contiguous in the sender's output) go in one
      // transfer when they make 2 to kHandOverPackets whole packets, or, short rows, fit one
      // packet; each receiver drops them into its image's rows with a 2-level walk.
      rows = 1;
      int packets = 0;
      uint32_t together = mask;
      for (int m = 2; y + m <= band.ob && m * row_bytes <= kHandOverPackets * kPiece &&
                      (full || mask_of(y + m - 1) == mask);
           ++m) {
        together |= mask_of(y + m - 1);
        if (m * row_bytes % kPiece == 0 && m * row_bytes >= 2 * kPiece) {
          rows = m;
          packets = m * row_bytes / kPiece;
          mask = together;
        } else if (packets == 0 && m * row_bytes <= kPiece) {
          rows = m;
          packets = 1;
          mask = together;
        }
      }
      if (mask == 0) continue;
      const int from_at = src.out_base + (y - band.oa) * src.out_row;
      if (rows > 1) {
        transfer(
            src, from_at, rows * row_bytes, packets, mask,
            [&](const Plan& t) {
              const LayerPlan& lp = t.layers[i];
              return lp.pixel(y - lp.top, lp.l->pad_left);
            },
            [&](const Plan& t) {
              return strided_walk({{1, row_bytes / 4}, {t.layers[i].row_words(), rows}}, 6);
            });
        continue;
      }
      // One row: whole 256-byte packets up to kHandOverPackets at a time, the rest of the row
      // as one short packet.
      for (int at = 0, bytes = 0; at < row_bytes; at += bytes) {
        const int whole = std::min(kHandOverPackets, (row_bytes - at) / kPiece);
        bytes = whole >= 2 ? whole * kPiece : std::min(kPiece, row_bytes - at);
        transfer(
            src, from_at + at, bytes, whole >= 2 ? whole : 1, mask,
            [&](const Plan& t) {
              const LayerPlan& lp = t.layers[i];
              return lp.pixel(y - lp.top, lp.l->pad_left) + at;
            },
            [&](const Plan& t) {
              return whole >= 2 ? narrow_walk(bytes / 4)
                                : strided_walk({{1, bytes / 4}, {t.layers[i].row_words(), 1}}, 6);
            });
      }
    }
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// The execution program; `loads` receives the segments it streams and how many of their first
// rows, in order (its parameters).
container::Bitstream execution_program(const ConvChain& chain, const Shapes& shapes,
                                       const std::vector<Stage>& stages,
                                       std::vector<std::pair<int, int>>& loads) {
  Emitter e;
  preamble(e, chain.input_name);
  auto stage_of = [&](size_t i) -> const Stage& {
    for (const Stage& s : stages)
      if (i >= s.first && i < s.end) return s;
    return stages.back();
  };
  // Padded images hold their zero point wherever the layer before does not write: a stage's first
  // two before its input arrives, image i + 1 once layer i - 1 has read the region it reuses.
  auto fill_image = [&](size_t i) {
    TileBatch fills(e);
    for (const Plan& p : stage_of(i).tiles) {
      const LayerPlan& lp = p.layers[i];
      if (lp.needs_fill()) fill_narrow(fills, p.tile, lp.in_base, lp.in_bytes(), lp.l->in_zp);
    }
  };
  auto fill_stage = [&](const Stage& s) {
    for (size_t i = s.first; i < std::min(s.first + 2, s.end); ++i) fill_image(i);
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
  std::vector<int> resident, dirty;
  for (size_t k = 0; k < shapes.segments.size(); ++k)
    if (shapes.segments[k].first_of_group) resident.push_back(static_cast<int>(k));
  dirty.assign(resident.size(), 0);
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
  for (size_t si = 0; si < stages.size(); ++si) {
    const Stage& stage = stages[si];
    if (si > 0) {
      fill_stage(stage);
      hand_over(e, stages[si - 1], stage, ordinal);
      tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
      wait_tokens(e);
    }
    for (size_t i = stage.first; i < stage.end; ++i) {
      const LayerPlan& lp = shapes.layers[i];
      if (i >= stage.first + 1 && i + 1 < stage.end) {
        fill_image(i + 1);
        tile_fence(e, "counters=0x1ffff units=0x3ff");
      }
      if (lp.l->residual()) {
        // Tiles whose scratch words sit at one address build the weight rows together.
        std::vector<std::pair<int, uint32_t>> scratch;
        for (const Plan& p : stage.tiles) {
          if (scratch.empty() || scratch.back().first != p.add_scratch)
            scratch.push_back({p.add_scratch, 0});
          scratch.back().second |= tile_bit(p.tile);
        }
        for (const auto& [at, mask] : scratch)
          emit_add_rows(e, mask, at, kAddRows, lp.l->add_w1, lp.l->add_w2);
        for (const Plan& p : stage.tiles) residual_op(e, p, i);
        tile_fence(e, "counters=0x1ffff units=0x3ff");
        tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
        wait_tokens(e);
        continue;
      }
      for (const Part& part : lp.parts) {
        // The part's segment once the layers before have run.
        const Segment& seg = shapes.segments[static_cast<size_t>(part.segment)];
        if (resident[static_cast<size_t>(seg.group)] != part.segment) load(part.segment, seg.rows);
        // The tiles that compute the part: all of the stage's, or the one that holds its groups
        // (a layer split by output groups).
        std::vector<const Plan*> runs;
        uint32_t mask = 0;
        for (const Plan& p : stage.tiles)
          if (p.g1 == 0 || (part.g0 >= p.g0 && part.g1 <= p.g1)) {
            runs.push_back(&p);
            mask |= tile_bit(p.tile);
          }
        if (lp.l->depthwise && lp.shared_rows) {
          // The multipliers of each 64-channel group in turn (the op reads them from the start
          // of the store), the shared rows for all of them.
          for (int g = part.g0; g < part.g1; ++g) {
            bias_load(e, lp, part.row + (g - part.g0) * lp.planes, 1, mask);
            {
              TileBatch ops(e);
              for (const Plan* p : runs) depthwise_op(ops, *p, i, part, g, g + 1);
            }
            if (g + 1 < part.g1) tile_fence(e, "counters=0x1ffff units=0x3ff");
          }
        } else {
          bias_load(e, lp, part.row, part.g1 - part.g0, mask);
          TileBatch ops(e);
          for (const Plan* p : runs)
            if (lp.l->depthwise)
              depthwise_op(ops, *p, i, part, part.g0, part.g1);
            else
              layer_op(ops, *p, i, part);
        }
        tile_fence(e, "counters=0x1ffff units=0x3ff");
        tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
        wait_tokens(e);
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
  stream_output(e, stages.back().tiles, chain.output_name, ordinal);
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
  return e.finish();
}

// Tiles of a stage: its last layer's output rows split as evenly as possible over up to
// `max_tiles` tiles from `tile0` on (one tile when the host's rows must travel two to a packet).
Stage stage_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end,
               int tile0 = 0, int max_tiles = kTiles) {
  const int oh = chain.layers[end - 1].oh;
  const ConvLayer& l0 = chain.layers[first];
  const int count = first == 0 && l0.w * l0.cin % 8 != 0 ? 1 : std::min(max_tiles, oh);
  Stage s;
  s.first = first;
  s.end = end;
  const bool last = end == chain.layers.size();
  // Every tile keeps the whole first image when it fits (not in chains with
  // residual ADDs, whose kept images take their operand's geometry).
  bool full = count > 1;
  for (const ConvLayer& l : chain.layers) full = full && !l.residual();
  for (int pass = full ? 0 : 1; pass < 2; ++pass) {
    s.tiles.clear();
    for (int t = 0; t < count; ++t)
      s.tiles.push_back(plan_of(chain, shapes, first, end, tile0 + t, oh * t / count,
                                oh * (t + 1) / count, !last, pass == 0));
    bool fits = true;
    for (const Plan& t : s.tiles)
      fits = fits && t.narrow_end <= kNarrowBytes && t.regions_end <= t.out_base;
    if (fits) break;
  }
  return s;
}

// Whether a stage fits narrow memory on each of its tiles, next to the output of the stage before
// (which waits at the top of narrow memory for the hand-over).
bool stage_fits(const Stage& s, const Stage* before) {
  for (const Plan& t : s.tiles) {
    if (t.narrow_end > kNarrowBytes || t.regions_end > t.out_base) return false;
    if (before)
      for (const Plan& b : before->tiles)
        if (b.tile == t.tile && t.regions_end > b.out_base) return false;
  }
  return true;
}

// How much longer a stage computes than its MACs spread evenly over its tiles would take: the
// busiest tile's rows of each layer (halos included) against the layer's rows over the tiles,
// weighted by the layer's MACs per output row.
double stage_overhead(const ConvChain& chain, const Stage& s) {
  double busiest = 0, even = 0;
  for (size_t i = s.first; i < s.end; ++i) {
    const ConvLayer& l = chain.layers[i];
    const double per_row =
        double(l.ow) * l.kh * l.kw * (l.depthwise ? l.cout : double(l.cin) * l.cout);
    int rows = 0;
    for (const Plan& t : s.tiles) rows = std::max(rows, t.layers[i].ob - t.layers[i].oa);
    busiest += rows * per_row;
    even += double(l.oh) * per_row / static_cast<double>(s.tiles.size());
  }
  return even > 0 ? busiest / even : 1;
}

// The stages: the whole chain on the tiles of its last layer's rows when that fits (a chain ending
// in a small map runs on few tiles); otherwise, from the first layer on, each stage as long as it
// still fits - and, with `capped`, as long as its tiles recompute at most kMaxStageOverhead times
// the even share (bands a row or two high recompute their halos through every layer before
// them) - then the next.
constexpr double kMaxStageOverhead = 1.5;

// Whether a stage ending before layer `e` would cut a residual block (its ADD after the cut, the
// image it keeps before).
bool cuts_a_residual(const ConvChain& chain, size_t e) {
  for (size_t i = e; i < chain.layers.size(); ++i)
    if (chain.layers[i].residual() && static_cast<size_t>(chain.layers[i].residual_of) < e)
      return true;
  return false;
}

std::vector<Stage> placement(const ConvChain& chain, const Shapes& shapes, bool capped) {
  const size_t n = chain.layers.size();
  std::vector<Stage> stages{stage_of(chain, shapes, 0, n)};
  if (stage_fits(stages.front(), nullptr)) return stages;
  stages.clear();
  for (size_t first = 0; first < n;) {
    const Stage* before = stages.empty() ? nullptr : &stages.back();
    size_t end = 0, fitting = first + 1;
    for (size_t e = n; e > first + 1 && end == 0; --e) {
      if (e < n && cuts_a_residual(chain, e)) continue;
      const Stage s = stage_of(chain, shapes, first, e);
      if (!stage_fits(s, before)) continue;
      if (fitting == first + 1) fitting = e;
      if (!capped || stage_overhead(chain, s) <= kMaxStageOverhead) end = e;
    }
    if (end == 0) end = fitting;
    stages.push_back(stage_of(chain, shapes, first, end));
    first = end;
  }
  return stages;
}

// Parameters resident across tiles: when the stages fit the 16 tiles side by side, each stage
// gets tiles of its own and keeps its layers' parameters there (cached once); a one-tile stage
// whose parameters exceed one wide memory is cut into one-tile stages at layer boundaries while
// tiles remain, each handing over to the next (a pipeline over the tiles). Otherwise every tile
// of the chain holds every segment in turn. Returns whether the stages have tiles of their own.
bool spread_over_tiles(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages) {
  int used = 0;
  for (const Stage& s : stages) used += static_cast<int>(s.tiles.size());
  if (used > kTiles) return false;
  std::vector<std::pair<size_t, size_t>> cuts;  // [first, end) of each stage, one-tile ones cut
  std::vector<int> counts;
  for (const Stage& s : stages) {
    if (s.tiles.size() != 1) {
      cuts.push_back({s.first, s.end});
      counts.push_back(static_cast<int>(s.tiles.size()));
      continue;
    }
    for (size_t a = s.first; a < s.end;) {
      size_t b = a + 1;
      int rows = shapes.layers[a].rows();
      while (b < s.end &&
             (rows + shapes.layers[b].rows() <= kSegmentRows || cuts_a_residual(chain, b)))
        rows += shapes.layers[b++].rows();
      if (b < s.end && used >= kTiles) b = s.end;  // no tile left: the rest streams here
      if (b < s.end) ++used;
      cuts.push_back({a, b});
      counts.push_back(1);
      a = b;
    }
  }
  std::vector<Stage> spread;
  int tile0 = 0;
  for (size_t k = 0; k < cuts.size(); ++k) {
    spread.push_back(stage_of(chain, shapes, cuts[k].first, cuts[k].second, tile0, counts[k]));
    if (static_cast<int>(spread.back().tiles.size()) != counts[k] ||
        !stage_fits(spread.back(), k > 0 ? &spread[k - 1] : nullptr))
      return false;
    tile0 += counts[k];
  }
  stages = std::move(spread);
  return true;
}

// The parameter stream (conv_parameters) of a layout's shapes and parts.
std::vector<uint8_t> parameters_of(const Shapes& shapes);

// Everything the programs are generated from: shapes, stages and parameter segments.
struct Layout {
  Shapes shapes;
  std::vector<Stage> stages;
};

// Every stage's parameters resident at once, stages sharing tiles where they must: one-tile
// stages whose parameters exceed one wide memory are first cut at layer boundaries into one-tile
// stages (a pipeline), and a last layer of one output pixel (a classifier) that still exceeds one
// is split by output groups over as many tiles as it needs (each computes its groups with its own
// rows, the host reads their outputs one after another); then each stage, largest parameters
// first, takes the run of tiles whose wide memory is least used and keeps its rows above what is
// there (`bases`: per stage, its first wide row, one per tile when split). Stages run one after
// another, so a tile's narrow memory serves every stage it is in. Returns false (and leaves
// `stages` alone) when some stage's parameters cannot stay.
bool share_tiles(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages,
                 std::vector<std::vector<int>>& bases) {
  std::vector<std::pair<size_t, size_t>> cuts;  // [first, end) of each stage, one-tile ones cut
  std::vector<int> counts, splits;
  auto rows_of = [&](size_t a, size_t b) {
    int n = 0;
    for (size_t i = a; i < b; ++i) n += shapes.layers[i].rows();
    return n;
  };
  for (const Stage& s : stages) {
    if (s.tiles.size() != 1) {
      cuts.push_back({s.first, s.end});
      counts.push_back(static_cast<int>(s.tiles.size()));
      continue;
    }
    for (size_t a = s.first; a < s.end;) {
      size_t b = a + 1;
      while (b < s.end && (rows_of(a, b + 1) <= kSegmentRows || cuts_a_residual(chain, b))) ++b;
      cuts.push_back({a, b});
      counts.push_back(1);
      a = b;
    }
  }
  // Allocation items: a stage's run of tiles, or one tile of a split layer with its groups.
  struct Item {
    size_t cut = 0;
    int count = 0, rows = 0, tile0 = 0, base = 0;
  };
  std::vector<Item> items;
  for (size_t k = 0; k < cuts.size(); ++k) {
    const auto [a, b] = cuts[k];
    const LayerPlan& lp = shapes.layers[a];
    const ConvLayer& l = *lp.l;
    int split = 1;
    if (rows_of(a, b) > kSegmentRows && b == a + 1 && b == chain.layers.size() && !l.depthwise &&
        !l.residual() && l.oh == 1 && l.ow == 1 && lp.block == 1 && lp.groups > 1)
      while (split < std::min(lp.groups, kTiles) &&
             lp.rows_of((lp.groups + split - 1) / split) > kSegmentRows)
        ++split;
    splits.push_back(split);
    for (int t = 0; t < split; ++t) {
      const int g0 = lp.groups * t / split, g1 = lp.groups * (t + 1) / split;
      items.push_back({k, counts[k], split > 1 ? lp.rows_of(g1 - g0) : rows_of(a, b)});
    }
  }
  std::vector<size_t> order(items.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return items[x].rows > items[y].rows; });
  std::vector<int> used(kTiles, 0);
  std::vector<std::vector<int>> taken(cuts.size());  // tiles of a split layer so far
  for (size_t k : order) {
    Item& it = items[k];
    int best = -1, best_used = 0;
    for (int t = 0; t + it.count <= kTiles; ++t) {
      if (std::find(taken[it.cut].begin(), taken[it.cut].end(), t) != taken[it.cut].end()) continue;
      const int top = *std::max_element(used.begin() + t, used.begin() + t + it.count);
      if (best < 0 || top < best_used) best = t, best_used = top;
    }
    if (best < 0 || best_used + it.rows > kSegmentRows) return false;
    it.tile0 = best;
    it.base = best_used;
    taken[it.cut].push_back(best);
    for (int t = best; t < best + it.count; ++t) used[static_cast<size_t>(t)] = best_used + it.rows;
  }
  std::vector<Stage> shared;
  std::vector<std::vector<int>> base(cuts.size());
  for (size_t k = 0, at = 0; k < cuts.size(); at += static_cast<size_t>(splits[k++])) {
    if (splits[k] == 1) {
      shared.push_back(
          stage_of(chain, shapes, cuts[k].first, cuts[k].second, items[at].tile0, counts[k]));
      base[k] = {items[at].base};
    } else {
      // The split layer's tiles in tile order hold its groups in order (the output's order).
      std::vector<std::pair<int, int>> tiles;  // tile, base
      for (int t = 0; t < splits[k]; ++t)
        tiles.push_back(
            {items[at + static_cast<size_t>(t)].tile0, items[at + static_cast<size_t>(t)].base});
      std::sort(tiles.begin(), tiles.end());
      Stage s = stage_of(chain, shapes, cuts[k].first, cuts[k].second, 0, 1);
      const Plan one = s.tiles.front();
      const LayerPlan& lp = one.layers[cuts[k].first];
      s.tiles.clear();
      for (int t = 0; t < splits[k]; ++t) {
        Plan p = one;
        p.tile = tiles[static_cast<size_t>(t)].first;
        p.g0 = lp.groups * t / splits[k];
        p.g1 = lp.groups * (t + 1) / splits[k];
        p.out_ch = (p.g1 - p.g0) * kColumns;
        p.out_row = p.out_ch;
        p.out_bytes = p.out_ch;
        s.tiles.push_back(std::move(p));
        base[k].push_back(tiles[static_cast<size_t>(t)].second);
      }
      shared.push_back(std::move(s));
    }
    if (static_cast<int>(shared.back().tiles.size()) != counts[k] * splits[k] ||
        !stage_fits(shared.back(), k > 0 ? &shared[k - 1] : nullptr))
      return false;
  }
  stages = std::move(shared);
  bases = std::move(base);
  return true;
}

// Modeled cycles of the layers' ops (the clock's rates, src/chip/clock.h: 72 weight bytes and 4
// loop steps a cycle, 32 to start an op): per stage its busiest tile, the stages one after another.
double compute_cycles(const std::vector<Stage>& stages) {
  double total = 0;
  for (const Stage& s : stages) {
    double busiest = 0;
    for (const Plan& t : s.tiles) {
      double cycles = 0;
      for (size_t i = s.first; i < s.end; ++i) {
        const LayerPlan& lp = t.layers[i];
        const ConvLayer& l = *lp.l;
        const double positions = double(lp.ob - lp.oa) * lp.blocks;
        double steps = 0, macs = 0;
        if (l.residual()) {
          steps = positions * l.cin / 4;
        } else if (l.depthwise) {
          steps = positions * l.kh * l.kw * (l.cin / 4);
          macs = steps * 16;
        } else {
          steps = positions * lp.kwords * (t.g1 > 0 ? t.g1 - t.g0 : lp.groups);
          macs = steps * lp.group_ch * 4;
        }
        cycles += std::max(macs / 72, steps / 4) + 32.0 * double(t.g1 > 0 ? 1 : lp.parts.size());
      }
      busiest = std::max(busiest, cycles);
    }
    total += busiest;
  }
  return total;
}

// Stages chosen for the least modeled time (shortest paths over the cut points), each in row bands
// over 1, 2, 4, 8 or 16 tiles: a stage costs its busiest tile's compute, `per_instruction` cycles
// (an instruction's bytes over USB, about 70) per instruction that brings its input rows - one per
// row piece and receiving tile, three more per piece - and `per_row` cycles per wide row of
// parameters it keeps on each of its tiles (the wide memory all stages share: the larger, the
// fewer tiles a stage with many parameters takes). One list of stages per pair of weights.
std::vector<std::vector<Stage>> fastest_stages(
    const ConvChain& chain, const Shapes& shapes,
    const std::vector<std::pair<double, double>>& weights) {
  const size_t n = chain.layers.size();
  constexpr double kInf = 1e300;
  constexpr int kCounts[] = {1, 2, 4, 8, 16};
  struct Option {
    size_t a = 0;
    int tiles = 0;
    double cycles = 0, instructions = 0, rows = 0;
  };
  std::vector<std::vector<Option>> into(n + 1);  // the stages ending at each cut
  for (size_t b = 1; b <= n; ++b) {
    if (b < n && cuts_a_residual(chain, b)) continue;
    for (size_t a = 0; a < b; ++a) {
      int rows = 0;
      for (size_t i = a; i < b; ++i) rows += shapes.layers[i].rows();
      int last = 0;
      for (const int count : kCounts) {
        const Stage s = stage_of(chain, shapes, a, b, 0, count);
        const int tiles = static_cast<int>(s.tiles.size());
        if (tiles == last) break;
        last = tiles;
        if (!stage_fits(s, nullptr)) continue;
        const ConvLayer& l = chain.layers[a];
        const double pieces =
            std::ceil(double(l.w) * l.cin / (a == 0 ? kPiece : kHandOverPackets * kPiece));
        double received = 0;
        for (const Plan& t : s.tiles) received += t.layers[a].need_rows;
        into[b].push_back(
            {a, tiles, compute_cycles({s}), pieces * (received + 3.0 * l.h), double(rows) * tiles});
      }
    }
  }
  std::vector<std::vector<Stage>> lists;
  for (const auto& [per_instruction, per_row] : weights) {
    std::vector<double> best(n + 1, kInf);
    std::vector<Option> via(n + 1);
    best[0] = 0;
    for (size_t b = 1; b <= n; ++b)
      for (const Option& o : into[b]) {
        const double cost =
            best[o.a] + o.cycles + per_instruction * o.instructions + per_row * o.rows;
        if (best[o.a] < kInf && cost < best[b]) best[b] = cost, via[b] = o;
      }
    if (best[n] >= kInf) continue;
    std::vector<Stage> stages;
    for (size_t b = n; b > 0; b = via[b].a)
      stages.insert(stages.begin(), stage_of(chain, shapes, via[b].a, b, 0, via[b].tiles));
    lists.push_back(std::move(stages));
  }
  return lists;
}

// The stages' parameter groups: one per stage at `bases` when the stages keep their parameters
// (`own_tiles`), else one for the whole chain on every tile it uses, its segments in turn.
void group_parameters(const ConvChain& chain, Layout& out, bool own_tiles,
                      const std::vector<std::vector<int>>& bases) {
  std::vector<int> group_of(chain.layers.size(), 0), splits(chain.layers.size(), 1);
  std::vector<uint32_t> masks{all_tiles(out.stages)};
  std::vector<int> group_bases{0};
  if (own_tiles) {
    masks.clear();
    group_bases.clear();
    for (size_t k = 0; k < out.stages.size(); ++k) {
      const Stage& s = out.stages[k];
      for (size_t i = s.first; i < s.end; ++i) group_of[i] = static_cast<int>(masks.size());
      if (s.tiles.front().g1 > 0) {
        // A layer split by output groups: a group of parameters per tile.
        splits[s.first] = static_cast<int>(s.tiles.size());
        for (size_t t = 0; t < s.tiles.size(); ++t) {
          masks.push_back(tile_bit(s.tiles[t].tile));
          group_bases.push_back(bases.at(k).at(t));
        }
        continue;
      }
      masks.push_back(tile_mask(s.tiles));
      group_bases.push_back(bases.empty() ? 0 : bases[k].front());
    }
  }
  assign_segments(out.shapes, group_of, masks, group_bases, splits);
}

// Modeled cycles of one inference of a layout: the ops' compute, and its instructions and
// streamed parameters over USB (330 MB/s at 250 MHz: 0.76 cycles a byte).
double modeled_cycles(const ConvChain& chain, const Layout& layout) {
  std::vector<std::pair<int, int>> loads;
  const container::Bitstream program =
      execution_program(chain, layout.shapes, layout.stages, loads);
  double bytes = double(program.data.size());
  for (const auto& [segment, rows] : loads) bytes += double(rows) * kRowBytes;
  return compute_cycles(layout.stages) + bytes * 250.0 / 330.0;
}

// The stages' first images back in bands (LayerPlan::full off): each tile keeps only the rows its
// band reads, in the same place, so its image region stays large enough.
void in_bands(std::vector<Stage>& stages) {
  for (Stage& s : stages)
    for (Plan& p : s.tiles) {
      LayerPlan& lp = p.layers[s.first];
      if (!lp.full) continue;
      lp.full = false;
      lp.top = lp.need_top;
      lp.hp = lp.need_rows;
    }
}

Layout make_layout(const ConvChain& chain) {
  Layout out;
  out.shapes = shapes_of(chain);
  // The longest stages first: fewer stages keep the parameters resident more often. When they
  // cannot, shorter stages that recompute less (the parameters stream either way).
  out.stages = placement(chain, out.shapes, false);
  bool spread = spread_over_tiles(chain, out.shapes, out.stages);
  if (!spread && out.stages.size() > 1) {
    out.stages = placement(chain, out.shapes, true);
    spread = spread_over_tiles(chain, out.shapes, out.stages);
  }
  group_parameters(chain, out, spread, {});
  // (No placement keeps every parameter when they exceed all wide memory, or a layer share_tiles
  // cannot split exceeds one tile's: skip the search, MobileNet v1 1.0 and v2.)
  int total_rows = 0;
  for (size_t i = 0; i < chain.layers.size(); ++i) {
    const LayerPlan& lp = out.shapes.layers[i];
    total_rows += lp.rows();
    const ConvLayer& l = *lp.l;
    const bool splittable = i + 1 == chain.layers.size() && l.oh == 1 && l.ow == 1 && !l.depthwise;
    if (lp.rows() > kSegmentRows && !splittable) return out;
  }
  if (total_rows > kTiles * kSegmentRows) return out;
  // Placements that keep every parameter resident with stages sharing tiles - among them stages
  // in row bands over many tiles where the maps are large, even when the whole chain would fit
  // one tile - replace it when the model of their time says they are faster.
  // Candidates: the fastest stages for a range of weights on parameter rows, and the placements
  // above with every parameter resident; the three of least compute are modeled whole (their
  // instructions generated) and replace the layout above when faster.
  std::vector<std::pair<double, Layout>> candidates;
  std::vector<std::pair<double, double>> weights;
  for (const double per_instruction : {60.0, 140.0})
    for (const double per_row : {0.0, 1.0, 4.0, 16.0, 64.0, 256.0})
      weights.push_back({per_instruction, per_row});
  std::vector<std::vector<Stage>> lists = fastest_stages(chain, out.shapes, weights);
  for (const bool capped : {false, true}) lists.push_back(placement(chain, out.shapes, capped));
  for (std::vector<Stage>& stages : lists) {
    Layout candidate;
    candidate.shapes = shapes_of(chain);
    candidate.stages = std::move(stages);
    std::vector<std::vector<int>> bases;
    if (candidate.stages.empty() || !share_tiles(chain, candidate.shapes, candidate.stages, bases))
      continue;
    group_parameters(chain, candidate, true, bases);
    candidates.push_back({compute_cycles(candidate.stages), std::move(candidate)});
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (candidates.size() > 6) candidates.resize(6);
  double best = candidates.empty() ? 0 : modeled_cycles(chain, out);
  for (auto& [compute, candidate] : candidates) {
    // Each also with its stages' first images in bands: whole images share halo rows in fewer
    // transfers, but give every tile an op of its own for the stage's first layer.
    Layout banded = candidate;
    in_bands(banded.stages);
    for (Layout* layout : {&candidate, &banded}) {
      const double cycles = modeled_cycles(chain, *layout);
      if (cycles < best) {
        best = cycles;
        out = std::move(*layout);
      }
    }
  }
  return out;
}

// The first segment of every group into its tiles' wide memory, once.
container::Bitstream caching_program(const Shapes& shapes) {
  Emitter e;
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
  interrupt(e, 3, 2, 4);
  return e.finish();
}

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
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
    if (j < s.first) return "a residual block split over two stages (not generated yet)";
    for (const Plan& t : s.tiles) {
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
    if (l.residual()) {
      if (const std::string why = residual_shape_unsupported(chain, i); !why.empty()) return why;
      continue;
    }
    const int block = block_of(l);
    if (block > 1 && (block * l.cout > kColumns || block * l.cout % 4 != 0))
      return cat("CONV_2D with ", l.cin, " input channels, stride ", l.stride_w, " and ", l.cout,
                 " output channels (", block, " x Cout must be a multiple of 4 up to 64 yet)");
    if (block > 1 && i + 1 < chain.layers.size() && l.ow % block != 0)
      return "a CONV_2D inside a chain whose output width is not a whole number of blocks";
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
  layout = make_layout(chain);
  for (size_t i = 0; i < chain.layers.size(); ++i)
    if (chain.layers[i].residual())
      if (const std::string why = residual_unsupported(chain, i, layout); !why.empty()) return why;
  for (const LayerPlan& lp : layout.shapes.layers)
    for (const Part& part : lp.parts)
      if (lp.rows_of(part.g1 - part.g0) * kRowUnits > kWideUnitsLimit)
        return cat("one 64-channel group of a layer needs ", lp.rows_of(1) * kRowBytes,
                   " bytes of wide memory (", kWideUnitsLimit * 64, ")");
  const std::vector<Stage>& stages = layout.stages;
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
  return parameters_of(make_layout(chain).shapes);
}

namespace {

std::vector<uint8_t> parameters_of(const Shapes& p) {
  std::vector<uint8_t> out;
  size_t rows = 0;
  for (const Segment& seg : p.segments) rows += static_cast<size_t>(seg.rows);
  out.reserve(rows * kRowBytes);
  for (const LayerPlan& lp : p.layers)
    for (const Part& part : lp.parts) {
      const ConvLayer& l = *lp.l;
      // Column c of group g: output channel oc of block pixel r.
      auto column = [&](int g, int c, int& oc, int& r) {
        r = lp.block > 1 ? c / l.cout : 0;
        oc = lp.block > 1 ? c % l.cout : g * kColumns + c;
        return c < lp.group_ch && oc < l.cout;
      };
      int oc = 0, r = 0;
      for (int g = part.g0; g < part.g1; ++g) {
        for (int c = 0; c < kColumns; ++c) {
          const bool real = column(g, c, oc, r);
          put32(out, std::bit_cast<uint32_t>(real ? l.mult[static_cast<size_t>(oc)] : 0.0f));
        }
        for (int c = 0; c < kColumns && !l.bias.empty(); ++c) {
          const bool real = column(g, c, oc, r);
          put32(out, static_cast<uint32_t>(real ? l.bias[static_cast<size_t>(oc)] : 0));
        }
      }
      for (int c = 0; c < kColumns; ++c) put32(out, static_cast<uint32_t>(l.weight_zp));
      if (l.depthwise) {
        // Row (group, word j, ky, kx): the 4x4 diagonal of word j - column b holds the tap's
        // weight of channel 64 group + 4 j + b at byte b - and the weight zero point everywhere
        // else (columns 4..63 are not read: the op's groups are 4 channels wide).
        for (int g = part.g0; g < (lp.shared_rows ? part.g0 + 1 : part.g1); ++g)
          for (int j = 0; j < lp.dw_words; ++j)
            for (int ky = 0; ky < l.kh; ++ky)
              for (int kx = 0; kx < l.kw; ++kx)
                for (int c = 0; c < kColumns; ++c) {
                  const int channel = g * kColumns + 4 * j + c;
                  for (int b = 0; b < 4; ++b) {
                    uint8_t v = static_cast<uint8_t>(l.weight_zp);
                    if (c < 4 && b == c && channel < l.cout)
                      v = l.weights[(static_cast<size_t>(ky) * l.kw + static_cast<size_t>(kx)) *
                                        static_cast<size_t>(l.cout) +
                                    static_cast<size_t>(channel)];
                    out.push_back(v);
                  }
                }
        continue;
      }
      // Row (ky, word w) of the window; byte b of it is tap byte t = 4w + b - offset - r s Cin.
      const size_t per_out = static_cast<size_t>(l.kh) * l.kw * l.cin;
      for (int g = part.g0; g < part.g1; ++g)
        for (int ky = 0; ky < l.kh; ++ky)
          for (int w = 0; w < lp.window_words; ++w)
            for (int c = 0; c < kColumns; ++c) {
              const bool real = column(g, c, oc, r);
              for (int b = 0; b < 4; ++b) {
                const int t = 4 * w + b - lp.window_off - r * l.stride_w * l.cin;
                uint8_t v = static_cast<uint8_t>(l.weight_zp);
                if (real && t >= 0 && t < l.kw * l.cin)
                  v = l.weights[static_cast<size_t>(oc) * per_out +
                                static_cast<size_t>(ky) * l.kw * l.cin + static_cast<size_t>(t)];
                out.push_back(v);
              }
            }
    }
  return out;
}

}  // namespace

namespace {

// Both executables of a supported chain from its layout.
ConvPrograms programs_of(const ConvChain& chain, const Layout& layout_of) {
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
  out_layer.z_dim = last.cout;
  // Tile t holds its band of rows, row-major, p.out_ch bytes per position; the bands arrive in
  // tile order (tiles without output rows take no bytes).
  container::OutputLayout layout;
  layout.x_coordinate_to_linear_tile_id_map.assign(static_cast<size_t>(last.ow), 0);
  int offset = 0;
  size_t next = 0;
  for (int tile = 0; tile < kTiles; ++tile) {
    layout.linearized_tile_byte_offset.push_back(offset);
    if (next == tiles.size() || tiles[next].tile != tile) continue;
    const Plan& t = tiles[next++];
    // (A layer split by output groups: one pixel, its channels from the tiles in order.)
    if (t.g1 > 0 && t.g0 > 0) {
      offset += t.out_bytes;
      continue;
    }
    for (int y = t.layers[t.end - 1].oa; y < t.layers[t.end - 1].ob; ++y) {
      layout.y_coordinate_to_linear_tile_id_map.push_back(t.tile);
      layout.y_coordinate_to_local_y_offset.push_back(y - t.y0);
    }
    offset += t.out_bytes;
  }
  for (int x = 0; x < last.ow; ++x) {
    layout.x_coordinate_to_local_byte_offset.push_back(x * p.out_ch);
    layout.x_coordinate_to_local_y_row_size.push_back(p.g1 > 0 ? out_total : p.out_row);
  }
  out_layer.output_layout = layout;
  out_layer.shape = {{0, 0}, {0, last.oh - 1}, {0, last.ow - 1}, {0, last.cout - 1}};
  eo.output_layers.push_back(std::move(out_layer));
  int narrow_end = 0;
  for (const Stage& s : stages)
    for (const Plan& t : s.tiles) narrow_end = std::max(narrow_end, t.narrow_end);
  eo.used_narrow_memory_bytes_per_tile = narrow_end;
  eo.dma_hints = execution_hints(chain.input_name, in_bytes, chain.output_name, out_total);
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

ConvPrograms generate_conv(const ConvChain& chain) {
  Layout layout;
  if (const std::string why = unsupported(chain, layout); !why.empty()) fail(why);
  return programs_of(chain, layout);
}

std::optional<ConvPrograms> try_generate_conv(const ConvChain& chain, std::string& why) {
  Layout layout;
  why = unsupported(chain, layout);
  if (!why.empty()) return std::nullopt;
  return programs_of(chain, layout);
}

}  // namespace tinycoral::compiler
