// The data a CONV_2D chain's programs are generated from (conv_codegen.cpp) and the placement
// search chooses (conv_placement.h): each layer's shapes and parameter parts (LayerPlan), each
// tile's band of a stage (Plan), the stages, the parameter segments, and how they follow from the
// chain. Internal to the conv generator's files.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "compiler/conv_layer.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler::conv {

constexpr int kTiles = 16;         // the chip's tiles
constexpr int kColumns = 64;       // output channels per group (one weight row)
constexpr int kRowBytes = 256;     // one wide row
constexpr int kRowUnits = 4;       // 64-byte units per wide row
constexpr int kPiece = 256;        // input bytes per ring packet
constexpr int kRingFifo = 0x2078;  // wide row of the output packets
// The 8-byte units of the host image's ring packet.
constexpr int kPieceUnits = kPiece / 8;
// Input packets land in rows of their own (one writer per row and fence region, so each
// wideToNarrow reads its own packet): kInputRows rows from unit kInputFifo, then a fence. They
// sit past the 512 KiB of wide memory (units 0x2000-0x2080, where Google's programs keep their
// FIFO rows too), below the output row, so that the parameters have all 512 KiB but the ADD rows.
constexpr int kInputFifo = 0x2000;
constexpr int kInputRows = (kRingFifo - kInputFifo) / 4;
constexpr int kAddRows = 0x2000 - 4 * 4;  // a residual ADD's 4 weight rows (an op's par < 0x2000)
constexpr int kAddWeightRows = 4;
// A dense depthwise layer's FIFO: one row per tap (up to kDepthwiseFifoRows), below the ADD rows.
constexpr int kDepthwiseFifoRows = 25;
constexpr int kDepthwiseFifo = kAddRows - 4 * kDepthwiseFifoRows;
constexpr int kEntryBytes = 16;                  // a depthwise tap entry: one word's 4x4 diagonal
constexpr int kHandOverPackets = 1024;           // ring packets per transfer (256 KiB)
constexpr int kNarrowBytes = 196608;             // narrow memory of a tile
constexpr int kWideUnitsLimit = kDepthwiseFifo;  // weights stay below the FIFO and ADD rows
constexpr int kMeshFillWords = 4096;             // words per mesh fill instruction

inline int round_up(int v, int m) { return (v + m - 1) / m * m; }

// A run of a layer's 64-channel groups whose parameter rows sit together in one segment (a layer
// whose weights exceed one wide memory is split by output groups over several segments, each
// streamed in before its part runs).
struct Part {
  int g0 = 0, g1 = 0;  // groups [g0, g1)
  int row = 0;         // first wide row of the part's parameters (within its segment)
  int segment = 0;     // the parameter segment that holds them
  // A part of a layer whose weights come through a FIFO (LayerPlan::fifo): its weight rows, group
  // after group, sit on owner tiles (runs of whole windows, one tile each, in order) and are
  // broadcast into its tiles' FIFO window with every inference; the part's own rows keep only the
  // multipliers, biases, zero-point row and the window.
  struct Owned {
    int r0 = 0, r1 = 0;  // the run's weight rows [r0, r1) of the part's (group g0's first: 0)
    int tile = 0;        // the owner tile
    int row = 0;         // its wide row of the run's first weight row
    size_t offset = 0;   // bytes into the parameter stream (after every segment's bytes)
  };
  std::vector<Owned> owned;
  // K-chunked (LayerPlan::chunk): the window's rows a fill, 0 for a window of a whole group.
  int chunk = 0;
};

// Parts [p0, p1) of a dense depthwise layer whose tap entries (LayerShape::trip_rows each) sit
// one part after the other on tile `tile` from wide row `row`, cached once from `offset` bytes
// into the parameter stream (hold_dense_taps). They fill `rows / piece` pieces of `piece` rows,
// a piece every `step` rows (one piece: step = piece = rows): the producer's walk of two levels.
struct HeldTaps {
  int p0 = 0, p1 = 0;
  int tile = 0, row = 0, rows = 0;
  size_t offset = 0;
  int piece = 0, step = 0;
  int pieces() const { return rows / piece; }
};

