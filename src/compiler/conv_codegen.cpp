// The CONV_2D chain generator (conv_codegen.h): the execution program in order (emit_program:
// the host's image in, each stage's layers, the hand-overs, the outputs back), the caching
// program, and both executables. Every address below is derived from the layers' shapes; the
// fields around the data movement (fences, sync records, DMA fields) are the ones the
// FULLY_CONNECTED generator reproduces from edgetpu_compiler 16.0 (program_parts.h). The host's
// image in: conv_input.h; one layer's instructions: conv_ops.h; the row-split forms:
// conv_row_split.h.
#include "compiler/conv_codegen.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include "common/error.h"
#include "compiler/conv_fifo.h"
#include "compiler/conv_hand_over.h"
#include "compiler/conv_input.h"
#include "compiler/conv_ops.h"
#include "compiler/conv_packets.h"
#include "compiler/conv_placement.h"
#include "compiler/conv_plan.h"
#include "compiler/conv_row_split.h"
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

void preamble(Emitter& e, const std::string& input_name) {
  program_start(e);
  tile_fence(e, "units=0x020");
  input_address(e, input_name);
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
// (LayerPlan::add_row), then the held depthwise taps (LayerPlan::holds).
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
  for (const LayerPlan& lp : shapes.layers)  // (and the held depthwise taps)
    for (const HeldTaps& hold : lp.holds)
      for (int j = 0; j < hold.pieces(); ++j)
        loads.push_back({hold.piece, hold.offset + size_t{kRowBytes} * j * hold.piece,
                         tile_bit(hold.tile), hold.row + j * hold.step});
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

// The fence before run k of `part`: on the tile of run k - 1, none where that is run k's tile (a
// tile's producer sends its runs in order).
void fifo_fence(Emitter& e, const Part& part, size_t k) {
  if (part.owned[k - 1].tile != part.owned[k].tile) fence_on(e, tile_bit(part.owned[k - 1].tile));
}

void fifo_run(Emitter& e, const Part& part, size_t k, uint32_t mask) {
  const Part::Owned& run = part.owned[k];
  const int r = run.r1 - run.r0;
  e.add("ringprod",
        cat("tiles=", hex(tile_bit(run.tile)), " addr=", hex(run.row * kRowUnits), " src=(1 x ", r,
            ")(", 1 - r, " x 1)(", 1 - r, " x 1)(", 1 - r,
            " x 1) sdims=1 pcfg=4 r0.id=0x32 r0.en_a=1 r0.en_b=1 to_c1=1 dest=", hex(mask)));
}

size_t runs_before_ops(const Part& part, uint32_t computing) {
  return fifo_runs_before_ops(part, computing);
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

// The execution program into `e`; `loads` receives the segments it streams and how many of their
// first rows, in order (its parameters). `head`: a generator follows in the same program, so the
// last layer's bytes go to the host's scratch buffer and the program does not end here.
// `pricing`: the placement search prices the layout (hand_over's forms for it). `final_forms`:
// halo_first's and swap_split's two ops a band where they apply, the host's image popped in
// pieces for the runs (stream_input). `keep_output` (with `head`): the last layer's bands stay in
// the tiles' narrow memory, where the generator after takes them.
void emit_program(Emitter& e, const ConvChain& chain, const Shapes& shapes,
                  const std::vector<Stage>& stages, std::vector<std::pair<int, int>>& loads,
                  bool head, bool pricing, bool final_forms, bool keep_output) {
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
    stream_input(e, stages.front().tiles, final_forms);
  }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  if (staging) {
    repack_input(e, stages.front().tiles, *staging);
    const Stage& s = stages.front();
    // (And the image of a stage written in place out of the first: the staging may lie under it.)
    const bool second = s.tiles.front().rounds == 1 && s.first + 1 < s.end;
    const bool next = stages.size() > 1 && stages[1].halo_in && !stages[1].fill_late;
    if (second) fill_image(s, s.first + 1);
    if (next) fill_image(stages[1], stages[1].first);
    if (second || next) tile_fence(e, "counters=0x1ffff units=0x3ff");
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
    depthwise_round_trips(e, trips, lp.holds, outfed);
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
      // they keep it where no stage in between writes), but those that read their own copy of
      // this image in place (LayerPlan::in_place).
      for (size_t i = stage.end; i < chain.layers.size(); ++i)
        if (chain.layers[i].residual_of == static_cast<int>(stage.first)) {
          Stage kept = stage_of(i);
          kept.first = stage.first;
          kept.end = stage.first + 1;
          std::erase_if(kept.tiles, [&](const Plan& t) { return t.layers[stage.first].in_place; });
          if (!kept.tiles.empty()) hand_over(e, stages[si - 1], kept, ordinal, pricing);
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
      const bool at_once = parts_run_at_once(shapes, stage, lp);
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
        // (Parts whose taps holders keep together: every part's trip with the first part's. Held
        // only where all parts are resident and run now, parts_run_at_once, the predicate
        // hold_dense_taps placed the holds by; elsewhere each part's trip goes out on its own.)
        const bool held = at_once && !lp.holds.empty();
        if (held && &part == &lp.parts.front()) {
          std::vector<RoundTrip> all;
          for (const Part& q : lp.parts) {
            std::vector<const Plan*> on;
            uint32_t m = 0;
            for (const Plan& p : stage.tiles)
              if (computes(p, q)) on.push_back(&p), m |= tile_bit(p.tile);
            all.push_back(
                {on.front()->tile, lp.weight_row(q), m, taps, depthwise_words(lp, q.g0, q.g1)});
          }
          depthwise_round_trips(e, all, lp.holds, outfed);
        }
        if (trip.words > 0 && !held) depthwise_round_trips(e, {trip}, {}, outfed);
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
  if (keep_output) {
    // (The follower takes the bands from narrow memory once the fence below has passed.)
  } else if (chain.layers.back().heads.empty())
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

// (`final_forms`: halo_first's and swap_split's ops and the image's pops in pieces, in the final
// program only: the search's counts keep the forms its layouts were tuned with.)
void emit_execution(Emitter& e, const ConvChain& chain, const Shapes& shapes,
                    const std::vector<Stage>& planned, std::vector<std::pair<int, int>>& loads,
                    bool head, bool pricing, Slides slides, bool final_forms) {
  const std::optional<std::vector<Stage>> slid = slid_stages(planned, slides);
  emit_program(e, chain, shapes, slid ? *slid : planned, loads, head, pricing, final_forms, false);
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
  const int in_bytes = round_up(first.h * in_w * chain.host_channels(), 8);
  eo.input_layers.push_back(boundary_layer(chain.input_name, first.h, in_w, chain.host_channels(),
                                           first.in_zp, first.in_scale, false, chain.signed_input));
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
                                       std::string& why,
                                       const std::function<bool(const ConvHead&)>& keep_on_chip) {
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
  // (So do the held depthwise taps: each part's trip from its own rows.)
  for (LayerPlan& lp : layout.shapes.layers) {
    lp.add_row = -1;
    lp.holds.clear();
  }
  // (The program streams no parameters of its own: one inference = one pass.)
  Emitter probe = Emitter::counting();
  emit_program(probe, chain, layout.shapes, stages, loads, true, false, true, false);
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
  {
    int first = 0;
    for (const Plan& p : tiles) {
      head.bands.push_back({p.tile, first, p.out_base, p.out_bytes});
      first += p.out_bytes;
    }
  }
  head.on_chip = keep_on_chip(head);
  emit_program(execution, chain, layout.shapes, stages, loads, true, false, true, head.on_chip);
  emit_caching(caching, layout.shapes, true);
  return head;
}

bool widened_pixels_pay(const ConvChain& as_is, const ConvChain& widened) {
  auto cycles_a_pixel = [](const ConvChain& chain) {
    const LayerPlan lp = conv::shapes_of(chain).layers.front();
    const double steps = double(lp.kwords) * lp.groups;
    return op_cycles(steps * lp.group_ch * 4, steps) / lp.block;
  };
  const ConvLayer& l = as_is.layers.front();
  // (A block wider than an op's columns has no form as it is: its 4-byte pixels come from the
  // host, as before.)
  if (conv::block_of(l) * conv::block_cout(l) > conv::kColumns) return false;
  const double repack = double(l.h) * l.w * l.cin / (double(l.oh) * l.ow) / 4;
  return cycles_a_pixel(as_is) - cycles_a_pixel(widened) > repack;
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
