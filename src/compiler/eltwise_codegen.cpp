// The ADD and MUL generator (eltwise_codegen.h). The data movement (program start, host streams,
// output through the scalar core, fences) follows the CONV_2D generator's; the ops are
// edgetpu_compiler 16.0's classes as the virtual Edge TPU runs them (docs/chip_ops.md 3.4,
// isa.md 2.1.5).
#include "compiler/eltwise_codegen.h"

#include <algorithm>
#include <limits>

#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {

using container::BufferKind;
using container::Half;

namespace {

constexpr int kTiles = 16;
constexpr int kPiece = 256;         // bytes per ring packet
constexpr int kRingFifo = 0x2078;   // wide row of the output packets
constexpr int kInputFifo = 0x1e00;  // input packets: kInputRows rows of their own, then a fence
constexpr int kInputRows = 32;
constexpr int kPacketsPerMove = 4;  // input packets per infeed / ring consumer / wideToNarrow
constexpr int kAddRows = 0x1c00;    // ADD's 4 weight rows (wide units, one row every 4)
constexpr int kIdentityRow = kMulIdentityRow;  // MUL's pack (and RELU) read the 4 x 4 identity
constexpr int kMulFifo = 0x2004;               // MUL's b, one word per fill
constexpr int kNarrowBytes = 196608;
constexpr int kMaxStreamUnits = 0xffff;  // the infeeds' pop_wait counts units in 16 bits
constexpr int kAddWords = 4096;          // words per ADD op

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Where each tile's run of the operands and the output lives.
struct Geometry {
  int64_t padded = 0;  // bytes of each operand and the output, rounded up to 8-byte units
  int tiles = 0;
  int run = 0;  // bytes per tile (whole packets; the last tile's run may be shorter)
  int a_base = 0, b_base = 0, out_base = 0, aux_base = 0, products = 0, narrow_end = 0;
  int bytes_of(int t) const {
    return static_cast<int>(std::min<int64_t>(run, padded - int64_t{t} * run));
  }
};

Geometry geometry(const EltwiseLayer& l) {
  Geometry g;
  g.padded = round_up(l.elements, 8);
  const int64_t pieces = (g.padded + kPiece - 1) / kPiece;
  const int64_t per_tile = (pieces + kTiles - 1) / kTiles;
  g.run = static_cast<int>(per_tile * kPiece);
  g.tiles = static_cast<int>((pieces + per_tile - 1) / per_tile);
  g.a_base = 0;
  g.b_base = l.same_operand() ? 0 : g.run;
  g.out_base = g.b_base + g.run;
  g.aux_base = g.out_base + g.run;  // ADD: 16 weight words; MUL: the identity's 4 words
  g.products = g.aux_base + 64;     // MUL: one word per element of a run
  g.narrow_end = g.products + (l.kind == EltwiseLayer::Kind::kMul ? 4 * 4 * kMulRunWords : 0);
  return g;
}

// One operand from the host: one activation pop, then per 256-byte packet a wideToNarrow on the
// tile that holds it, a ring consumer and an infeed (the CONV_2D generator's image stream).
void stream_operand(Emitter& e, const Geometry& g, const std::string& name, int base) {
  input_address(e, name);
  host_pop(e, g.padded);
  // Up to kPacketsPerMove packets of a tile's run move together: one infeed, one ring consumer
  // into as many FIFO rows, one wideToNarrow (a third of the instructions of one packet each).
  int move = 0;
  for (int t = 0; t < g.tiles; ++t)
    for (int at = 0; at < g.bytes_of(t); at += kPiece * kPacketsPerMove, ++move) {
      constexpr int kMoves = kInputRows / kPacketsPerMove;
      if (move > 0 && move % kMoves == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const int fifo = kInputFifo + 4 * kPacketsPerMove * (move % kMoves);
      const int bytes = std::min(kPiece * kPacketsPerMove, g.bytes_of(t) - at);
      host_to_narrow(e, tile_bit(t), fifo, base + at, bytes, (t * g.run + at) / 8);
    }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// Tiles that hold a run of `words` words (all but maybe the last hold a whole run).
std::vector<std::pair<uint32_t, int>> runs(const Geometry& g) {
  std::vector<std::pair<uint32_t, int>> out;
  for (int t = 0; t < g.tiles; ++t) {
    const int words = (g.bytes_of(t) + 3) / 4;
    if (!out.empty() && out.back().second == words)
      out.back().first |= tile_bit(t);
    else
      out.push_back({tile_bit(t), words});
  }
  return out;
}

// Single-word mesh fills of narrow memory (values at byte addresses), after a zero fill of
// `words` words from `base`; the way looming's program builds its ADD weight rows.
void fill_words(Emitter& e, uint32_t tiles, int base, int words,
                const std::vector<std::pair<int, uint32_t>>& values) {
  e.add("mesh_n",
        cat("tiles=", hex(tiles), " i.addr=", hex(base), " i=(1 x ", words, ")(", 1 - words,
            " x 1)(", 1 - words, " x 1)(", 1 - words, " x 1) i.sdims=1 fill_en=1 fill=0x0"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  for (size_t i = 0; i < values.size(); ++i)
    e.add("mesh_n", cat("tiles=", hex(tiles), " i.addr=", hex(values[i].first), " i=(1 x 1)",
                        i + 1 == values.size() ? " in_mode=3" : "",
                        " fill_en=1 fill=", hex(values[i].second)));
}

void add_ops(Emitter& e, const Geometry& g, const EltwiseLayer& l, uint32_t all) {
  emit_add_rows(e, all, g.aux_base, kAddRows, l.w1, l.w2);
  for (const auto& [tiles, words] : runs(g))
    for (int w0 = 0; w0 < words; w0 += kAddWords) {
      const int c = std::min(kAddWords, words - w0);
      AddOp op;
      op.a = g.a_base + 4 * w0;
      op.b_minus_a = g.b_base - g.a_base;
      op.out = g.out_base + 4 * w0;
      op.rows = kAddRows;
      op.levels = {{c, 4, 1}};
      emit_add_op(e, tiles, op, l.mult, l.clamp_min, l.clamp_max, l.offset, l.out_zp);
    }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// MUL (isa.md 2.1.5, looming words 273-329): per run of up to 256 words, the product op writes one
// word per element (a byte times b's lane, b one word per FIFO fill), the pack op gathers them.
void mul_ops(Emitter& e, const Geometry& g, const EltwiseLayer& l, uint32_t all) {
  emit_identity_row(e, all, g.aux_base);
  for (const auto& [tiles, words] : runs(g))
    for (int w0 = 0; w0 < words; w0 += kMulRunWords) {
      MulOp op;
      op.a = g.a_base + 4 * w0;
      op.b = g.b_base + 4 * w0;
      op.products = g.products;
      op.out = g.out_base + 4 * w0;
      op.levels = {{std::min(kMulRunWords, words - w0), 4, 1}};
      emit_mul_op(e, tiles, op, l.a_zp, l.b_zp, l.mult, l.clamp_min, l.clamp_max, l.out_zp);
    }
}

// RELU / RELU6 (isa.md 2.1.5 requantize family): each input word times the 4 x 4 identity row
// gives x - in_zp per byte, then the output stage; one op per run of up to 4096 words.
void relu_ops(Emitter& e, const Geometry& g, const EltwiseLayer& l, uint32_t all) {
  emit_identity_row(e, all, g.aux_base);
  for (const auto& [tiles, words] : runs(g))
    for (int w0 = 0; w0 < words; w0 += kAddWords) {
      const int w = std::min(kAddWords, words - w0);
      e.add("op", cat("tiles=", hex(tiles), " loops=(", w, ") in.base=", hex(g.a_base + 4 * w0),
                      " in=", strided_walk({{1, w}}, 8, " m3"), " in.tflags=0x01 out.base=",
                      hex(g.out_base + 4 * w0), " out=", strided_walk({{1, w}}, 8, " m3"),
                      " out.tflags=0x1 par.base=", hex(kIdentityRow & 0x1fff),
                      " par.sel=1 par=(0 x ", w, ") psum=(0 x ", w,
                      ") psum.tflags=0x0800 cfg0=0x005 cfg1=0x14d sync0=0x4000 sync1=0x4000 "
                      "cfg2=0x06 in_zp=",
                      l.a_zp, " dp_mode=1 out_ch_last=3 out_ch=3 mult=", f32_bits(l.mult),
                      " clamp_max=", f32_bits(l.clamp_max), " clamp_min=", f32_bits(l.clamp_min),
                      " out_zp=", l.out_zp));
    }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

// Each tile's run of the output, in 256-byte pieces through the ring to the scalar core.
void stream_output(Emitter& e, const Geometry& g, const std::string& name) {
  output_address(e, name);
  descriptor(e, 5, 4, 6, g.padded, 3);
  int ordinal = 0;
  for (int t = 0; t < g.tiles; ++t)
    for (int at = 0; at < g.bytes_of(t); at += kPiece) {
      const int bytes = std::min(kPiece, g.bytes_of(t) - at);
      e.add("n2w", cat("tiles=", hex(tile_bit(t)), " n.addr=", hex((g.out_base + at) / 4),
                       " n=", narrow_walk(bytes / 4), " n.lvl_mask=0x01 w.addr=", hex(kRingFifo),
                       " w=(1 x 1) w.circ=1 w.rows=1 sync.en0=1 sync.f1=1 sync.id=16 "
                       "sync.wait_lvl=1 sync.en1=1 sync.val=0xffff sync.en2=1 sync.f45=1 "
                       "tail_lvl=1"));
      e.add("outfeed", cat("walk=(0 x ", bytes / 8, ") k173=3 f222=0x7f"));
      ring_send(e, t, kRingFifo, 0x10000, ordinal++);
    }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  e.add("scsync",
        cat("tiles=0xffff smask=0x020 thr5=", (g.padded + 31) / 32, " wait=0x020 sunits=0x0c"));
}

container::Bitstream program(const EltwiseLayer& l, const Geometry& g) {
  Emitter e;
  program_start(e);
  tile_fence(e, "units=0x020");
  stream_operand(e, g, l.a_name, g.a_base);
  if (!l.same_operand()) stream_operand(e, g, l.b_name, g.b_base);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  const uint32_t all = first_tiles(g.tiles);
  if (l.kind == EltwiseLayer::Kind::kAdd)
    add_ops(e, g, l, all);
  else if (l.kind == EltwiseLayer::Kind::kMul)
    mul_ops(e, g, l, all);
  else
    relu_ops(e, g, l, all);
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
  stream_output(e, g, l.output_name);
  tile_fence(e, "counters=0x20000 units=0x3ff signal=1");
  wait_tokens(e);
  tile_fence(e, "units=0x3ff signal=1 f109=3");
  wait_tokens(e);
  interrupt(e, 5, 4, 6);
  return e.finish();
}

container::Layer layer_of(const std::string& name, const EltwiseLayer& l, const Geometry& g,
                          int32_t zp, float scale, bool output, bool is_signed) {
  container::Layer layer =
      boundary_layer(name, 1, 1, static_cast<int>(l.elements), zp, scale, output, is_signed);
  layer.size_bytes = static_cast<int>(g.padded);
  return layer;
}

}  // namespace

// Row h + 2o (half h, operand o) gives output byte 2h + j the weight w_o on input byte j of the
// halfword: acc = w1 a + w2 b (looming's rows: mesh fills, then one narrowToWide).
void emit_add_rows(Emitter& e, uint32_t tiles, int scratch, int rows, int32_t w1, int32_t w2,
                   AddRowFills fills) {
  const auto u1 = static_cast<uint32_t>(w1), u2 = static_cast<uint32_t>(w2);
  const int at = scratch;
  if (fills == AddRowFills::kPaired) {
    // Words 0/6, 1/7, 8/14, 9/15: a walk of two words 6 apart (24 bytes) per value; before them
    // the zeros of words 2-5 and 10-13 (two levels), so no fill overwrites another and no fence
    // comes between (Google's v2 fills its rows so too, one word or run at a time: words 730-784).
    e.add("mesh_n", cat("tiles=", hex(tiles), " i.addr=", hex(at + 8),
                        " i=", strided_walk({{1, 4}, {8, 2}}, 4), " i.sdims=3 fill_en=1 fill=0x0"));
    const std::pair<int, uint32_t> pairs[] = {
        {at, u1}, {at + 4, u1 << 16}, {at + 32, u2}, {at + 36, u2 << 16}};
    for (const auto& [addr, value] : pairs)
      e.add("mesh_n", cat("tiles=", hex(tiles), " i.addr=", hex(addr),
                          " i=(6 x 2)(-6 x 1)(-6 x 1)(-6 x 1) i.sdims=1",
                          addr == at + 36 ? " in_mode=3" : "", " fill_en=1 fill=", hex(value)));
  } else {
    fill_words(e, tiles, at, 16,
               {{at, u1},
                {at + 4, u1 << 16},
                {at + 24, u1},
                {at + 28, u1 << 16},
                {at + 32, u2},
                {at + 36, u2 << 16},
                {at + 56, u2},
                {at + 60, u2 << 16}});
  }
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(at / 4),
                   " n=(1 x 4)(1 x 4)(-15 x 1)(-15 x 1)(-15 x 1)(-15 x 1) n.lvl_mask=0x03 w.addr=",
                   hex(rows),
                   " w=(1 x 4)(-3 x 1)(-3 x 1)(-3 x 1) w.lvl_mask=0x1 sync.en0=1 sync.f1=1 "
                   "sync.id=5 sync.wait_lvl=1 sync.en1=1 sync.en2=1 tail_lvl=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

void emit_add_op(Emitter& e, uint32_t tiles, const AddOp& op, float mult, float clamp_min,
                 float clamp_max, int32_t offset, int32_t out_zp) {
  std::vector<std::pair<int64_t, int64_t>> in = {{2, 2}, {op.b_minus_a, 2}}, out = {{1, 1}};
  std::string loops = "(2)(2)", par = "(1 x 4)", psum = "(0 x 4)";
  for (const AddOp::Level& v : op.levels) {
    in.push_back({v.in_stride, v.count});
    out.push_back({v.out_stride, v.count});
    loops += cat("(", v.count, ")");
    par += cat("(-3 x ", v.count, ")");
    psum += cat("(0 x ", v.count, ")");
  }
  for (size_t k = op.levels.size() + 1; k < 8; ++k) par += k == 7 ? "(-3 x 1 m1)" : "(-3 x 1)";
  int hmode = 0;
  const std::string in_walk = byte_walk(in, 3, &hmode);
  e.add("op", cat("tiles=", hex(tiles), " loops=", loops, " in.base=", hex(op.a),
                  " in.hmode=", hmode, " in=", in_walk, " in.tflags=0x0f out.base=", hex(op.out),
                  " out=", strided_walk(out, 8, " m3"), " out.tflags=0x7 par.base=", hex(op.rows),
                  " par=", par, " psum=", psum,
                  " psum.tflags=0x0840 cfg0=0x009 cfg1=0x1ad sync0=0x4000 sync1=0x4000 cfg2=0x16 "
                  "dp_mode=4 reduce_mask=0x03 out_ch_last=3 out_ch=3 mult=",
                  f32_bits(mult), " clamp_max=", f32_bits(clamp_max),
                  " clamp_min=", f32_bits(clamp_min), " offset=", offset, " out_zp=", out_zp));
}

void emit_identity_row(Emitter& e, uint32_t tiles, int scratch) {
  const int id = scratch;
  fill_words(e, tiles, id, 4,
             {{id, 0x1}, {id + 4, 0x100}, {id + 8, 0x10000}, {id + 12, 0x1000000}});
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(id / 4), " n=", narrow_walk(4),
                   " n.lvl_mask=0x01 w.addr=", hex(kIdentityRow),
                   " w=(1 x 1) sync.en0=1 sync.f1=1 sync.id=5 sync.wait_lvl=1 sync.en1=1 "
                   "sync.en2=1 tail_lvl=1"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

void emit_mul_op(Emitter& e, uint32_t tiles, const MulOp& op, int32_t a_zp, int32_t b_zp,
                 float mult, float clamp_min, float clamp_max, int32_t out_zp) {
  // The product op's `in` walks a byte by byte and b's narrowToWide word by word through the
  // levels; the products are one dense run of 4 n words, so the loops, `par` and `psum` (and the
  // pack's `in`) count the n words flat: each TTU advances once per step whatever its levels.
  int64_t n = 1;
  std::vector<std::pair<int64_t, int64_t>> in = {{1, 4}}, b_words, out = {{1, 1}};
  for (const MulOp::Level& v : op.levels) {
    n *= v.count;
    in.push_back({v.in_stride, v.count});
    b_words.push_back({v.in_stride / 4, v.count});
    out.push_back({v.out_stride, v.count});
  }
  int hmode = 0;
  const std::string in_walk = byte_walk(in, 3, &hmode);
  const float inf = std::numeric_limits<float>::infinity();
  e.add("op",
        cat("tiles=", hex(tiles), " loops=(4)(1)(", n, ") in.base=", hex(op.a), " in.hmode=", hmode,
            " in=", in_walk, " in.tflags=0x03 out.base=", hex(op.products),
            " out=", strided_walk({{1, 1}, {1, 4}, {4, n}}, 8, " m3"), " out.tflags=0x7 par.base=",
            hex(kMulFifo & 0x1fff), " par.sel=1 par.hmode=1 par=(0 x 4 m1)(-1 x 1 m1)(-1 x ", n,
            " m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1) par.tflags=0x40 "
            "par.fifo=0x0001 psum.hmode=1 psum=(0 x 1)(0 x 4)(0 x ",
            n,
            ")(0 x 1)(0 x 1)(0 x 1)(0 x 1)(0 x 1 m1) psum.tflags=0x0840 cfg0=0x060 "
            "cfg1=0x12d sync0=0x4000 sync1=0x4000 cfg2=0x06 cfg3=7 w_zp=",
            b_zp, " in_zp=", a_zp, " dp_mode=4 out_ch_last=3 out_ch=3 mult=", f32_bits(mult),
            " clamp_max=", f32_bits(clamp_max), " clamp_min=", f32_bits(clamp_min),
            " out_zp=", out_zp));
  e.add("n2w", cat("tiles=", hex(tiles), " n.addr=", hex(op.b / 4), " n=", strided_walk(b_words, 6),
                   " n.lvl_mask=0x01 w.addr=", hex(kMulFifo), " w=(0 x ", n,
                   ") w.rows=1 sync.en0=1 sync.id=1 sync.en1=1 sync.val=0x0ffff sync.en2=1 "
                   "sync.f45=1"));
  tile_fence(e, "units=0x020");
  e.add("op",
        cat("tiles=", hex(tiles), " loops=(4)(1)(", n, ") in.base=", hex(op.products),
            " in=", strided_walk({{1, 4}, {4, n}}, 8, " m3"),
            " in.tflags=0x03 out.base=", hex(op.out), " out=", strided_walk(out, 8, " m3"),
            " out.tflags=0x3 par.base=", hex(kIdentityRow & 0x1fff),
            " par.sel=1 par.hmode=1 par=(0 x 4 m1)(-1 x 1 m1)(-1 x ", n,
            " m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1)(-1 x 1 m1) par.tflags=0x40 "
            "psum=(0 x 4)(0 x 1)(0 x ",
            n, ") psum.tflags=0x0840 cfg2=0x06 cfg3=7 dp_mode=2 out_ch_last=3 out_ch=3",
            " mult=", f32_bits(1.0f), " clamp_max=", f32_bits(inf), " clamp_min=", f32_bits(-inf)));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

std::string eltwise_unsupported(const EltwiseLayer& l) {
  const char* what = l.kind == EltwiseLayer::Kind::kAdd   ? "ADD"
                     : l.kind == EltwiseLayer::Kind::kMul ? "MUL"
                                                          : "RELU";
  if (l.elements <= 0) return cat(what, " of empty tensors");
  if (round_up(l.elements, 8) / 8 >= kMaxStreamUnits)
    return cat(what, " of ", l.elements, " elements (host streams of up to ", kMaxStreamUnits * 8,
               " bytes per operand yet)");
  const Geometry g = geometry(l);
  if (g.narrow_end > kNarrowBytes)
    return cat(what, " needs ", g.narrow_end, " bytes of narrow memory per tile");
  return "";
}

container::Executable generate_eltwise(const EltwiseLayer& l) {
  if (const std::string why = eltwise_unsupported(l); !why.empty()) fail(why);
  const Geometry g = geometry(l);
  container::Executable eo = execution_executable(program(l, g));
  eo.type = container::ExecutableType::kStandAlone;
  eo.input_layers.push_back(layer_of(l.a_name, l, g, l.a_zp, l.a_scale, false, l.signed_a));
  if (!l.same_operand())
    eo.input_layers.push_back(layer_of(l.b_name, l, g, l.b_zp, l.b_scale, false, l.signed_b));
  container::Layer out =
      layer_of(l.output_name, l, g, l.out_zp, l.out_scale, true, l.signed_output);
  for (int32_t d : l.shape) out.shape.push_back({0, d - 1});
  eo.output_layers.push_back(std::move(out));
  eo.used_narrow_memory_bytes_per_tile = g.narrow_end;
  eo.dma_hints.fully_deterministic = true;
  const int bytes = static_cast<int>(g.padded);
  eo.dma_hints.hints.push_back(instruction_hint());
  eo.dma_hints.hints.push_back(
      dma_hint(BufferKind::kInput, container::Direction::kInfeed, l.a_name, bytes));
  if (!l.same_operand())
    eo.dma_hints.hints.push_back(
        dma_hint(BufferKind::kInput, container::Direction::kInfeed, l.b_name, bytes));
  eo.dma_hints.hints.push_back(
      dma_hint(BufferKind::kOutput, container::Direction::kOutfeed, l.output_name, bytes));
  eo.dma_hints.hints.push_back(interrupt_hint());
  return eo;
}

}  // namespace tinycoral::compiler