// Where one layer's data lives and how its op walks it.
// A layer whose input pixels are not whole words (Cin % 4 != 0) computes `block` output pixels
// per op position: block x Cout columns, each pixel's weights placed at its byte offset in a
// word-aligned window of the input row (the other bytes of the window get the weight zero point,
// so they add nothing), so every read is a whole aligned word.
struct LayerShape {
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
  // Columns of the op computing groups [g0, g1) of a part: `group_ch`, or a fan-out head's
  // channels in whole words when the head is one partial group (PoseNet's heatmaps: 20 of 64;
  // the clock charges an op the columns it uses).
  // A head sharing its group (ConvLayer::Head::c0) computes the columns before its channels too.
  int op_columns(int g0, int g1, const ConvLayer::Head* h) const {
    if (h && g1 - g0 == 1 && g1 == h->g1 && l->joins.empty()) {
      const int end = h->c0 + h->cout - kColumns * (h->g1 - 1 - h->g0);  // in the last group
      if (end % kColumns != 0) return round_up(end, 4);
    }
    return group_ch;
  }
  // (The parts themselves: LayerPlan::parts.) How many the shapes had when a plan was made from
  // them (plan_of; the compute model's count: compute_cycles).
  int planned_parts = 0;
  // Every group of a depthwise layer has the same weights (an AVERAGE_POOL_2D: all 1): the
  // groups share one set of weight rows (MobileNet v1 1.0's 7x7 pool: 784 rows instead of 12,544).
  bool shared_rows = false;
  // Shared rows whose every weight is equal (a pool: all 1) and every word whole: each word's
  // taps hold the same rows, so one word's taps serve all 16 (49 rows instead of 784 for the
  // 7x7 pool; the op reads them at stride 0).
  bool same_words = false;
  // Any other depthwise layer keeps its weights dense: per word its taps' 16-byte diagonal
  // entries, 16 to a row, which reach the op's FIFO through scalar memory (docs/compiler.md "How
  // Google stores depthwise parameters"): kwords / 16 rows a group instead of kwords.
  bool dense() const { return l->depthwise && !shared_rows; }
  // A CONV_2D whose weight rows are not resident on its tiles: they reach its op through a FIFO
  // window of `kwords` rows, one group a fill, broadcast from owner tiles (Part::owned; docs/
  // compiler.md "Weights through a FIFO from owner tiles").
  bool fifo = false;
  // K-chunked FIFO (docs/compiler.md "K-chunked FIFO windows"; Google's form, isa.md 2.1.5
  // "Conv, K-chunked"): the window holds `chunk` rows (a divisor of a tap row's words) instead of
  // all `kwords`, filled kwords / chunk times a group, and the partial sums of the tile's
  // positions wait in `psum_rows` rows after it (one a position) from chunk to chunk. 0: the
  // whole group's rows.
  int chunk = 0, psum_rows = 0;
  int window_rows() const { return chunk > 0 ? chunk + psum_rows : kwords; }
  int rows_of(int groups_in_part) const {
    if (l->residual()) return 0;  // a residual ADD has no parameters
    const int weight_rows =
        shared_rows ? (same_words ? l->kh * l->kw : kwords)
        : dense()   ? (groups_in_part * kwords * kEntryBytes + kRowBytes - 1) / kRowBytes
        : fifo      ? window_rows()
                    : groups_in_part * kwords;
    return groups_in_part * planes + 1 + weight_rows;
  }
  // A dense layer's words (4 channels each) of groups [g0, g1): the last group's may be fewer.
  int dense_words(int g0, int g1) const {
    return std::min((g1 - g0) * dw_words, l->cin / 4 - g0 * dw_words);
  }
  // The rows of tap entries a dense part of groups [g0, g1) sends round through scalar memory.
  int trip_rows(int g0, int g1) const {
    return (dense_words(g0, g1) * l->kh * l->kw * kEntryBytes + kRowBytes - 1) / kRowBytes;
  }
  int zp_row(const Part& part) const { return part.row + (part.g1 - part.g0) * planes; }
  int weight_row(const Part& part) const { return zp_row(part) + 1; }
  int rows() const {
    // (Fan-out heads are parts of their own, each with its own zero-point row: assign_segments.)
    // (Heads sharing a group share its rows.)
    int heads = 0;
    for (const auto& [g0, g1] : l->head_spans()) heads += rows_of(g1 - g0);
    return l->heads.empty() ? rows_of(groups) : heads;
  }
  // Channels of a pixel of the padded image as this tile keeps it: the layer's, or the slice of a
  // depthwise layer split by groups over tiles (split_stage).
  int cin = 0;
  int in_bytes() const { return round_up(hp * wp * cin, 4); }
  int row_words() const { return wp * cin / 4; }
  // Narrow byte address of padded pixel (y, x), x counted from the image's padded column 0.
  // `slide`: bytes the rows sit above their place in the region [in_base, in_base + in_bytes()),
  // which stays the image's (slide_full_images, conv_hand_over.h).
  int pixel(int y, int x) const { return in_base + slide + (y * wp + extra + x) * cin; }
  int slide = 0;
  // The band of rows this tile computes: output rows [oa, ob); buffer row 0 holds the layer's
  // input row `top` (negative: padding rows above the image).
  int oa = 0, ob = 0, top = 0;
  // The input rows the band reads, [need_top, need_top + need_rows) (padding rows included);
  // the buffer holds them from row need_top - top. A stage's first image after a hand-over
  // holds the whole padded image (`full`) on every tile at one address, so that rows that
  // several tiles read travel to all of them in one transfer.
  int need_top = 0, need_rows = 0;
  bool full = false;
  // In the plan of a residual ADD's stage: the ADD's other operand, the input image of this layer
  // of an earlier stage (its first), which the hand-over into that stage also sent here and which
  // stays until the ADD has run (keep_operands). Its geometry is the ADD's own image's.
  bool kept = false;
  // A kept operand that is the tile's own copy of the image handed over into the operand's stage
  // (all-gathered there: each tile of a split layer holds the whole image), left intact until the
  // ADD (keep_operands): no second hand-over sends it (its geometry is that stage's, whose row
  // pitch is the ADD's).
  bool in_place = false;
  bool needs_fill() const { return top < 0 || top + hp > l->h || wp != l->w || extra != 0; }
  // Narrow byte address of the first input row the op reads.
  int op_in(int x) const { return pixel(need_top - top, x); }
  bool operator==(const LayerShape&) const = default;
};

