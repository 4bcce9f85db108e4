// edgetpu_compiler 16.0's DEPTHWISE_CONV_2D (+ AVERAGE_POOL_2D) programs, rebuilt from the layer's
// shapes (depthwise_codegen.h). Every walk is written as the strides and counts of the tensor it
// visits and encoded by ttu() with the rewinding rule of docs/isa.md; the fields that are only
// reproduced (constant in the oracles, meaning unknown) are named in docs/compiler.md.
#include "compiler/depthwise_codegen.h"

#include <algorithm>
#include <array>
#include <bit>

#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/fc_layer.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kGrid = 4;               // tiles per side of the block grid
constexpr int kTiles = kGrid * kGrid;  // every tile computes one block
constexpr int kSlot = 256;             // bytes per staging slot (at least; one image row if wider)
constexpr int kFill = 256;             // bytes per ring packet of the input stream
constexpr int kPacket = 64;            // bytes per parameter packet (one tap row)
constexpr int kRingRow = 0x2078;       // wide row of the identity rows and of the output relay
constexpr int kInputRow = 0x2070;      // wide row the input packets arrive in
constexpr int kNarrowBytes = 196608;   // narrow memory per tile (isa.md 3.1)
constexpr int kWideTop = 0x2000;       // the allocator's top of the op-visible wide memory
// Positions per tile whose pool relay starts at Google's 0x1f80, and at most (relay rows from
// 0x2000 - positions, the weights below them).
constexpr int kRelayPositions = 512, kMaxPoolPositions = 2048;
// The tap FIFO (one 256-byte row, 4 units, per tap) ends kFifoGap units below the top, the aux row
// sits kAuxGap units below the FIFO (both fitted on k = 7: FIFO 0x1ef8, aux 0x1e70).
constexpr int kFifoGap = 68;
constexpr int kAuxGap = 0x88;

// One TTU level: the stride of the tensor dimension it walks (raw units: bytes for narrow walks,
// quarter 64-byte units x 4 for wide ones, i.e. 4 x the printed increment) and its count.
struct Level {
  int64_t stride, count;
};

// Encodes a walk: increment k = stride k - sum over inner levels of stride (count - 1), printed
// as floor(inc / 4) with the remainder as the previous level's mode bits (level 0's go to the
// TTU's hmode, returned in `hmode`). Unlisted levels up to 8 repeat stride 0; `mode7` marks the
// last level.
std::string ttu(std::vector<Level> levels, int mode7, int* hmode = nullptr, size_t print = 8) {
  while (levels.size() < 8) levels.push_back({0, 1});
  std::vector<int64_t> field(8), low(8);
  int64_t inner = 0;
  for (size_t k = 0; k < 8; ++k) {
    const int64_t inc = levels[k].stride - inner;
    inner += levels[k].stride * (levels[k].count - 1);
    field[k] = inc >= 0 ? inc / 4 : -((-inc + 3) / 4);
    low[k] = inc - 4 * field[k];
  }
  if (hmode != nullptr) *hmode = static_cast<int>(low[0]);
  std::string s;
  for (size_t k = 0; k < print; ++k) {
    const int64_t mode = k + 1 < 8 ? low[k + 1] : mode7;
    s += cat("(", field[k], " x ", levels[k].count, mode ? cat(" m", mode) : "", ")");
  }
  return s;
}

// Derived quantities of one layer (names follow docs/compiler.md).
struct Geometry {
  int h, w;        // image
  int bh, bw;      // block per tile
  int k, pad;      // kernel, halo width
  int bs, brows;   // block grid row stride (words) and rows, halo included
  int stride;      // convolution stride (both axes)
  int obh, obw;    // output block per tile: bh / stride x bw / stride
  int window;      // narrow byte address of the first tap of the first position
  int c, cw;       // channels, channel words
  int taps;        // k * k
  int positions;   // bh * bw
  int row_words;   // words per image row (one staging chunk)
  int slot;        // bytes per slot of the two-slot input staging
  int fills;       // 256-byte input packets per row of tiles
  int out_bytes;   // depthwise output bytes per tile
  int block_base;  // narrow byte address of the block grid
  int interior;    // narrow byte address of the block's first pixel
  int block_end;   // first byte after the grid
  int pool;        // window, 0 = none
  int pool_out;    // pooled output bytes per tile
  int wide_top;    // top of the weight/aux allocation
  bool pc_mult;    // channels with their own multipliers (an aux packet of them first)
  bool bias;       // a non-zero bias (an aux packet of int32 after the multipliers)
  int aux_rows;    // aux packets per tile: [multipliers,] [biases,] zero points
  int aux_base;    // wide unit of the first aux row (rows 4 units apart)
  int fifo, aux0, aux1, zp_unit;
  int relay;  // wide unit of the pool relay rows
};

