// The instructions of one layer on its tiles (conv_ops.h): where a layer writes (out_target), the
// zero-point fills, the ops' walks and fields (layer_op, depthwise_op, their shared op_tail), the
// depthwise taps' round trip, residual ADDs and the joins of joined heads.
#include "compiler/conv_ops.h"

#include <algorithm>
#include <bit>
#include <tuple>
#include <utility>
#include <vector>

#include "compiler/fields.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler::conv {

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

namespace {

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

}  // namespace

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
  // (The longest row of at most kMeshFillWords words that divides them, found as the fewest rows:
  // counting rows up from the least possible, not row lengths down from kMeshFillWords - that
  // took thousands of divisions a fill, 6% of DeepLab's compile. The same row either way.)
  for (int n = (words + kMeshFillWords - 1) / kMeshFillWords; n <= kMeshFillWords; ++n)
    if (words % n == 0) {
      rows(base, words / n, n);
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

namespace {

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

}  // namespace

// The words of groups [g0, g1) of a depthwise layer (the last group's only, when the channels
// end before a whole group of 64).
int depthwise_words(const LayerPlan& lp, int g0, int g1) { return lp.dense_words(g0, g1); }

// A depthwise layer's groups [g0, g1) of a part: one op group per 4-channel input word (out_ch 3:
// the clock charges the 16 MACs of the four columns a step uses, not all 64 columns' 256), its
// taps' rows holding the word's 4x4 diagonal in columns 0..3.
// (`pick`: the band's rows it computes, all by default: swap_split's two ops.)
void depthwise_op(TileBatch& e, const Plan& p, size_t i, const Part& part, int g0, int g1,
                  RowRange pick) {
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

void depthwise_round_trips(Emitter& e, const std::vector<RoundTrip>& trips,
                           const std::vector<HeldTaps>& holds, int& outfed) {
  for (size_t k = 0; k < trips.size(); ++k) {
    const RoundTrip& r = trips[k];
    const int bytes = r.words * r.taps * kEntryBytes;
    const int smem_words = bytes / 4, rows = (bytes + kRowBytes - 1) / kRowBytes;
    const int full = smem_words / 64, rest = smem_words % 64;
    e.add("infeed",
          cat("smem=1 walk=(1 x 64)(-63 x ", full + (rest ? 1 : 0),
              ")(-63 x 1) k157=1 k160=1 par168=1",
              rest ? cat(" count_m1=", rest - 1, " tail_en=1 count_neg=", hex(64 - rest)) : "",
              " f308=0xb par314=1 par315=3 pop_wait=", hex((outfed + 1) & 0xffff),
              " k336=1 f352=0x01 f391=2 dest=", hex(r.mask), " f434=0x3"));
    outfeed_to_scalar(e, rows);
    const auto hold = std::find_if(holds.begin(), holds.end(), [&](const HeldTaps& h) {
      return h.p0 <= static_cast<int>(k) && static_cast<int>(k) < h.p1;
    });
    if (hold == holds.end())
      rows_to_scalar(e, r.holder, r.row * kRowUnits, rows);
    else if (hold->p0 == static_cast<int>(k))  // (the run's rows, its parts' outfeeds in turn)
      rows_to_scalar(e, hold->tile, hold->row * kRowUnits, hold->piece, hold->pieces(), hold->step);
    outfed += 64 * rows;
  }
}

// `head`: the fan-out head the op computes (of those with channels in the part; nullptr for
// other layers). `pick`: its rows (not of a pixel band).
void layer_op(TileBatch& e, const Plan& p, size_t i, const Part& part, const ConvLayer::Head* head,
              const RowPick& pick) {
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

namespace {

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

}  // namespace

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

}  // namespace tinycoral::compiler::conv
