// Pre-decoding of the 17-word op instructions (0x01 / 0x02 / 0x03) into OpInstr, once per program.
// Bit positions: docs/isa.md and the reference fact sheet's section 2.1.1 (op-style TTUs: 2.0a).
#include <bit>
#include <cstring>

#include "chip/field_bits.h"
#include "chip/tile.h"
#include "common/bits.h"
#include "isa/isa.h"

namespace tinycoral::chip {
namespace {

using Bits = FieldBits;

// Narrow TTU: base 18 bits, hmode 2, then 8 dims of (inc 17s, cnt 18, mode 2) = 37 bits each.
OpTtu narrow_ttu(const Bits& b, uint32_t base_lo, uint32_t tflags_lo, uint32_t tflags_width) {
  OpTtu t;
  t.base = static_cast<int64_t>(b.u(base_lo, 18));
  uint32_t low2 = static_cast<uint32_t>(b.u(base_lo + 18, 2));
  for (int k = 0; k < 8; ++k) {
    const uint32_t dim = base_lo + 20 + 37 * k;
    t.inc[k] = 4 * b.s(dim, 17) + low2;
    t.cnt[k] = static_cast<uint32_t>(b.u(dim + 17, 18));
    low2 = static_cast<uint32_t>(b.u(dim + 35, 2));
  }
  t.mode7 = static_cast<uint8_t>(low2);
  t.tflags = static_cast<uint32_t>(b.u(tflags_lo, tflags_width));
  return t;
}

// Wide TTU: base 13 bits + sel (bit 13 of the unit address), hmode 2, then 8 dims of
// (inc 13s, cnt 14, mode 2) = 29 bits each.
OpTtu wide_ttu(const Bits& b, uint32_t base_lo, uint32_t tflags_lo, uint32_t tflags_width) {
  OpTtu t;
  t.base = static_cast<int64_t>(b.u(base_lo, 13) | (b.u(base_lo + 13, 1) << 13));
  uint32_t low2 = static_cast<uint32_t>(b.u(base_lo + 14, 2));
  for (int k = 0; k < 8; ++k) {
    const uint32_t dim = base_lo + 16 + 29 * k;
    t.inc[k] = 4 * b.s(dim, 13) + low2;
    t.cnt[k] = static_cast<uint32_t>(b.u(dim + 13, 14));
    low2 = static_cast<uint32_t>(b.u(dim + 27, 2));
  }
  t.mode7 = static_cast<uint8_t>(low2);
  t.tflags = static_cast<uint32_t>(b.u(tflags_lo, tflags_width));
  return t;
}

}  // namespace

OpInstr decode_op(const isa::Instruction& instruction) {
  const Bits b{instruction.bytes, instruction.opcode()};
  if (instruction.bytes.size() < 17 * 16)
    fail("op at word ", instruction.word_offset, ": ", instruction.bytes.size(),
         " bytes, expected 272");
  OpInstr op;
  op.source = &instruction;
  op.word_offset = instruction.word_offset;
  op.opcode = static_cast<uint8_t>(b.u(6, 6));
  op.tile_mask = static_cast<uint16_t>(b.u(12, 16));
  for (int k = 0; k < 8; ++k) op.loops[k] = static_cast<uint32_t>(b.u(62 + 14 * k, 14));
  op.rsv174 = static_cast<uint32_t>(b.u(174, 17));
  op.in = narrow_ttu(b, 191, 507, 8);
  op.out = narrow_ttu(b, 574, 890, 3);
  op.out_last_cnt = static_cast<uint32_t>(b.u(918, 18));
  op.out_last_mode = static_cast<uint32_t>(b.u(936, 2));
  op.out_last_skip = static_cast<uint32_t>(b.u(941, 16));
  op.par = wide_ttu(b, 957, 1205, 8);
  op.par_fifo = static_cast<uint32_t>(b.u(1216, 14));
  op.psum = wide_ttu(b, 1260, 1508, 15);
  op.cfg0 = static_cast<uint32_t>(b.u(1563, 9));
  op.cfg1 = static_cast<uint32_t>(b.u(1578, 10));
  for (int j = 0; j < 5; ++j) op.sync[j] = static_cast<uint16_t>(b.u(1588 + 16 * j, 16));
  op.cfg2 = static_cast<uint32_t>(b.u(1843, 5));
  op.cfg3 = static_cast<uint32_t>(b.u(1850, 4));
  op.w_zp = static_cast<uint8_t>(b.u(1854, 8));
  op.in_zp = static_cast<uint8_t>(b.u(1870, 8));
  op.dp_mode = static_cast<uint8_t>(b.u(1923, 3));
  op.reduce_mask = static_cast<uint8_t>(b.u(1926, 8));
  op.out_ch_last = static_cast<uint8_t>(b.u(1934, 6));
  op.out_ch = static_cast<uint8_t>(b.u(1940, 6));
  op.nlu_mode = static_cast<uint8_t>(b.u(1946, 3));
  op.mult = b.f(1949);
  op.clamp_max = b.f(1981);
  op.clamp_min = b.f(2013);
  op.offset = static_cast<int32_t>(b.s(2045, 32));
  op.out_zp = static_cast<uint8_t>(b.u(2077, 8));
  op.cfg4 = static_cast<uint32_t>(b.u(2093, 1));
  op.pc_zp_unit = static_cast<uint32_t>(b.u(1908, 14));
  op.pc_mult = b.u(2094, 1) != 0;
  return op;
}

std::string describe_op_class(const OpInstr& op) {
  std::ostringstream s;
  s << "opcode 0x" << std::hex << int{op.opcode} << " dp_mode " << std::dec << int{op.dp_mode}
    << " cfg0 0x" << std::hex << op.cfg0 << " cfg1 0x" << op.cfg1 << " cfg2 0x" << op.cfg2
    << std::dec << " cfg3 " << op.cfg3 << " reduce_mask 0x" << std::hex << int{op.reduce_mask}
    << std::dec << " nlu " << int{op.nlu_mode} << " in_tflags 0x" << std::hex << op.in.tflags
    << " out_tflags 0x" << op.out.tflags << " par_tflags 0x" << op.par.tflags << " psum_tflags 0x"
    << op.psum.tflags << std::dec << " par_fifo " << op.par_fifo;
  return s.str();
}

}  // namespace tinycoral::chip