Geometry geometry(const DepthwiseLayer& l) {
  Geometry g{};
  g.h = l.h;
  g.w = l.w;
  g.bh = l.h / kGrid;
  g.bw = l.w / kGrid;
  g.k = l.kh;
  g.pad = (l.kh - 1) / 2;
  g.bs = g.bw + 2 * g.pad;
  g.brows = g.bh + 2 * g.pad;
  g.c = l.channels;
  g.cw = l.channels / 4;
  g.taps = l.kh * l.kw;
  g.stride = l.stride_h;
  g.obh = g.bh / g.stride;
  g.obw = g.bw / g.stride;
  g.positions = g.obh * g.obw;
  g.row_words = l.w / 4;
  g.fills = (g.bh * l.w + kFill - 1) / kFill;  // the last packet may be short
  g.out_bytes = g.positions * g.c;
  g.slot = std::max(kSlot, (l.w + 255) / 256 * 256);
  g.block_base = std::max((g.out_bytes + 255) / 256 * 256, 2 * g.slot);
  g.interior = g.block_base + 4 * (g.pad * g.bs + g.pad);
  g.block_end = g.block_base + 4 * g.bs * g.brows;
  g.pool = l.pool;
  g.pool_out = l.pool ? (g.obh / l.pool) * (g.obw / l.pool) * g.c : 0;
  // TFLite's SAME padding puts pad_total / 2 before the image; the grid has pad on every side, so
  // with stride 2 (pad_total = k - 2 for even sizes) the window starts pad - pad_before in.
  const int before = std::max((g.obh * kGrid - 1) * g.stride + g.k - l.h, 0) / 2;
  g.window = g.block_base + 4 * (g.pad - before) * (g.bs + 1);
  // The pool's relay takes one unit per position from 0x1f80 (Google's, up to 512 positions, the
  // last rows over the dead input rows); a larger block's relay ends at the top instead (128x128:
  // 1024 positions from 0x1c00), with the weights below it.
  g.relay = g.positions <= kRelayPositions ? kWideTop - 0x80 : kWideTop - g.positions;
  g.wide_top = l.pool ? std::min(kWideTop - 0x100, g.relay - 0x80) : kWideTop;
  g.fifo = g.wide_top - kFifoGap - 4 * g.taps;
  g.pc_mult = !std::all_of(l.mult.begin(), l.mult.end(), [&](float m) { return m == l.mult[0]; });
  g.bias = std::any_of(l.bias.begin(), l.bias.end(), [](int32_t b) { return b != 0; });
  g.aux_rows = 1 + (g.pc_mult ? 1 : 0) + (g.bias ? 1 : 0);
  g.aux_base = g.fifo - kAuxGap;
  g.zp_unit = g.aux_base + 4 * (g.aux_rows - 1);
  g.aux0 = g.aux_base + 1;
  g.aux1 = g.aux_base + 4 * g.aux_rows;
  return g;
}

uint32_t row_tiles(int r) { return 0xfu << (4 * r); }
uint32_t column_tiles(int c) { return 0x1111u << c; }

// A mesh walk of `a` words per row over `b` rows of the block grid (stride bs words).
std::string mesh_walk(const Geometry& g, int a, int b) {
  return ttu({{4, a}, {4 * g.bs, b}}, 0, nullptr, 4);
}