// A layer's shapes with its parameter parts. Only Shapes' layers have parts: a Plan's layers
// leave them empty (plan_of), since the placement search copies plans by the thousand and the
// parts' vectors were most of that copying.
struct LayerPlan : LayerShape {
  std::vector<Part> parts;
  // A residual ADD whose 4 weight rows are parameters (cache_add_rows): cached once at wide row
  // `add_row` of its stage's tiles `add_mask`, from `add_offset` bytes into the parameter stream
  // (after every segment's and owner's rows). -1: built by mesh fills before each run.
  int add_row = -1;
  uint32_t add_mask = 0;
  size_t add_offset = 0;
  // A dense depthwise layer whose parts run at once on their own tiles (hold_dense_taps): runs of
  // its parts whose tap entries also sit together on one holder tile, so that one producer sends
  // a run's entries towards scalar memory; the parts in no run keep a producer each.
  std::vector<HeldTaps> holds;
};

// Every layer of some shapes as a plan has it outside its stage: without the parameter parts
// (LayerShape::planned_parts counts them). One such vector serves all the plans made from the
// same shapes (bare_layers, plan_of).
using BareLayers = std::shared_ptr<const std::vector<LayerPlan>>;

// A Plan's layers: one LayerPlan per layer of the chain. The plan owns its stage's layers (the
// window [first, end), where it has bands and addresses) and any other layer it changes (a kept
// operand of an earlier stage: keep_operands); the rest it reads from the bare layers it was made
// from, shared with the other plans of those shapes. Its own layers are shared by copies of the
// plan until one of them changes one (copy on write). The placement search makes plans by the
// hundred thousand and copies stages by the thousand: copying every layer of the chain into each
// plan was a fifth of a compile, and copying them with each plan a third.
// (A reference taken through a non-const plan stays its own until the plan is copied.)
class PlanLayers {
 public:
  PlanLayers() = default;
  // All of `layers` the plan's own (a plan built by hand).
  explicit PlanLayers(std::vector<LayerPlan> layers) {
    own_ = std::make_shared<Own>();
    own_->window = std::move(layers);
  }
  // `window`: layers [first, first + window.size()) of `bare`, the plan's own.
  PlanLayers(BareLayers bare, size_t first, std::vector<LayerPlan> window)
      : bare_(std::move(bare)) {
    own_ = std::make_shared<Own>();
    own_->first = first;
    own_->window = std::move(window);
  }
  size_t size() const { return bare_ ? bare_->size() : own_ ? own_->window.size() : 0; }
  const LayerPlan& operator[](size_t i) const { return get(i); }
  LayerPlan& operator[](size_t i) { return own(i); }
  const LayerPlan& at(size_t i) const { return get(checked(i)); }
  LayerPlan& at(size_t i) { return own(checked(i)); }
  const LayerPlan& front() const { return get(0); }
  LayerPlan& front() { return own(0); }
  const LayerPlan& back() const { return get(size() - 1); }
  LayerPlan& back() { return own(size() - 1); }
  // A plan built by hand (no bare layers) appends its own.
  void push_back(const LayerPlan& lp);

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = LayerPlan;
    using difference_type = std::ptrdiff_t;
    using pointer = const LayerPlan*;
    using reference = const LayerPlan&;
    const_iterator() = default;
    const_iterator(const PlanLayers* layers, size_t i) : layers_(layers), i_(i) {}
    reference operator*() const { return (*layers_)[i_]; }
    pointer operator->() const { return &(*layers_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator was = *this;
      ++i_;
      return was;
    }
    bool operator==(const const_iterator& o) const { return layers_ == o.layers_ && i_ == o.i_; }

   private:
    const PlanLayers* layers_ = nullptr;
    size_t i_ = 0;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  struct Own {
    size_t first = 0;
    std::vector<LayerPlan> window;
    // Changed layers outside the window (rare; a map keeps references to them valid).
    std::map<size_t, LayerPlan> others;
  };
  size_t checked(size_t i) const;
  const LayerPlan& get(size_t i) const {
    if (own_) {
      if (i - own_->first < own_->window.size()) return own_->window[i - own_->first];
      if (!own_->others.empty())
        if (const auto it = own_->others.find(i); it != own_->others.end()) return it->second;
    }
    return (*bare_)[i];
  }
  // This plan's own layers, copied first where another plan shares them.
  void unshare();
  LayerPlan& own(size_t i);
  BareLayers bare_;
  std::shared_ptr<Own> own_;
};

// One tile's part of a stage of the chain (layers [first, end)): its band of the stage's last
// output rows and, going back through the stage's layers, the rows each layer must compute for
// it (the halo rows are computed again by the neighbouring tile rather than exchanged). `layers`
// holds every layer of the chain (the same shapes and parameter parts on every tile); only those
// of the stage have bands and narrow addresses.
struct Plan {
  int tile = 0;
  // The output groups [g0, g1) this tile computes of a layer split by output groups over tiles
  // (a stage of that one layer, split_stage; a last layer of one pixel, share_tiles); g1 == 0:
  // all of them. Each such tile reads the layer's whole input image and writes its groups'
  // channels, (g1 - g0) 64 bytes a pixel, to its output; a depthwise layer's tile reads only its
  // groups' channels of the image.
  int g0 = 0, g1 = 0;
  int y0 = 0;  // the tile's first output row of the stage's last layer
  // A pixel band (pb > 0; pixel_stage): the tile computes output pixels [pa, pb) of every layer of
  // the stage (1x1 layers over gapless rows, pixel p at row p / OW), not whole rows: its rows
  // [oa, ob) are those the pixels touch, its images and output keep their places in them, and
  // the ops start at pixel pa. 7 x 7 maps split over 3 to 6 tiles evenly (v2's last layers:
  // 16 + 16 + 17 pixels where row bands computed 2, 2 and 3 rows).
  int pa = 0, pb = 0;
  bool pixel_band() const { return pb > 0; }
  size_t first = 0, end = 0;
  PlanLayers layers;
  int out_base = 0;     // narrow byte address of the stage's [OH][OW][Cp] output
  int out_ch = 0;       // Cp: the last layer's channels as stored (a multiple of 4)
  int out_row = 0;      // bytes per output row (whole blocks)
  int out_bytes = 0;    // the band's rows * out_row, rounded up to 8
  int regions_end = 0;  // end of the image regions
  int add_scratch = 0;  // 16 narrow words for a residual ADD's weight rows
  int join_base = 0;    // a joined heads layer's operand image, its products and aux words
  int narrow_end = 0;
  bool out_at_top = false;  // the output waits at the top of narrow memory for a hand-over
  // A stage whose images do not fit a tile at once (PoseNet's 177 x 241 maps) may compute each
  // tile's band in `rounds` rounds of its last layer's rows (round_plan): the stage's first image
  // (the band's, as the hand-over or the host sent it) and its output stay where this plan has
  // them; the other images, for one round's rows, sit from narrow byte `round_base` on and are
  // used again by every round. This plan's other layers keep the band's rows (the compute model).
  int rounds = 1;
  int round_base = 0;
  // >= 0: the stage's last layer writes its band straight into the next stage's first image on
  // this tile (at this narrow byte, `into_row_words` a row; `out_ch` bytes a pixel, which that
  // image's channels equal) instead of to `out_base`: the next stage has the same tiles, slices and
  // bands, so only the rows other tiles read cross the ring (Stage::halo_in, write_in_place).
  int into_base = -1, into_row_words = 0;
};

// The stages of the chain: each runs on its own tiles (bands of its last layer's output rows);
// between two stages every tile sends its band to the tiles of the next stage that need the rows
// (narrow memory to narrow memory over the ring).
struct Stage {
  size_t first = 0, end = 0;
  std::vector<Plan> tiles;
  // The stage before wrote each tile's own rows of this stage's first image in place
  // (Plan::into_base): the hand-over sends each tile only the rows other tiles computed (the
  // halo), and the image is filled with its zero point before the stage before runs (later
  // where fill_late or over_input says so).
  bool halo_in = false;
  // That image lies over the output of the stage before the stage before (no room below it):
  // it is filled after the hand-over into the stage before has read that output.
  bool fill_late = false;
  // That image lies over the stage before's first image (write_in_place): its rows the stage
  // before does not write are filled with the zero point once that stage has run.
  bool over_input = false;
};

// Whole image rows per 256-byte input packet, an even number when a row is 4 bytes short of
// whole 8-byte units (the host streams 8-byte units).
inline int rows_per_packet(int row_bytes) {
  int rows = kPiece / row_bytes;
  if (row_bytes % 8 != 0) rows -= rows % 2;
  return rows;
}

// Whether the host's image can be streamed in whole 8-byte units, row pieces at a time.
inline bool input_streamable(const ConvLayer& l) {
  const int row_bytes = l.w * l.cin;
  if (row_bytes % 4 != 0) return false;
  if (row_bytes % 8 == 0) return true;
  return row_bytes <= kPiece && rows_per_packet(row_bytes) > 0 && l.h % 2 == 0;
}

// Channels per output pixel as a layer writes them.
inline int channels_stored(const ConvLayer& l, int block) {
  if (block > 1) return l.cout;
  return l.cout <= kColumns || l.cout % 4 == 0 ? round_up(l.cout, 4) : round_up(l.cout, kColumns);
}

// Channels per pixel of a block (block_of > 1): a head's (all heads of a layer have one shape).
inline int block_cout(const ConvLayer& l) {
  return l.heads.empty() ? l.cout : l.heads.front().cout;
}

// Pixels per position of a layer reading 1-3 channels: its input steps whole words (b stride cin
// a multiple of 4) and a block's outputs are whole words (b Cout), so that a pool of one channel
// with windows of 42 reads 4 windows a position, not 2.
inline int block_of(const ConvLayer& l) {
  int b = 1;
  while (b * l.stride_w * l.cin % 4 != 0 || (b > 1 && b * block_cout(l) % 4 != 0 && b < 64)) ++b;
  return b;
}

// Heads joined by ADD/MUL (ConvLayer::joins): every operand but the last join's result lives in
// one image of the band's pixels, operand k (a head's channels or a join's result) at byte
// k join_slot of a pixel; the last join writes the next layer's image. join_slot: the heads'
// channels in whole words (each head's op writes only them). Heads reading 1-3 channels write a
// block of pixels per position (the image as the host sends it): a "pixel" of the operand image
// is then the block, its slot the block's channels, and the last join writes the block's pixels
// packed into the next image (a pool then runs as a CONV_2D reading them in windows).
inline bool joined(const ConvLayer& l) { return !l.joins.empty(); }
inline int join_slot(const ConvLayer& l) { return round_up(block_of(l) * l.heads.front().cout, 4); }
inline int join_pitch(const ConvLayer& l) {
  return join_slot(l) * static_cast<int>(l.heads.size() + l.joins.size() - 1);
}
// Narrow bytes past the operand image: a MUL's products (16 bytes a word of a run), 16 words of
// ADD weight rows and 4 identity words.
constexpr int kJoinProducts = 4 * 4 * 256;
constexpr int kJoinAux = 128;

// Pixels a layer writes past its rows: the partial last block of B pixels (1-3 input channels).
inline int surplus_pixels(const LayerPlan& lp) { return lp.blocks * lp.block - lp.l->ow; }

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
  // A segment whose turns come from a tile rather than the host (own_turns): the caching program
  // also puts its rows at wide row `owner_row` of tile `owner`, and wherever the execution program
  // would stream it in, that tile sends them over the ring to the tiles of `mask` (Google's
  // programs keep each layer's weights on one tile and broadcast them likewise). -1: the host.
  int owner = -1;
  int owner_row = 0;
};

