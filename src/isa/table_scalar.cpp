// Opcode table, scalar group: the tile fence 0x1a (tile-dispatched, 1 word), the scalar core's
// bundle/halt/branch/loop (0x20-0x23), scalar fence 0x24, host streams 0x25-0x27 and the program
// frame start/end (0x3e/0x3f). Field positions: isa.md 1.4, 2.8-2.11.
#include <string>

#include "isa/table_builder.h"

namespace tinycoral::isa::detail {
namespace {

OpcodeDecl sync() {
  Layout l(
      kTileSync, "sync", 1, Unit::kTile, true,
      "tile fence: wait for tile units, set/wait sync counters, optionally signal the scalar core");
  l.tile_header(28, 15);
  l.u("b43", 43, 1, "set in sync_init/sync_final of caching programs");
  l.hex("counters", 44, 19, "tile sync counters, bit k = counter k (isa.md 2.12)");
  l.hex("count", 63, 16, "counter value (0 = reset)");
  l.hex("units", 79, 10, "tile units: bit 0 op, bits 6-9 mesh 0x15-0x18, 0x3ff all");
  l.rsv(89, 18);
  l.u("signal", 107, 1, "send a completion token to the scalar core");
  l.rsv(108, 1);
  l.u("f109", 109, 2, "3 only in the final sync");
  l.rsv(111, 17);
  return l.take();
}

OpcodeDecl bundle() {
  Layout l(kBundle, "bundle", 1, Unit::kScalar, false,
           "scalar VLIW bundle: ALU, load/store, push, DMA descriptor, special function; "
           "all zero = nop");
  l.u("enable_vector", 12, 2,
      "memory slot: 1 load from the word address imm_size, 2 load, 3 load with post-increment");
  l.u("vs_reg_v1", 14, 5, "memory slot: load destination register");
  l.hex("imm_size", 19, 12,
        "memory slot: address register (low 5 bits), post-increment (bit 5); mode 1: word "
        "address");
  l.hex("v_op", 31, 5,
        "2 store to the word address v_cmd:v_offset, 4 store, 6 store with post-increment, 8 push "
        "to host stream, 0xa descriptor push, 0xc descriptor issue");
  l.u("v_offset", 36, 8,
      "store address register (low 5 bits; bit 5 set with v_op 6) / descriptor word index");
  l.u("v_cmd", 44, 5, "v_op 2: high bits of the store's word address; else unknown");
  l.u("vs_reg", 49, 5, "source register of store/push/descriptor");
  l.hex("s_op", 54, 6, "ALU op: bit 5 immediate form, low 5 bits operation; 0 none, 0x2f MOVI");
  l.u("s_x", 60, 5, "ALU destination register (predicate for compares)");
  l.u("s_y", 65, 5, "ALU first source register");
  l.hex("imm", 70, 32, "ALU immediate (or source register); relocations patch it");
  l.u("v_op2", 102, 3, "special function: 2 reciprocal, 3 exp2");
  l.u("vs_reg_w", 105, 5, "special function source register");
  l.u("sfu_dst", 110, 5, "special function destination register");
  l.rsv(115, 13);
  return l.take();
}

OpcodeDecl halt() {
  Layout l(kHalt, "halt", 1, Unit::kScalar, false,
           "stop the scalar core; code 4 program end, 1 continue in the next bitstream");
  l.rsv(12, 2);
  l.u("code", 14, 5, "4 = end of program, 1 = program continues in the next bitstream");
  l.rsv(19, 109);
  return l.take();
}

OpcodeDecl branch() {
  Layout l(kBranch, "branch", 1, Unit::kScalar, false,
           "relative branch while p0 (word offset from this instruction)");
  l.u("k12", 12, 1, "1 with k16: taken while p0; both 0: always taken (the LSTM's time loop)");
  l.rsv(13, 3);
  l.u("k16", 16, 1, "1 with k12; meaning unknown");
  l.s("offset", 17, 15, "signed word offset relative to this instruction");
  l.rsv(32, 1);
  l.u("k33", 33, 1, "1 in some scalar-memory outfeed loops (gen2020, LSTM); meaning unknown");
  l.rsv(34, 94);
  return l.take();
}

OpcodeDecl loop() {
  Layout l(kLoop, "loop", 1, Unit::kScalar, false,
           "hardware loop: repeat the next `body` words `count` times");
  l.u("count", 12, 16, "repetitions");
  l.u("body", 28, 5, "words in the loop body");
  l.rsv(33, 95);
  return l.take();
}

OpcodeDecl scsync() {
  Layout l(kScalarSync, "scsync", 2, Unit::kScalar, false,
           "scalar fence: wait for tile tokens, set or wait scalar sync counters, wait for units");
  l.hex("tiles", 12, 16, "0xffff with tokwait or waits, else 0");
  l.rsv(28, 4);
  l.hex("smask", 32, 9, "scalar counter mask (isa.md 2.12)");
  l.rsv(41, 2);
  l.hex("value", 43, 13, "value for the selected counters");
  l.rsv(56, 1);
  l.u("tokwait", 57, 1, "wait for the fence tokens of the tiles in tmask");
  l.rsv(58, 15);
  l.hex("tmask", 73, 16, "tiles whose tokens are awaited");
  l.rsv(89, 4);
  for (int k = 0; k < 9; ++k) {
    l.u("thr" + std::to_string(k), static_cast<uint16_t>(93 + 16 * k), 16,
        "wait threshold of scalar counter " + std::to_string(k));
  }
  l.hex("wait", 237, 9, "bit k: wait until counter k >= thr<k>");
  l.hex("sunits", 246, 5, "scalar units to wait idle for");
  l.rsv(251, 5);
  return l.take();
}

// The (stride, limit) walk levels of pop/infeed/outfeed: level k's stride at lo + k*step,
// its limit right after it.
NestGeometry walk(uint16_t lo, uint8_t stride_width, uint8_t limit_width, int levels) {
  const auto step = static_cast<uint16_t>(stride_width + limit_width);
  return {lo,   stride_width, static_cast<uint16_t>(lo + stride_width), limit_width, 0, 0,
          step, levels};
}

OpcodeDecl pop() {
  Layout l(kPop, "pop", 2, Unit::kScalar, false,
           "avDataPop (stream 1) / parameterPop (stream 0): host DMA stream into a staging buffer");
  l.u("stream", 12, 1, "1 activations (8-B units), 0 parameters (64-B units)");
  l.rsv(13, 15);
  l.nest("walk", "walk.", walk(28, 16, 15, 3), "units");
  l.u("k121", 121, 1, "always 1");
  l.rsv(122, 2);
  l.u("k124", 124, 1, "always 1");
  l.rsv(125, 1);
  l.u("direct", 126, 1, "1 = skip the staging-buffer walk");
  l.rsv(127, 9);
  l.u("par136", 136, 1, "1 for parameter pops");
  l.rsv(137, 3);
  l.u("av140", 140, 1, "1 for activation pops");
  l.rsv(141, 1);
  l.u("count_m1", 142, 14, "units in the last pass - 1");
  l.rsv(156, 1);
  l.u("tail_en", 157, 1, "1 unless the last pass is full");
  l.rsv(158, 1);
  l.hex("count_neg", 159, 14, "minus the units of the last pass");
  l.rsv(173, 1);
  l.u("k174", 174, 1, "always 1");
  l.rsv(175, 2);
  l.u("par177", 177, 1, "1 for parameter pops");
  l.u("k178", 178, 1, "always 1");
  l.rsv(179, 4);
  l.u("b183", 183, 1, "caching parameter pops: 1 iff units even or >= 2048");
  l.hex("rows_neg", 184, 15, "caching parameter pops: minus the rows");
  l.u("k199", 199, 1, "always 1");
  l.rsv(200, 15);
  l.u("k215", 215, 1, "always 1");
  l.rsv(216, 40);
  return l.take();
}

OpcodeDecl infeed() {
  Layout l(kInfeed, "infeed", 4, Unit::kScalar, false,
           "send a staging-buffer range over the ring to tiles");
  l.u("stream", 12, 1, "1 activations (8-B units), 0 parameters (64-B units)");
  l.u("smem", 13, 1, "1 = source is scalar memory");
  l.hex("buf_off", 14, 20, "staging-buffer offset in units");
  l.nest("walk", "walk.", walk(34, 21, 20, 3), "units");
  l.u("k157", 157, 1, "always 1");
  l.rsv(158, 2);
  l.u("k160", 160, 1, "always 1");
  l.rsv(161, 1);
  l.u("direct", 162, 1, "1 = skip the staging-buffer walk");
  l.rsv(163, 5);
  l.u("par168", 168, 1, "1 for parameter infeeds");
  l.rsv(169, 3);
  l.u("par172", 172, 1, "1 for parameter infeeds");
  l.rsv(173, 3);
  l.u("av176", 176, 1, "1 for activation infeeds");
  l.rsv(177, 6);
  l.u("count_m1", 183, 14, "units in the last pass - 1");
  l.rsv(197, 6);
  l.u("tail_en", 203, 1, "1 unless the transfer is a single unit / a whole pass");
  l.rsv(204, 1);
  l.hex("count_neg", 205, 14, "minus the units of the last pass");
  l.rsv(219, 89);
  l.hex("f308", 308, 4, "0x8 activations, 0xb parameters; meaning unknown");
  l.rsv(312, 2);
  l.u("par314", 314, 1, "1 for parameter infeeds");
  l.u("par315", 315, 2, "3 for parameter infeeds, else 0");
  l.rsv(317, 3);
  l.hex("pop_wait", 320, 16, "start once the pop has produced this unit (hypothesis)");
  l.u("k336", 336, 1, "always 1");
  l.rsv(337, 15);
  l.hex("f352", 352, 7, "1 (0x2d in one LSTM infeed); meaning unknown");
  l.rsv(359, 16);
  l.u("k375", 375, 1, "1 in one LSTM infeed, else 0");
  l.rsv(376, 15);
  l.u("f391", 391, 2, "2 (3 in one LSTM infeed); meaning unknown");
  l.rsv(393, 16);
  l.hex("dest", 409, 16, "ring destination tiles (= the paired ring consumer's tile mask)");
  l.rsv(425, 9);
  l.hex("f434", 434, 4, "0xf activations, 0x3 parameters; meaning unknown");
  l.u("lanes_m1", 438, 2, "64-B lanes per weight row - 1 (3 for activations)");
  l.rsv(440, 72);
  return l.take();
}

OpcodeDecl outfeed() {
  Layout l(kOutfeed, "outfeed", 2, Unit::kScalar, false,
           "drain ring packets addressed to the scalar core to the host or to scalar memory");
  l.hex("base", 12, 15, "destination offset in scalar memory (0 for the host)");
  l.nest("walk", "walk.", walk(27, 16, 15, 3), "units");
  l.s("walk.inc3", 120, 16, "walk level 3: signed increment (scalar-memory variant 1)");
  l.rsv(136, 37);
  l.u("k173", 173, 2, "3 to the host, 0 to scalar memory");
  l.rsv(175, 3);
  l.u("k178", 178, 1, "1 to scalar memory, else 0");
  l.rsv(179, 3);
  l.u("k182", 182, 1, "1 to scalar memory, else 0");
  l.rsv(183, 1);
  l.hex("f184", 184, 15, "to scalar memory: a count or address that varies per outfeed (0x21..)");
  l.rsv(199, 15);
  l.u("k214", 214, 1, "1 to scalar memory, else 0");
  l.rsv(215, 7);
  l.hex("f222", 222, 7, "0x7f to the host, 0x3f to scalar memory");
  l.rsv(229, 27);
  return l.take();
}

OpcodeDecl frame(uint8_t opcode, std::string mnemonic, std::string summary, std::string length) {
  Layout l(opcode, std::move(mnemonic), 1, Unit::kScalar, false, std::move(summary));
  l.rsv(12, 7);
  l.u("length_bits", 19, 32, std::move(length));
  l.rsv(51, 77);
  return l.take();
}

}  // namespace

void add_scalar_opcodes(std::vector<OpcodeDecl>& out) {
  out.push_back(sync());
  out.push_back(bundle());
  out.push_back(halt());
  out.push_back(branch());
  out.push_back(loop());
  out.push_back(scsync());
  out.push_back(pop());
  out.push_back(infeed());
  out.push_back(outfeed());
  out.push_back(
      frame(kStart, "start", "program header", "bits between start and end: 128 x (words - 2)"));
  out.push_back(frame(kEnd, "end", "end of the bitstream", "always 128"));
}

}  // namespace tinycoral::isa::detail