container::Bitstream execution_program(const Geometry& g, const DepthwiseLayer& l) {
  Emitter e;
  program_start(e);

  // The identity rows the input copy multiplies by: words 1, 0x100, 0x10000, 0x1000000 at narrow
  // byte 2 slots, 64 zero words after them, relayed to the wide row the copy op reads.
  const int ident = 2 * g.slot;
  for (int b = 0; b < 4; ++b) {
    e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(ident + 4 * b),
                        " i=(1 x 1) fill_en=1 fill=", hex(1u << (8 * b))));
  }
  e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(ident + 16), " i=", ttu({{4, 64}}, 0, nullptr, 4),
                      " i.sdims=1 fill_en=1"));
  tile_fence(e, "units=0x3ff");
  e.add("n2w", cat("tiles=0xffff n.addr=", hex(ident / 4), " n=", ttu({{4, 68}}, 0, nullptr, 6),
                   " n.lvl_mask=0x01 w.addr=", hex(kRingRow), " w=", ttu({{4, 2}}, 0, nullptr, 4),
                   " w.lvl_mask=0x1 tail_lvl=1"));
  tile_fence(e, "units=0x020");

  // The input copy, part 1: rows 0..bh-2 of the block from the staging (each row is replayed
  // from its slot: in stride 0 along rows) into the grid's interior, one pixel per word.
  int hmode = 0;
  const auto copy_op = [&](int rows, int in_base, int out_base, const std::string& sync0) {
    std::vector<Level> in = {{1, 1}, {1, g.bw}, {g.row_words * 4, 1}, {0, rows}};
    std::vector<Level> out = {{4, 1}, {4, g.bw}, {4 * g.bs, 1}};
    std::string loops = cat("(1)(", g.bw, ")");
    std::string par = cat("(0 x 1)(0 x ", g.bw, ")");
    std::string psum = cat("(0 x 1)(0 x ", g.bw, ")");
    if (rows > 1) {
      out.push_back({4 * g.bs, rows});
      loops += cat("(1)(", rows, ")");
      par += cat("(0 x ", rows, ")");
      psum += cat("(0 x ", rows, ")");
    } else {
      par += "(0 x 1)";
    }
    out.push_back({4 * g.bs * g.brows, 1});
    const std::string in_walk = ttu(in, 3, &hmode);
    e.add("op", cat("tiles=0xffff loops=", loops, in_base ? cat(" in.base=", hex(in_base)) : "",
                    " in.hmode=", hmode, " in=", in_walk,
                    " in.tflags=0xc1 in.sync=", hex(2 * g.slot), " out.base=", hex(out_base),
                    " out=", ttu(out, 3), " out.tflags=", rows > 1 ? "0x7" : "0x3",
                    " par.base=", hex(kRingRow & 0x1fff), " par.sel=1 par.hmode=1 par=", par,
                    "(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum.hmode=1 psum=", psum,
                    " psum.tflags=0x0840 cfg0=0x007 cfg1=0x06b sync0=", sync0,
                    " sync1=0x4004 cfg2=0x06 cfg3=7 dp_mode=3 reduce_mask=0x01 out_ch_last=3 "
                    "out_ch=3 mult=1 clamp_max=inf clamp_min=-inf"));
  };
  copy_op(g.bh - 1, 0, g.interior, "0x0004");

  // The image: one activation pop, a DMA descriptor, then per row of tiles a ring consumer and an
  // infeed of its bh image rows; lane c of the row (tile column c) skips the c bw/4 words before
  // its pixels in every 64-word chunk it stages.
  input_address(e, l.input_name);
  host_pop(e, g.h * g.w);
  tile_fence(e, "counters=0x00800");
  const std::string chunks = ttu({{4, g.row_words}, {0, g.bh}}, 0, nullptr, 6);
  for (int c = 0; c < kGrid; ++c) {
    std::string skip;
    if (c > 0) {
      const int words = c * g.bw / 4;
      // The last chunk drains what is left of the tile row's stream after bh - 1 chunks.
      const int head = (g.bh * g.row_words - words) - (g.bh - 1) * g.row_words;
      skip = cat(" head_words_m1=", head - 1, " head_en=1 head_tail=", hex(4 * words),
                 " skip_en0=1 f543=1 skip_m1=", words - 1, " skip_end=", hex(words - 1));
    }
    e.add("w2n",
          cat("tiles=", hex(column_tiles(c)), " w.addr=", hex(kInputRow), " w=(0 x ", g.fills,
              ") w.rows=1 n=", chunks, " n.lvl_mask=0x01 mode=1 fill_size=", g.slot / 2, skip,
              " sync.en0=1 sync.id=14 sync.en1=1 sync.val=0x08000 sync.en2=1 "
              "sync.dec_lvl=1 sync.dec=-1 sync.dec_mode=3 tail_f871=1"));
  }
  const int row_units = g.bh * g.w / 8;
  for (int r = 0; r < kGrid; ++r) {
    e.add("ringcons0", cat("tiles=", hex(row_tiles(r)), " addr=", hex(kInputRow), " dst=(0 x ",
                           g.fills, ") slots=1 mode=1 s_id=0x0b s_val=-64 s_cnt=1 s_en_b=1 s_y=1"));
    e.add("infeed",
          cat("stream=1", r > 0 ? cat(" buf_off=", hex(row_units * r)) : "",
              " walk=", nest({{1, kActPassUnits}, {1 - kActPassUnits, 1}, {1 - kActPassUnits, 1}}),
              " k157=1 k160=1 av176=1 count_m1=", row_units - 1, " tail_en=1 count_neg=",
              hex(kActPassUnits - row_units), " f308=0x8 pop_wait=", hex(row_units * r + 1),
              " k336=1 f352=1 f391=2 dest=", hex(row_tiles(r)), " f434=0xf lanes_m1=3"));
  }
  tile_fence(e, "units=0x3ff");
  // Part 2: the block's last row, from the slot its chunk went to.
  copy_op(1, g.slot * ((g.bh - 1) % 2), g.interior + 4 * g.bs * (g.bh - 1), "0x003d");
  tile_fence(e, "counters=0x1ffff units=0x3ff");

  // The halo: pad rows north and south, then pad columns (full grid height, corners included)
  // west and east; the image border gets the fill (the input zero point).
  const std::string ns = mesh_walk(g, g.bw, g.pad);
  const std::string we = mesh_walk(g, g.pad, g.brows);
  const std::string wait =
      cat(" s0.id=0x06 s0.val=", 2 * g.pad, " s0.en_a=1 s0.en_b=1 s1.id=0x0a s1.val=", 2 * g.pad,
          " s1.en_a=1 s1.en_b=1");
  const int fill = l.in_zp;
  const std::array<uint32_t, 3> rows = {row_tiles(0), row_tiles(1) | row_tiles(2), row_tiles(3)};
  const std::array<uint32_t, 3> cols = {column_tiles(0), column_tiles(1) | column_tiles(2),
                                        column_tiles(3)};
  const int south_rows = g.interior + 4 * g.bs * (g.bh - g.pad);
  // North: row 0 only receives, row 3 sends and gets the fill.
  e.add("mesh_n", cat("tiles=", hex(rows[0]), " i.addr=", hex(g.interior + 4 * g.bs * g.bh),
                      " i=", ns, " i.sdims=3 in_mode=5"));
  e.add("mesh_n", cat("tiles=", hex(rows[1]), " o.addr=", hex(g.interior), " o=", ns,
                      " o.sdims=3 i.addr=", hex(g.interior + 4 * g.bs * g.bh), " i=", ns,
                      " i.sdims=3 in_mode=5"));
  e.add("mesh_n", cat("tiles=", hex(rows[2]), " o.addr=", hex(g.interior), " o=", ns,
                      " o.sdims=3 i.addr=", hex(g.interior + 4 * g.bs * g.bh), " i=", ns,
                      " i.sdims=3 in_mode=5 fill_en=1", fill ? cat(" fill=", hex(fill)) : ""));
  // South: row 0 sends and gets the fill, row 3 only receives.
  const int top_halo = g.block_base + 4 * g.pad;
  e.add("mesh_s", cat("tiles=", hex(rows[0]), " o.addr=", hex(south_rows), " o=", ns,
                      " o.sdims=3 i.addr=", hex(top_halo), " i=", ns,
                      " i.sdims=3 in_mode=5 fill_en=1", fill ? cat(" fill=", hex(fill)) : ""));
  e.add("mesh_s", cat("tiles=", hex(rows[1]), " o.addr=", hex(south_rows), " o=", ns,
                      " o.sdims=3 i.addr=", hex(top_halo), " i=", ns, " i.sdims=3 in_mode=5"));
  e.add("mesh_s",
        cat("tiles=", hex(rows[2]), " i.addr=", hex(top_halo), " i=", ns, " i.sdims=3 in_mode=5"));
  const int east_halo = g.block_base + 4 * (g.pad + g.bw);
  const int east_cols = g.block_base + 4 * g.bw;
  e.add("mesh_w",
        cat("tiles=", hex(cols[0]), " i.addr=", hex(east_halo), " i=", we, " i.sdims=3 in_mode=5"));
  e.add("mesh_w",
        cat("tiles=", hex(cols[1]), " o.addr=", hex(top_halo), " o=", we,
            " o.sdims=3 i.addr=", hex(east_halo), " i=", we, " i.sdims=3 in_mode=5", wait));
  e.add("mesh_w", cat("tiles=", hex(cols[2]), " o.addr=", hex(top_halo), " o=", we,
                      " o.sdims=3 i.addr=", hex(east_halo), " i=", we, " i.sdims=3 in_mode=5", wait,
                      " fill_en=1", fill ? cat(" fill=", hex(fill)) : ""));
  e.add("mesh_e", cat("tiles=", hex(cols[0]), " o.addr=", hex(east_cols), " o=", we,
                      " o.sdims=3 i.addr=", hex(g.block_base), " i=", we, " i.sdims=3 in_mode=5",
                      wait, " fill_en=1", fill ? cat(" fill=", hex(fill)) : ""));
  e.add("mesh_e",
        cat("tiles=", hex(cols[1]), " o.addr=", hex(east_cols), " o=", we,
            " o.sdims=3 i.addr=", hex(g.block_base), " i=", we, " i.sdims=3 in_mode=5", wait));
  e.add("mesh_e", cat("tiles=", hex(cols[2]), " i.addr=", hex(g.block_base), " i=", we,
                      " i.sdims=3 in_mode=5"));
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);

  // The weights: tile 0 broadcasts its aux row and tap rows to every tile's FIFO, and every tile
  // runs the depthwise op over its positions (taps innermost).
  e.add("ringcons1",
        cat("tiles=0xffff addr=", hex(g.fifo), " dst=", ttu({{4, g.taps}}, 0, nullptr, 4),
            " sdims=1 cbuf=1 slots=", g.taps, " aux_en0=1 aux_addr0=", hex(g.aux0),
            g.aux_rows > 1 ? cat(" aux_rows0_m1=", g.aux_rows - 1) : "", " aux_addr1=", hex(g.aux1),
            " aux_en1=1 mode=3 s_id=0x21 s_val=-1 s_en_a=1 s_en_b=1 s_y=1"));
  const int pos_in = 4;  // one pixel word per position
  int in_hmode = 0;
  const std::string dw_in = ttu({{pos_in, g.k},
                                 {4 * g.bs, g.k},
                                 {pos_in * g.stride, 1},
                                 {pos_in * g.stride, g.obw},
                                 {4 * g.bs * g.stride, g.obh}},
                                3, &in_hmode);
  const std::string dw_out = ttu({{4, g.cw}, {4 * g.cw, g.positions}, {4 * g.cw, 1}}, 3);
  const std::string dw_par = ttu({{4, g.taps}, {0, g.positions}}, 1);
  if (g.aux_rows > 1) {
    // The aux packets before the zero points (no oracle: the dense layers' per-channel form,
    // docs/chip_ops.md section 6) go into the output stage's planes, 8 bytes per step: the
    // multipliers (plane 0, narrow word 0) and the biases (plane 1, word 0x40), 64 words apart.
    const int planes = g.aux_rows - 1;
    const std::string n_walk = planes > 1 ? ttu({{4, g.c / 2}, {4 * 64, planes}}, 0, nullptr, 6)
                                          : ttu({{4, g.c / 2}}, 0, nullptr, 6);
    e.add("w2n", cat("tiles=0xffff w.addr=", hex(g.aux_base), " w=(1 x ", planes,
                     ") w.lvl_mask=0x1", g.pc_mult ? "" : " n.addr=0x40", " n=", n_walk,
                     " n.lvl_mask=", planes > 1 ? "0x03" : "0x01",
                     " mode=2 fill_size=64 sync.en0=1 sync.f2=1 sync.wait_lvl=2 "
                     "sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 tail_f867=1 tail_en870=1"));
  }
  e.add("op",
        cat("tiles=0xffff loops=(", g.taps, ")(", g.positions, ") in.base=", hex(g.window),
            in_hmode ? cat(" in.hmode=", in_hmode) : "", " in=", dw_in, " in.tflags=0x07 out=",
            dw_out, " out.tflags=0x1 par.base=", hex(g.fifo), " par=", dw_par,
            " par.tflags=0x80 par.fifo=", hex(g.taps), " psum=(0 x ", g.taps, ")(0 x ", g.positions,
            ") psum.tflags=0x0840 cfg0=0x0a5 cfg1=0x14f sync0=0x4000 "
            "sync1=0x4000 cfg2=0x07 cfg3=8",
            l.in_zp ? cat(" in_zp=", l.in_zp) : "", " pc_aux_unit=", hex(g.aux1),
            " pc_aux_rows=", g.aux_rows, " pc_zp_unit=", hex(g.zp_unit),
            " dp_mode=2 reduce_mask=0x01 out_ch_last=", g.c - 1, " out_ch=", g.c - 1,
            " mult=", f32_bits(g.pc_mult ? 1.0f : l.mult[0]), " clamp_max=", f32_bits(l.clamp_max),
            " clamp_min=", f32_bits(l.clamp_min), l.out_zp ? cat(" out_zp=", l.out_zp) : "",
            g.pc_mult ? " pc_mult=1" : "", g.bias ? " cfg4=1" : ""));
  e.add("ringprod", cat("tiles=0x0001 src=", ttu({{4, g.taps + g.aux_rows}}, 0, nullptr, 4),
                        " sdims=1 pcfg=4 r0.id=0x32 r0.en_a=1 r0.en_b=1 to_c1=1 dest=0x0ffff"));

  int result_base = 0;  // narrow byte address of the tile's result
  int result_bytes = g.out_bytes;
  std::string result_walk;
  if (g.pool) {
    // The pool: a ones row for the op's unused `in`, the transposing relay of the positions (4 per
    // wide row, one lane each: position (y, x) at wide unit relay + y bw + x), then the pool op
    // (window innermost) into the grid's space.
    const int p = g.pool;
    const int outs = (g.obh / p) * (g.obw / p);
    e.add("mesh_n", cat("tiles=0xffff i.addr=", hex(g.block_end), " i=",
                        ttu({{4, p * p}}, 0, nullptr, 4), " i.sdims=1 fill_en=1 fill=0x00000001"));
    tile_fence(e, "units=0x3ff");
    const int quads = g.positions / 4;
    // The average pool sums the uint8 values around their zero point (the lane step subtracts
    // w_zp) and requantizes by f32(f32(s f32(1 / s)) / p^2) (1/16 when s (1/s) rounds to 1), then
    // adds the zero point back: the CPU reference's edgetpu formula. The max pool (opcode 2,
    // 14.1's fields, isa.md 2.2) takes the maximum byte and moves it by offset -zp and out_zp.
    const float ratio = fc_multiplier(1.0f, l.out_scale, l.out_scale);
    const float pool_mult = l.max_pool ? ratio : ratio / static_cast<float>(p * p);
    const std::string pool_class =
        l.max_pool ? "cfg0=0x127 cfg2=0x06 cfg3=7" : "cfg0=0x127 cfg2=0x0e cfg3=6";
    std::string zero_points;
    if (l.out_zp != 0) {
      zero_points = l.max_pool ? cat(" offset=", -l.out_zp, " out_zp=", l.out_zp)
                               : cat(" w_zp=", l.out_zp, " out_zp=", l.out_zp);
    }
    e.add("n2w",
          cat("tiles=0xffff n=",
              ttu({{4 * g.cw, 4}, {4, g.cw}, {16 * g.cw, g.obw / 4}, {4 * g.obw * g.cw, g.obh}}, 0,
                  nullptr, 6),
              " n.lvl_mask=0x0f w.addr=", hex(g.relay), " w=", ttu({{4, quads}}, 0, nullptr, 4),
              " w.lvl_mask=0x1 sync.en0=1 sync.f1=1 transpose=1 tail_lvl=2"));
    tile_fence(e, "units=0x3ff");
    int par_hmode = 0;
    const std::string par = ttu({{1, p},
                                 {g.obw, p},
                                 {p, g.obw / p},
                                 {p * g.obw, g.obh / p},
                                 {g.positions, 1},
                                 {g.positions, 1}},
                                3, &par_hmode);
    e.add(l.max_pool ? "pool" : "op",
          cat("tiles=0xffff loops=(", p, ")(", p, ")(", g.obw / p, ")(", g.obh / p, ") in.base=",
              hex(g.block_end), " in=", ttu({{0, p}, {0, p}, {4, p * p}, {4 * p * p, 1}}, 0),
              " in.tflags=0x03", " out.base=", hex(g.block_base), " out=",
              ttu({{4, g.cw},
                   {4 * g.cw, g.obw / p},
                   {4 * g.cw * (g.obw / p), g.obh / p},
                   {4 * g.cw, 1},
                   {4 * g.cw * outs, 1}},
                  3),
              " out.tflags=0x7 par.base=", hex(g.relay), " par.hmode=", par_hmode, " par=", par,
              " par.tflags=0x0f psum=(0 x ", p * p, ")(0 x ", outs, ") psum.tflags=0x0840 ",
              pool_class,
              " dp_mode=4 "
              "reduce_mask=0x03 out_ch_last=",
              g.c - 1, " out_ch=", g.c - 1, " mult=", f32_bits(pool_mult),
              " clamp_max=", f32_bits(fc_clamp(255, l.out_zp, l.out_scale)),
              " clamp_min=", f32_bits(fc_clamp(0, l.out_zp, l.out_scale)), zero_points));
    tile_fence(e, "counters=0x1ffff units=0x3ff");
    result_base = g.block_base;
    result_bytes = g.pool_out;
    result_walk =
        ttu({{4, g.cw}, {4 * g.cw, g.obw / p}, {4 * g.cw * (g.obw / p), g.obh / p}}, 0, nullptr, 6);
  } else {
    result_walk = ttu({{4, g.cw}, {4 * g.cw, g.obw}, {4 * g.cw * g.obw, g.obh}}, 0, nullptr, 6);
  }
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);

  // The output: every tile's result over the ring to the scalar core, tiles in order.
  output_address(e, l.output_name);
  const int rows_out = (result_bytes + 255) / 256;
  const std::string n_addr = result_base ? cat(" n.addr=", hex(result_base / 4)) : "";
  if (rows_out > 1) {
    e.add("n2w", cat("tiles=0xffff", n_addr, " n=", result_walk,
                     " n.lvl_mask=0x07 w.addr=", hex(kRingRow), " w=(0 x ", rows_out,
                     ") w.rows=1 sync.en0=1 sync.id=16 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                     "sync.f45=1 tail_lvl=3"));
  } else {
    e.add("n2w",
          cat("tiles=0xffff", n_addr, " n=", result_walk, " n.lvl_mask=0x07 w.addr=", hex(kRingRow),
              " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
              "sync.wait_lvl=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 sync.f45=1 "
              "tail_lvl=3"));
  }
  descriptor(e, 5, 4, 6, static_cast<int64_t>(kTiles) * result_bytes, 3);
  for (int t = 0; t < kTiles; ++t) {
    e.add("outfeed", cat("walk=(0 x ", result_bytes / 8, ") k173=3 f222=0x7f"));
    e.add("ringprod", cat("tiles=", hex(1u << t), " addr=", hex(kRingRow), " src=(1 x 1)",
                          rows_out > 1 ? cat("(0 x ", rows_out, ")") : "",
                          " sdims=1 cbuf=1 slots=1 mode=3 pcfg=20 r0.id=0x51 r0.val=", t,
                          " r0.en_a=1 r0.en_b=1 r1.id=0x2d r1.val=1 r1.en_a=1 r1.en_b=1 "
                          "dest=0x10000"));
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync", cat("tiles=0xffff smask=0x060 thr5=", kTiles, " thr6=", g.taps + g.aux_rows,
                      " wait=0x060 sunits=0x0c"));
  tile_fence(e, "counters=0x60000 units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
  return e.finish();
}

container::Bitstream caching_program(const Geometry& g) {
  Emitter e;
  const int units = g.taps + g.aux_rows;
  tile_fence(e, "b43=1 counters=0x7ffff units=0x3ff signal=1");
  e.add("scsync", "tiles=0xffff smask=0x1ff tokwait=1 tmask=0xffff sunits=0x1f");
  e.reloc_movi(1, BufferKind::kParameter, Half::kLower32);
  e.reloc_movi(0, BufferKind::kParameter, Half::kUpper32);
  e.add("bundle", "s_op=0x0f s_x=3 imm=1");
  e.add("bundle", "s_op=0x0f s_x=2 imm=0");
  descriptor(e, 3, 2, 4, static_cast<int64_t>(units) * kPacket, 2);
  const int rows = (units + 1) / 2;
  const std::string pass =
      cat(" count_m1=", units - 1, " tail_en=1 count_neg=", hex(kParPassUnits - units));
  e.add("pop",
        cat("walk=", nest({{1, kParPassUnits}, {1 - kParPassUnits, 1}, {1 - kParPassUnits, 1}}),
            " k121=1 k124=1 par136=1", pass, " k174=1 par177=1 k178=1 b183=",
            units % 2 == 0 ? 1 : 0, " rows_neg=", hex(0x8000 - rows), " k199=1 k215=1"));
  e.add("ringcons0",
        cat("tiles=0x0001 addr=0x2 dst=", ttu({{4, units}}, 0, nullptr, 4), " sdims=1"));
  e.add("infeed",
        cat("walk=", nest({{1, kParPassUnits}, {1 - kParPassUnits, 1}, {1 - kParPassUnits, 1}}),
            " k157=1 k160=1 par172=1", pass,
            " f308=0x8 par314=1 pop_wait=0x1 k336=1 f352=1 f391=2 dest=0x1 f434=0xf"));
  tile_fence(e, "b43=1 units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 3, 2, 4);
  return e.finish();
}

}  // namespace

std::string depthwise_unsupported(const DepthwiseLayer& l) {
  if (l.in_channels != 1) {
    return "tinycoral generates DEPTHWISE_CONV_2D with one input channel (a depth multiplier) only";
  }
  if (!l.same_padding || l.stride_h != l.stride_w || l.stride_h < 1 || l.stride_h > 2) {
    return "tinycoral generates DEPTHWISE_CONV_2D with SAME padding and stride 1 or 2 only";
  }
  if (l.kh != l.kw || l.kh % 2 == 0 || l.kh < 3) {
    return "tinycoral generates square odd DEPTHWISE_CONV_2D kernels of 3 or more only";
  }
  if (l.channels % 4 != 0 || l.channels > 16) {
    return "tinycoral generates DEPTHWISE_CONV_2D with 4, 8, 12 or 16 channels only";
  }
  if (l.h % kGrid != 0 || l.w % 16 != 0) {
    return "tinycoral generates DEPTHWISE_CONV_2D on images whose height is a multiple of 4 and "
           "width of 16 only";
  }
  const int pad = (l.kh - 1) / 2;
  if (l.h / kGrid < pad || l.w / kGrid < pad || l.h / kGrid < 2) {
    return "DEPTHWISE_CONV_2D blocks smaller than the kernel's halo are not generated";
  }
  const int s = l.stride_h;
  if (l.h / kGrid % s != 0 || l.w / kGrid / s % 4 != 0) {
    return "a strided DEPTHWISE_CONV_2D whose output blocks are not whole words of positions "
           "(H a multiple of 8, W of 32) is not generated";
  }
  if (l.pool) {
    const int bh = l.h / kGrid / s, bw = l.w / kGrid / s;
    if (l.pool < 2 || l.pool > 8 || bh % l.pool != 0 || bw % l.pool != 0) {
      return "tinycoral generates pool windows of 2 to 8 that divide each tile's block only";
    }
    if ((bh / l.pool) * (bw / l.pool) * l.channels % 8 != 0) {
      return "a pooled block that is not a whole number of 8-byte output units is not generated";
    }
  }
  const Geometry g = geometry(l);
  if (l.w > 512 || g.block_end + 64 > kNarrowBytes || (l.pool && g.positions > kMaxPoolPositions)) {
    return "this DEPTHWISE_CONV_2D does not fit a tile's memories in one block";
  }
  return "";
}

std::vector<uint8_t> depthwise_parameters(const DepthwiseLayer& l) {
  std::vector<uint8_t> out;
  const auto put32 = [&](uint32_t v) {
    for (int b = 0; b < 4; ++b) out.push_back(static_cast<uint8_t>(v >> (8 * b)));
  };
  const Geometry g = geometry(l);
  if (g.pc_mult) {
    for (int c = 0; c < kPacket / 4; ++c) {
      put32(c < l.channels ? std::bit_cast<uint32_t>(l.mult[static_cast<size_t>(c)]) : 0u);
    }
  }
  if (g.bias) {
    for (int c = 0; c < kPacket / 4; ++c) {
      put32(c < l.channels ? static_cast<uint32_t>(l.bias[static_cast<size_t>(c)]) : 0u);
    }
  }
  for (int c = 0; c < kPacket / 4; ++c) put32(c < l.channels ? 128u : 0u);
  for (int t = 0; t < l.kh * l.kw; ++t) {
    for (int c = 0; c < kPacket / 4; ++c) {
      if (c < l.channels) {
        const int8_t w = l.weights[static_cast<size_t>(t * l.channels + c)];
        out.push_back(static_cast<uint8_t>(w + 128));
        out.push_back(128);
        out.push_back(128);
        out.push_back(128);
      } else {
        put32(0);
      }
    }
  }
  return out;
}

DepthwisePrograms generate_depthwise(const DepthwiseLayer& l) {
  if (const std::string why = depthwise_unsupported(l); !why.empty()) fail(why);
  const Geometry g = geometry(l);
  DepthwisePrograms out;
  container::Executable& eo = out.execution = execution_executable(execution_program(g, l));
  eo.input_layers.push_back(
      boundary_layer(l.input_name, l.h, l.w, 1, l.in_zp, l.in_scale, false, l.signed_input));
  const int oh = l.out_h() / (g.pool ? g.pool : 1);
  const int ow = l.out_w() / (g.pool ? g.pool : 1);
  const int tile_h = oh / kGrid, tile_w = ow / kGrid;
  const int tile_bytes = tile_h * tile_w * g.c;
  container::Layer y =
      boundary_layer(l.output_name, oh, ow, g.c, l.out_zp, l.out_scale, true, l.signed_output);
  // Tile 4r + c holds block (r, c) row-major with the channels innermost; tiles in order.
  container::OutputLayout layout;
  for (int r = 0; r < oh; ++r) {
    layout.y_coordinate_to_linear_tile_id_map.push_back(kGrid * (r / tile_h));
    layout.y_coordinate_to_local_y_offset.push_back(r % tile_h);
  }
  for (int x = 0; x < ow; ++x) {
    layout.x_coordinate_to_linear_tile_id_map.push_back(x / tile_w);
    layout.x_coordinate_to_local_byte_offset.push_back((x % tile_w) * g.c);
    layout.x_coordinate_to_local_y_row_size.push_back(tile_w * g.c);
  }
  for (int t = 0; t < kTiles; ++t) layout.linearized_tile_byte_offset.push_back(t * tile_bytes);
  y.output_layout = layout;
  y.shape = {{0, 0}, {0, oh - 1}, {0, ow - 1}, {0, g.c - 1}};
  eo.output_layers.push_back(std::move(y));
  eo.used_narrow_memory_bytes_per_tile = g.pool ? g.block_end + 4 * g.pool * g.pool : g.block_end;
  eo.dma_hints = execution_hints(l.input_name, l.h * l.w, l.output_name, oh * ow * g.c);
  const container::Executable& pc = out.caching =
      caching_executable(caching_program(g), depthwise_parameters(l));
  // Salted ("dw") so that depthwise parameters never share a token with an FC's equal bytes.
  eo.parameter_caching_token = out.caching.parameter_caching_token =
      caching_token(pc.parameters) ^ 0x6477;
  return out;
}

}  // namespace tinycoral::compiler
