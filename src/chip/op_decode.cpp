// Pre-decoding of the 17-word op instructions (0x01 / 0x02 / 0x03) into OpInstr, once per program,
// reading the fields the ISA table names (field_bits.h; positions and evidence: docs/isa.md and the
// reference fact sheet's section 2.1.1, op-style TTUs: 2.0a).
#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "chip/field_bits.h"
#include "chip/tile.h"
#include "common/bits.h"
#include "isa/isa.h"

namespace tinycoral::chip {
namespace {

using Bits = FieldBits;

// An op-style TTU named `name` in the table (isa.md 2.0a): base (wide TTUs: 13 bits plus `sel`,
// bit 13 of the unit address), hmode, 8 levels of (inc, cnt, mode) and the flags. Level k's
// increment is 4 x inc<k> plus the 2 bits before it (hmode for level 0, mode<k-1> else); mode7
// is what the last level's mode holds.
struct TtuFields {
  TtuFields(uint8_t op, const std::string& name, bool is_wide)
      : base(op, name + ".base"),
        hmode(op, name + ".hmode"),
        tflags(op, name + ".tflags"),
        wide(is_wide) {
    if (wide) sel = Field(op, name + ".sel");
    for (int k = 0; k < 8; ++k) {
      const std::string level = std::to_string(k);
      inc[k] = Field(op, name + ".inc" + level);
      cnt[k] = Field(op, name + ".cnt" + level);
      mode[k] = Field(op, name + ".mode" + level);
    }
  }
  Field base, hmode, tflags, sel;
  bool wide;
  std::array<Field, 8> inc, cnt, mode;

  OpTtu read(const Bits& b) const {
    OpTtu t;
    t.base = static_cast<int64_t>(wide ? b.u(base) | b.u(sel) << 13 : b.u(base));
    uint32_t low2 = static_cast<uint32_t>(b.u(hmode));
    for (int k = 0; k < 8; ++k) {
      t.inc[k] = 4 * b.s(inc[k]) + low2;
      t.cnt[k] = static_cast<uint32_t>(b.u(cnt[k]));
      low2 = static_cast<uint32_t>(b.u(mode[k]));
    }
    t.mode7 = static_cast<uint8_t>(low2);
    t.tflags = static_cast<uint32_t>(b.u(tflags));
    return t;
  }
};

// The fields of one tensor-op opcode (0x01-0x03 share the layout), found in the table once.
struct OpFields {
  explicit OpFields(uint8_t op)
      : opcode(op, "opcode"),
        tiles(op, "tiles"),
        loop_last(op, "loop_last"),
        in(op, "in", false),
        out(op, "out", false),
        par(op, "par", true),
        psum(op, "psum", true),
        out_last_cnt(op, "out.last_cnt"),
        out_last_mode(op, "out.last_mode"),
        out_last_skip(op, "out.last_skip"),
        par_fifo(op, "par.fifo"),
        in_sync(op, "in.sync"),
        cfg0(op, "cfg0"),
        cfg1(op, "cfg1"),
        cfg2(op, "cfg2"),
        cfg3(op, "cfg3"),
        cfg4(op, "cfg4"),
        w_zp(op, "w_zp"),
        in_zp(op, "in_zp"),
        dp_mode(op, "dp_mode"),
        reduce_mask(op, "reduce_mask"),
        out_ch_last(op, "out_ch_last"),
        out_ch(op, "out_ch"),
        nlu_mode(op, "nlu_mode"),
        mult(op, "mult"),
        clamp_max(op, "clamp_max"),
        clamp_min(op, "clamp_min"),
        offset(op, "offset"),
        out_zp(op, "out_zp"),
        pc_zp_unit(op, "pc_zp_unit"),
        pc_mult(op, "pc_mult") {
    for (int k = 0; k < 8; ++k) loops[k] = Field(op, "loop" + std::to_string(k));
    for (int j = 0; j < 5; ++j) sync[j] = Field(op, "sync" + std::to_string(j));
  }
  Field opcode, tiles, loop_last;
  TtuFields in, out, par, psum;
  Field out_last_cnt, out_last_mode, out_last_skip, par_fifo, in_sync, cfg0, cfg1, cfg2, cfg3, cfg4,
      w_zp, in_zp, dp_mode, reduce_mask, out_ch_last, out_ch, nlu_mode, mult, clamp_max, clamp_min,
      offset, out_zp, pc_zp_unit, pc_mult;
  std::array<Field, 8> loops;
  std::array<Field, 5> sync;
};

}  // namespace

OpInstr decode_op(const isa::Instruction& instruction) {
  const Bits b{instruction.bytes, instruction.opcode()};
  if (instruction.bytes.size() < 17 * 16)
    fail("op at word ", instruction.word_offset, ": ", instruction.bytes.size(),
         " bytes, expected 272");
  static const std::array<OpFields, 3> tensor_ops = {
      OpFields(isa::kTensorOp), OpFields(isa::kPoolOp), OpFields(isa::kReduceOp)};
  const OpFields& f = tensor_ops[instruction.opcode() - isa::kTensorOp];
  OpInstr op;
  op.source = &instruction;
  op.word_offset = instruction.word_offset;
  op.opcode = static_cast<uint8_t>(b.u(f.opcode));
  op.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  for (int k = 0; k < 8; ++k) op.loops[k] = static_cast<uint32_t>(b.u(f.loops[k]));
  op.rsv174 = static_cast<uint32_t>(b.u(f.loop_last));
  op.in = f.in.read(b);
  op.out = f.out.read(b);
  op.out_last_cnt = static_cast<uint32_t>(b.u(f.out_last_cnt));
  op.out_last_mode = static_cast<uint32_t>(b.u(f.out_last_mode));
  op.out_last_skip = static_cast<uint32_t>(b.u(f.out_last_skip));
  op.par = f.par.read(b);
  op.par_fifo = static_cast<uint32_t>(b.u(f.par_fifo));
  op.in_sync = static_cast<uint32_t>(b.u(f.in_sync));
  op.psum = f.psum.read(b);
  op.cfg0 = static_cast<uint32_t>(b.u(f.cfg0));
  op.cfg1 = static_cast<uint32_t>(b.u(f.cfg1));
  for (int j = 0; j < 5; ++j) op.sync[j] = static_cast<uint16_t>(b.u(f.sync[j]));
  op.cfg2 = static_cast<uint32_t>(b.u(f.cfg2));
  op.cfg3 = static_cast<uint32_t>(b.u(f.cfg3));
  op.w_zp = static_cast<uint8_t>(b.u(f.w_zp));
  op.in_zp = static_cast<uint8_t>(b.u(f.in_zp));
  op.dp_mode = static_cast<uint8_t>(b.u(f.dp_mode));
  op.reduce_mask = static_cast<uint8_t>(b.u(f.reduce_mask));
  op.out_ch_last = static_cast<uint8_t>(b.u(f.out_ch_last));
  op.out_ch = static_cast<uint8_t>(b.u(f.out_ch));
  op.nlu_mode = static_cast<uint8_t>(b.u(f.nlu_mode));
  op.mult = b.f32(f.mult);
  op.clamp_max = b.f32(f.clamp_max);
  op.clamp_min = b.f32(f.clamp_min);
  op.offset = static_cast<int32_t>(b.s(f.offset));
  op.out_zp = static_cast<uint8_t>(b.u(f.out_zp));
  op.cfg4 = static_cast<uint32_t>(b.u(f.cfg4));
  op.pc_zp_unit = static_cast<uint32_t>(b.u(f.pc_zp_unit));
  op.pc_mult = b.flag(f.pc_mult);
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