// The shapes every tile shares and, once the stages are known, the parameter parts.
struct Shapes {
  std::vector<LayerPlan> layers;
  std::vector<Segment> segments;
};

constexpr int kSegmentRows = kWideUnitsLimit / kRowUnits;

// Whether `lp`'s parts run at once on `stage`'s tiles (conv_codegen's `at_once`): the stage split
// by output groups, not a depthwise layer on shared rows, every part resident from the caching
// program on (its segment the first of its group). Only there are a dense layer's taps held
// (LayerPlan::holds, hold_dense_taps), all parts' trips emitted at the first part.
inline bool parts_run_at_once(const Shapes& s, const Stage& stage, const LayerPlan& lp) {
  if (stage.tiles.front().g1 == 0 || (lp.l->depthwise && lp.shared_rows)) return false;
  for (const Part& part : lp.parts)
    if (!s.segments[static_cast<size_t>(part.segment)].first_of_group) return false;
  return true;
}

// Everything the programs are generated from: shapes, stages and parameter segments.
struct Layout {
  Shapes shapes;
  std::vector<Stage> stages;
};

inline uint32_t tile_mask(const std::vector<Plan>& tiles) {
  uint32_t mask = 0;
  for (const Plan& t : tiles) mask |= tile_bit(t.tile);
  return mask;
}

