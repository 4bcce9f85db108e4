// Opcode table, tile op group: the 17-word tensor ops 0x01 (op), 0x02 (pool), 0x03 (reduce), 0x05
// (layout not decoded) and the 13-word NLU spline load 0x19. Field positions: isa.md 2.1.1, 2.4;
// lengths: isa.md 1.2 and models.md (0x03/0x05 = 17 words).
#include <string>

#include "isa/table_builder.h"

namespace tinycoral::isa::detail {
namespace {

// The 0x01 layout (isa.md 2.1.1), shared by 0x02 and 0x03. Regions: header [0,62), main loop
// [62,174), TTU `in` [174,557), TTU `out` [557,957), TTU `par` [957,1260), TTU `psum` [1260,1563),
// datapath and output stage [1563,2176).
OpcodeDecl tensor_op(uint8_t opcode, std::string mnemonic, std::string summary) {
  Layout l(opcode, std::move(mnemonic), 17, Unit::kTile, true, std::move(summary));
  l.tile_header(46, 16);
  std::vector<std::array<std::string, 3>> loops;
  for (int k = 0; k < 8; ++k) {
    const std::string name = "loop" + std::to_string(k);
    l.u(name, static_cast<uint16_t>(62 + 14 * k), 14,
        "main loop level " + std::to_string(k) + ": iterations - 1 (innermost first)");
    loops.push_back({"", name, ""});
  }
  l.nest_of("loops", loops);
  l.hex("loop_last", 174, 17, "partial last round of loop0: count at 174-187, mode at 188");
  // TTU `in`: narrow-memory read of the input activations, byte addresses.
  l.hex("in.base", 191, 18, "in: narrow byte address of the first input element");
  l.u("in.hmode", 209, 2, "in: low 2 bits of level 0's increment");
  l.nest("in", "in.", {211, 17, 228, 18, 246, 2, 37, 8}, "bytes");
  l.hex("in.tflags", 507, 8, "in: TTU flags (class dependent)");
  l.hex("in.sync", 515, 21, "in: staging/wait field (copy ops: 2 x staging slot bytes)");
  l.hex("in.last", 536, 38, "in: last-round record (streamed FC, byte copies)");
  // TTU `out`: narrow-memory write after the non-linear unit, advanced once per output word.
  l.hex("out.base", 574, 18, "out: narrow byte address of the first output word");
  l.u("out.hmode", 592, 2, "out: low 2 bits of level 0's increment");
  l.nest("out", "out.", {594, 17, 611, 18, 629, 2, 37, 8}, "bytes");
  l.hex("out.tflags", 890, 3, "out: TTU flags (class dependent)");
  l.rsv(893, 8);
  l.s("out.last_inc", 901, 17, "out: increment of the partial last output group");
  l.u("out.last_cnt", 918, 18, "out: words in the partial last output group - 1");
  l.u("out.last_mode", 936, 2, "out: 2 (or 3) when the last output group is partial");
  l.rsv(938, 3);
  l.u("out.last_skip", 941, 16, "out: words skipped in the partial last group");
  // TTU `par`: wide-memory read of the parameters, 64-byte units.
  l.hex("par.base", 957, 13, "par: wide address (64-B units), low 13 bits; relocated field");
  l.u("par.sel", 970, 1, "par: bit 13 of the wide address");
  l.u("par.hmode", 971, 2, "par: low 2 bits of level 0's increment");
  l.nest("par", "par.", {973, 13, 986, 14, 1000, 2, 29, 8}, "64-B units");
  l.hex("par.tflags", 1205, 8, "par: TTU flags (3 resident weights, 0xC0 weight FIFO, ...)");
  l.rsv(1213, 3);
  l.hex("par.fifo", 1216, 14, "par: rows in the weight FIFO; bit 13 = partial last round");
  l.hex("par.last", 1230, 30, "par: last-round record");
  // TTU `psum`: wide-memory partial sums.
  l.hex("psum.base", 1260, 13, "psum: wide address (64-B units), low 13 bits");
  l.u("psum.sel", 1273, 1, "psum: bit 13 of the wide address");
  l.u("psum.hmode", 1274, 2, "psum: low 2 bits of level 0's increment");
  l.nest("psum", "psum.", {1276, 13, 1289, 14, 1303, 2, 29, 8}, "64-B units");
  l.hex("psum.tflags", 1508, 15, "psum: TTU flags");
  l.hex("psum.last", 1523, 40, "psum: last-round record");
  // Datapath and output stage.
  l.hex("cfg0", 1563, 9, "op class constant (isa.md 2.1.2)");
  l.rsv(1572, 6);
  l.hex("cfg1", 1578, 10, "op class constant; bits 8-9 progress residue or `flat`");
  for (int j = 0; j < 5; ++j) {
    l.hex("sync" + std::to_string(j), static_cast<uint16_t>(1588 + 16 * j), 16,
          "sync/FIFO-watch slot " + std::to_string(j) + " (meaning a hypothesis)");
  }
  l.rsv(1668, 175);
  l.hex("cfg2", 1843, 5, "bit 0 multi-step MAC reduction; bit 1 always 1; bit 2 = !psum.sel");
  l.rsv(1848, 2);
  l.u("cfg3", 1850, 4, "7 MUL/maxpool/byte copies, 6 avg pool, else 0");
  l.u("w_zp", 1854, 8, "weight (operand b) zero point");
  l.rsv(1862, 4);
  l.hex("x1866", 1866, 4,
        "zero point of a 16-bit par operand in steps of 4096 (LSTM: 4 and 8; DeepLab gen2020 1)");
  l.u("in_zp", 1870, 8, "input zero point");
  l.rsv(1878, 6);
  l.hex("pc_aux_unit", 1884, 14, "per-channel ops: the consumer's aux_addr1 (unused here)");
  l.u("pc_aux_rows", 1898, 10, "per-channel ops: rows of the aux FIFO (meaning a hypothesis)");
  l.hex("pc_zp_unit", 1908, 14, "per-channel ops: wide unit of the weight zero-point row");
  l.rsv(1922, 1);
  l.u("dp_mode", 1923, 3,
      "datapath: 1 requant, 2 lane-select pack, 3 MAC wide weights, 4 conv/copy/pool, 5 16-bit");
  l.hex("reduce_mask", 1926, 8, "bit k = main-loop level k is a reduction level");
  l.u("out_ch_last", 1934, 6, "channels in the last output group - 1");
  l.u("out_ch", 1940, 6, "channels per output group - 1");
  l.u("nlu_mode", 1946, 3, "non-linear unit: 1 LOGISTIC, 7 rsqrt, 0 none/TANH");
  l.f32("mult", 1949, "float32 requantization multiplier");
  l.f32("clamp_max", 1981, "float32 upper clamp, relative to out_zp");
  l.f32("clamp_min", 2013, "float32 lower clamp, relative to out_zp");
  l.s("offset", 2045, 32, "int32 added to the accumulator (ADD, MAX_POOL)");
  l.u("out_zp", 2077, 8, "output zero point");
  l.rsv(2085, 4);
  l.hex("x2089", 2089, 4,
        "zero point of a 16-bit output in steps of 4096 (LSTM: 4 and 8; DeepLab gen2020 1)");
  l.u("cfg4", 2093, 1, "1 for ops with bias/parameters");
  l.u("pc_mult", 2094, 1, "per-channel multipliers from the bias store's plane 0");
  l.u("x2095", 2095, 2, "3 in two LSTM ops: the spline is odd (evaluated on |x|, x's sign)");
  l.rsv(2097, 79);
  return l.take();
}

}  // namespace

void add_tile_op_opcodes(std::vector<OpcodeDecl>& out) {
  out.push_back(
      tensor_op(kTensorOp, "op", "tensor op: MAC, requantize, copy, elementwise (isa.md 2.1)"));
  out.push_back(
      tensor_op(kPoolOp, "pool", "pooling op (MAX_POOL_2D), the 0x01 layout (isa.md 2.2)"));
  out.push_back(
      tensor_op(kReduceOp, "reduce", "reduction op (SUM/MEAN), the 0x01 layout (isa.md 2.3)"));

  // 0x05: 17 words (models.md: three back to back at 17-word spacing in movenet); its tail differs
  // from 0x01's, so only the tile header is assumed.
  {
    Layout l(kOp05, "op05", 17, Unit::kTile, true,
             "17-word tile op of undecoded layout (seen only in movenet)");
    l.tile_header(46, 16).rsv(62, 17 * 128 - 62);
    out.push_back(l.take());
  }

  // 0x19: the non-linear unit's piecewise quartic (isa.md 2.4): 8 segments x 5 coefficients, then
  // 7 breakpoints, then the mode word.
  {
    Layout l(
        kNluLoad, "nlu", 13, Unit::kTile, true,
        "load the non-linear unit's spline: 8 segments x 5 float32 coefficients, 7 breakpoints");
    l.tile_header(46, 16);
    for (int k = 0; k < 40; ++k) {
      const int seg = k / 5, j = k % 5;
      l.f32("s" + std::to_string(seg) + "c" + std::to_string(j), static_cast<uint16_t>(62 + 32 * k),
            "segment " + std::to_string(seg) + " coefficient of x^" + std::to_string(j));
    }
    for (int k = 0; k < 7; ++k) {
      l.f32("b" + std::to_string(k), static_cast<uint16_t>(62 + 32 * (40 + k)),
            "breakpoint " + std::to_string(k) + " (ascending)");
    }
    l.u("mode", 1566, 32, "3 LOGISTIC / rsqrt, 0 TANH");
    l.rsv(1598, 66);
    out.push_back(l.take());
  }
}

}  // namespace tinycoral::isa::detail