inline uint32_t all_tiles(const std::vector<Stage>& stages) {
  uint32_t mask = 0;
  for (const Stage& s : stages) mask |= tile_mask(s.tiles);
  return mask;
}

// The shapes every tile shares (no stages or parameter parts yet).
Shapes shapes_of(const ConvChain& chain);

// The parameter parts: layers in order fill segments of up to kWideUnitsLimit units; a layer that
// does not fit the rest of a segment starts the next one, and a layer larger than a whole segment
// is split by groups over as many as it needs. `group_of[i]` is layer i's group of segments (a
// new group starts a new segment), `masks[g]` the tiles that hold group g and `bases[g]` the
// wide row its segments load at (parts' rows count from wide row 0). A layer split by output
// groups over `splits[i]` tiles keeps tile t's groups in a group of segments of its own
// (group_of[i] + t): one part when they fit below its top, else several taking turns. A group's
// segments stay below wide row `tops[g]` (all of wide memory's parameter rows when `tops` is
// empty).
void assign_segments(Shapes& s, const std::vector<int>& group_of,
                     const std::vector<uint32_t>& masks, const std::vector<int>& bases,
                     const std::vector<int>& splits, const std::vector<int>& tops = {});

// The wide rows taken on each tile (below kSegmentRows), and the runs left free: where owner tiles
// (own_turns, own_fifo_weights) find room for rows they keep beside the segment groups'.
class WideRows {
 public:
  void take(int tile, int a, int b) { taken_[static_cast<size_t>(tile)].push_back({a, b}); }
  // Tile t's free runs [a, b), lowest first.
  std::vector<std::pair<int, int>> free_runs(int tile) const;

 private:
  std::vector<std::vector<std::pair<int, int>>> taken_ = decltype(taken_)(kTiles);
};

// Gives each segment that takes turns (and the first of its group, which is loaded again after
// them) an owner tile with room for its rows outside every group's region, the tile with the most
// free rows first; segments no tile has room for stay streamed from the host.
void own_turns(Shapes& s);

// Gives each residual ADD wide rows of its own for its 4 weight rows, free on every tile of its
// stage (outside the segments', owners' and FIFO runs' rows), so that the caching program writes
// them once instead of every inference building them; an ADD with no such room keeps its fills.
void cache_add_rows(Shapes& s, const std::vector<Stage>& stages);

// The wide rows [0, kAddRows / kRowUnits) of each tile that the segments, their owners, the FIFO
// weights' owner runs and the dense depthwise FIFO (up to the most taps of the chain's dense
// layers) take; `offset`: the parameter-stream bytes of those rows (where rows cached after them
// start).
struct TakenRows {
  std::vector<std::vector<bool>> used;
  size_t offset = 0;
  void take(uint32_t mask, int a, int b);
  bool free(uint32_t mask, int a, int b) const;
};
TakenRows rows_taken(const Shapes& s);

// Gives the parts of each dense depthwise layer that run at once on their own tiles (a layer split
// by output groups, every part resident) holder tiles for their tap entries, consecutive parts
// together in the largest runs of free wide rows (below kSegmentRows, outside the rows above and
// the cached ADD rows), or in equal pieces at a constant step on one tile where that holds more,
// at least two parts a run: the layer's round trips then take one producer a run instead of one a
// part (docs/compiler.md "Fewer producers for a split depthwise layer's taps", "Held taps in
// pieces"). Parts no run has room for keep their own producer. A held part's own entries are free
// for the layers after where nothing else lies there and its group takes no turns.
void hold_dense_taps(Shapes& s, const std::vector<Stage>& stages);

// Tile `tile`'s plan of layers [first, end) computing output rows [y0, y1) of layer end - 1.
// `out_at_top`: the output goes to the next stage, so it sits at the top of narrow memory, out of
// the way of the next stage's images.
// `bare`: bare_layers(shapes) where the caller makes several plans of the same shapes (built here
// where null).
Plan plan_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end, int tile,
             int y0, int y1, bool out_at_top, bool full_input, const BareLayers& bare = nullptr);

// `shapes`' layers as plans read them outside their stages (BareLayers): the last ones made where
// they are still the same.
BareLayers bare_layers(const Shapes& shapes);

// Round k of a plan with rounds (Plan::rounds): the band's rows [oa, ob) of the last layer split
// as evenly as possible, this round's share planned from the band's first image and into the
// band's output.
// `bare`: as for plan_of.
Plan round_plan(const ConvChain& chain, const Shapes& shapes, const Plan& p, int k,
                const BareLayers& bare = nullptr);

// Tiles of a stage: its last layer's output rows split as evenly as possible over up to
// `max_tiles` tiles from `tile0` on (one tile when the host's rows must travel two to a packet).
// `pixels`: in pixel bands (Plan::pa, pb) where pixel_stage allows them and every tile's rows
// lie gapless (else row bands). Pixel bands have no rounds: such a stage may not fit narrow
// memory, which its callers check (stage_fits).
Stage stage_of(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end,
               int tile0 = 0, int max_tiles = kTiles, bool pixels = false);

// Whether layers [first, end) can run in pixel bands: every one a 1x1 CONV_2D of stride 1 without
// padding or blocks of pixels, not the chain's first or last layer (the host's rows, the
// output's), no fan-out heads. Their input rows must also lie gapless (each band's pixels one run
// of positions, in and out), which depends on the plans' row widths: stage_of checks that.
bool pixel_stage(const ConvChain& chain, const Shapes& shapes, size_t first, size_t end);

// Positions a tile's op of layer `lp` computes: its pixel band's pixels, else its rows' blocks.
inline int positions_of(const Plan& p, const LayerPlan& lp) {
  return p.pixel_band() ? p.pb - p.pa : (lp.ob - lp.oa) * lp.blocks;
}
// Pixels between the first of a pixel band's rows and its first pixel (0 in row bands).
inline int pixel_skip(const Plan& p, const LayerPlan& lp) {
  return p.pixel_band() ? p.pa - lp.oa * lp.l->ow : 0;
}

// Tile `p` (a one-tile plan of a one-layer stage) computing only the output groups [g0, g1):
// its output holds their channels.
void slice_plan(Plan& p, int g0, int g1);

// Whether layer `lp` can be split by output groups over `n` tiles with the same number of groups
// on each, inside a chain (split_stage): the slices' pixels are whole ring packets or divide one,
// so that hand-overs send whole pixels; with `three` also three groups a slice (192 bytes of each
// pixel, 3 x 64 of a 256-byte packet: stages widened with FIFOs, widen_with_fifos).
bool splittable(const LayerPlan& lp, int n, bool three = false);

// Layer i alone on n slices of output groups, slice t computing groups
// [groups t / n, groups (t + 1) / n): a convolution from the whole input image (or the rows its
// band reads), a depthwise layer from its groups' channels only (the image holds just them, so
// the stage before must be split likewise or finer: `nests`). With `bands` > 1 each slice is also
// split into row bands of the output (2-D blocks: slice t's band b on tile tile0 + t bands + b,
// fewer bands when the map has fewer rows); else slice t is tile tile0 + t, every row.
// With `end` > i + 1 the stage holds layers [i, end): a convolution and the depthwise layer after
// it that reads only its groups (pairs_with_depthwise), each slice's tiles computing both, the
// convolution's slice written straight into the depthwise layer's padded image of the slice's
// channels (no hand-over between them; in row bands the convolution computes the halo rows too).
// `pixels`: the bands by pixels (Plan::pa, pb) where pixel_stage allows them.
Stage split_stage(const ConvChain& chain, const Shapes& shapes, size_t i, int n, int tile0 = 0,
                  int bands = 1, size_t end = 0, bool pixels = false);

// Whether layer i (a convolution) and the depthwise layer after it can be one split stage: the
// depthwise layer reads exactly the convolution's channels, so slice t of both is the same groups.
bool pairs_with_depthwise(const ConvChain& chain, size_t i);

// Slices of output groups of a stage split by them (split_stage; 1 otherwise): the tiles of its
// first band.
inline int slices_of(const Stage& s) {
  int n = 0;
  for (const Plan& t : s.tiles)
    n += t.y0 == s.tiles.front().y0 && t.pa == s.tiles.front().pa ? 1 : 0;
  return s.tiles.front().g1 > 0 ? n : 1;
}

// Whether layers [a, b) can be a stage of their own without cutting a residual block in a way the
// generator cannot follow: a stage that holds the image a later stage's ADD reads (the input of
// layer j, the ADD's `residual_of`) must start at j, so that the hand-over into it can send the
// image to the ADD's tiles too (keep_operands); j must not be the chain's first layer, and its
// image must have no padding (the ADD's geometry).
bool stage_allowed(const ConvChain& chain, size_t a, size_t b);

// Where each ADD whose operand is the first image of an earlier stage keeps that image on its own
// tiles: above every image and below every output of the stages that run on the tile from the
// hand-over that sends it until the ADD (LayerPlan::kept in the ADD's stage's plans). Returns
// false when a tile has no such room or a residual block is cut where stage_allowed says not.
bool keep_operands(const ConvChain& chain, std::vector<Stage>& stages);

// ADD i's operand (kept by keep_operands on the ADD's tiles) read instead from the copy each of
// those tiles holds of the image handed over into the operand's stage (an all-gathered image, in
// that stage's geometry), kept intact until the ADD: the stages between whose images or outputs
// lie over the ADD's rows of it move up above it on all their tiles where they still fit
// (LayerPlan::in_place; the hand-over into the operand's stage then sends it no second time).
// False, and the stages unchanged, where some tile of the ADD cannot.
bool operand_in_place(const ConvChain& chain, std::vector<Stage>& stages, size_t i);

// Whether every tile of `to` can take what the tiles of `from` send it: a tile that keeps a slice
// of the channels (a split depthwise layer) takes only slices inside its own.
bool nests(const Stage& from, const Stage& to);

// Whether a stage fits narrow memory on each of its tiles, next to the output of the stage before
// (which waits at the top of narrow memory for the hand-over).
bool stage_fits(const Stage& s, const Stage* before);

// Where stage k + 1 has the tiles and output groups of stage k and each tile's band of it reads
// every row the tile computes of stage k (the same bands, a 3x3 depthwise layer after a pointwise
// one: PoseNet's 23 x 31 pairs; or bands that nearly line up, stages of several layers (in rounds
// only unsliced) or a stride-2 first layer: PoseNet's front, MobileNet v2's 56 x 56 stages), stage
// k writes its rows straight into stage k + 1's first image, which moves above stage k's images and
// below the outputs waiting at the top (the stage before's, or over it filled late,
// Stage::fill_late; and its own), or lies over stage k's first image as its rounds free it
// (Stage::over_input), so that the hand-over carries only the halo rows (Stage::halo_in). In chains
// with residual ADDs the image also stays off every kept operand and stage k + 1's other images
// (right above stage k's images where it does not fit above them; neither filled late nor over
// stage k's first image), and it is not done where an ADD's operand crosses into or out of that
// stage (those hand-overs read the sender's output). `from_first`: the first stage writes into
// the second's image too (where the host's image is not staged), which the caller prices.
void write_in_place(const ConvChain& chain, const Shapes& shapes, std::vector<Stage>& stages,
                    bool from_first = false);

// The parameter stream (conv_parameters) of a layout's shapes and parts.
std::vector<uint8_t> parameters_of(const Shapes& shapes);

}  // namespace tinycoral::compiler::conv
