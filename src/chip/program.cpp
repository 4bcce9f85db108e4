// Pre-decoding of a bitstream into ProgramItems (see program.h): one decoder per opcode family,
// reading the fields the ISA table names (field_bits.h; their positions and the evidence: isa.md
// sections 2.4-2.11); docs/chip.md restates what each field means to the simulator.
#include "chip/program.h"

#include <array>
#include <bit>
#include <cstring>
#include <string>

#include "chip/field_bits.h"
#include "common/bits.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

using Bits = FieldBits;

DmaTtu dma_ttu(const Bits& b, const WalkFields& f) {
  DmaTtu t;
  for (int d = 0; d < f.levels; ++d) {
    t.inc[d] = b.s(f.inc[d]);
    t.cnt[d] = static_cast<uint32_t>(b.u(f.cnt[d]));
  }
  return t;
}

bool ttu_used(const DmaTtu& t) {
  for (int d = 0; d < 8; ++d)
    if (t.inc[d] != 0 || t.cnt[d] != 0) return true;
  return false;
}

// Units moved by a pop or infeed (isa.md 2.10): `pass` units per full pass (d0 limit + 1), d1 limit
// further passes, the last pass `count_m1 + 1` units when the flag says it is partial, else d1
// limit
// + 1 full passes (a parameter infeed of exactly 1024 units, edgetpu_compiler 16.0's 64 KiB FC
// weight blocks, has d1 limit 0 and no partial pass). All counts 0 means a single unit.
uint32_t stream_units(uint64_t d0_limit, uint64_t d1_limit, uint64_t count_m1, bool partial_last) {
  const uint64_t pass = d0_limit + 1;
  uint64_t units = 0;
  if (partial_last) {
    units = d1_limit * pass + count_m1 + 1;
  } else if (d0_limit == 0) {
    units = 1;
  } else {
    units = (d1_limit + 1) * pass;
  }
  return static_cast<uint32_t>(units);
}

// Each decoder finds its fields in the table once (function-local statics).

// x28 of the ring and wide/narrow instructions: bit 10 makes the instruction register-indirect
// (program.h). Set only in two Keras LSTM instructions (0x4c0, 0x4c7).
RegisterIndirect register_indirect(const Bits& b, uint8_t opcode) {
  static const std::array<Field, 5> x28 = {
      Field(isa::kRingProducer, "x28"), Field(isa::kRingConsumer0, "x28"),
      Field(isa::kRingConsumer1, "x28"), Field(isa::kNarrowToWide, "x28"),
      Field(isa::kWideToNarrow, "x28")};
  const size_t i = opcode == isa::kRingProducer    ? 0
                   : opcode == isa::kRingConsumer0 ? 1
                   : opcode == isa::kRingConsumer1 ? 2
                   : opcode == isa::kNarrowToWide  ? 3
                                                   : 4;
  const uint64_t v = b.u(x28[i]);
  RegisterIndirect r;
  r.on = (v >> 10 & 1) != 0;
  r.mask_reg = static_cast<uint8_t>(v >> 5 & 31);
  r.addr_reg = static_cast<uint8_t>(v & 31);
  return r;
}

RingInstr decode_ring(const Bits& b, uint8_t opcode) {
  struct Fields {
    explicit Fields(uint8_t op)
        : tiles(op, "tiles"), addr(op, "addr"), mode(op, "mode"), walk(op, "", 4) {}
    Field tiles, addr, mode;
    WalkFields walk;
  };
  static const Fields producer(isa::kRingProducer), consumer0(isa::kRingConsumer0),
      consumer1(isa::kRingConsumer1);
  const Fields& f = opcode == isa::kRingProducer    ? producer
                    : opcode == isa::kRingConsumer0 ? consumer0
                                                    : consumer1;
  RingInstr r;
  r.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  r.addr = static_cast<uint32_t>(b.u(f.addr));
  r.ttu = dma_ttu(b, f.walk);
  r.mode = static_cast<uint8_t>(b.u(f.mode));
  r.indirect = register_indirect(b, opcode);
  if (opcode == isa::kRingProducer) {
    static const Field to_c1(opcode, "to_c1"), dest(opcode, "dest");
    // Records r0-r2: id = op << 5 | counter (isa.md 2.6).
    static const std::array<Field, 3> record_ids = {Field(opcode, "r0.id"), Field(opcode, "r1.id"),
                                                    Field(opcode, "r2.id")};
    r.to_c1 = b.flag(to_c1);
    r.dest = static_cast<uint32_t>(b.u(dest));
    for (const Field& id_field : record_ids)
      if (const uint64_t id = b.u(id_field); id != 0) r.wait_counters |= 1u << (id & 31);
  } else {
    struct Consumer {
      explicit Consumer(uint8_t op)
          : aux_en0(op, "aux_en0"),
            aux_addr0(op, "aux_addr0"),
            aux_rows0_m1(op, "aux_rows0_m1"),
            aux_en1(op, "aux_en1"),
            aux_addr1(op, "aux_addr1"),
            gstride(op, "gstride"),
            slots(op, "slots") {}
      Field aux_en0, aux_addr0, aux_rows0_m1, aux_en1, aux_addr1, gstride, slots;
    };
    static const Consumer c0(isa::kRingConsumer0), c1(isa::kRingConsumer1);
    const Consumer& c = opcode == isa::kRingConsumer0 ? c0 : c1;
    r.aux_en0 = b.flag(c.aux_en0);
    r.aux_addr0 = static_cast<uint32_t>(b.u(c.aux_addr0));
    r.aux_rows0 = static_cast<uint32_t>(b.u(c.aux_rows0_m1)) + 1;
    r.aux_en1 = b.flag(c.aux_en1);
    r.aux_addr1 = static_cast<uint32_t>(b.u(c.aux_addr1));
    const uint64_t gstride = b.u(c.gstride);
    const uint64_t slots = b.u(c.slots);
    if (gstride % 4 == 1 && (gstride - 1) / 4 < slots && slots == r.ttu.cnt[0] + 1)
      r.short_last_pass = static_cast<uint32_t>((gstride - 1) / 4);
  }
  return r;
}

WideNarrowInstr decode_wide_to_narrow(const Bits& b) {
  struct Fields {
    explicit Fields(uint8_t op)
        : tiles(op, "tiles"),
          wide_addr(op, "w.addr"),
          wide_walk(op, "w.", 4),
          narrow_addr(op, "n.addr"),
          narrow_walk(op, "n.", 6),
          mode(op, "mode"),
          bias_load(op, "tail_f867"),
          skip_en(op, "skip_en0"),
          skip_m1(op, "skip_m1"),
          wide_circ(op, "w.circ"),
          circ_stream(op, "tail_f871"),
          fill_size(op, "fill_size"),
          head_en(op, "head_en"),
          head_words_m1(op, "head_words_m1"),
          head_tail(op, "head_tail"),
          sync_id(op, "sync.id") {}
    Field tiles, wide_addr;
    WalkFields wide_walk;
    Field narrow_addr;
    WalkFields narrow_walk;
    Field mode, bias_load, skip_en, skip_m1, wide_circ, circ_stream, fill_size, head_en,
        head_words_m1, head_tail, sync_id;
  };
  static const Fields f(isa::kWideToNarrow);
  WideNarrowInstr w;
  w.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  w.indirect = register_indirect(b, isa::kWideToNarrow);
  w.wide_addr = static_cast<uint32_t>(b.u(f.wide_addr));
  w.wide_ttu = dma_ttu(b, f.wide_walk);
  w.narrow_addr = static_cast<uint32_t>(b.u(f.narrow_addr));
  w.narrow_ttu = dma_ttu(b, f.narrow_walk);
  w.mode = static_cast<uint8_t>(b.u(f.mode));
  // Tail bit 867 marks every bias load: the 424 mode-2 loads of the test data and the 7
  // mode-1 loads of the on-tile softmax, which move the shift constant's partial-sum row
  // into the bias of the subtraction (docs/chip_ops.md 6.2). All of them write the bias
  // store.
  if (b.flag(f.bias_load)) w.mode = 2;
  w.skip_en = b.flag(f.skip_en);
  w.skip_words = static_cast<uint32_t>(b.u(f.skip_m1)) + 1;
  w.wide_circ = b.flag(f.wide_circ);
  w.circ_stream = b.flag(f.circ_stream);
  w.fill_bytes = 2 * static_cast<uint32_t>(b.u(f.fill_size));
  w.head_en = b.flag(f.head_en);
  w.head_words = static_cast<uint32_t>(b.u(f.head_words_m1)) + 1;
  w.head_tail = static_cast<int32_t>(b.s(f.head_tail));
  if (const uint64_t id = b.u(f.sync_id); id != 0) w.wait_counters = 1u << id;
  return w;
}

WideNarrowInstr decode_narrow_to_wide(const Bits& b) {
  struct Fields {
    explicit Fields(uint8_t op)
        : tiles(op, "tiles"),
          narrow_addr(op, "n.addr"),
          narrow_walk(op, "n.", 6),
          wide_addr(op, "w.addr"),
          wide_walk(op, "w.", 4),
          transpose(op, "transpose"),
          transpose16(op, "f800"),
          wide_stream(op, "w.circ"),
          wide_rows(op, "w.rows"),
          sync_id(op, "sync.id") {}
    Field tiles, narrow_addr;
    WalkFields narrow_walk;
    Field wide_addr;
    WalkFields wide_walk;
    Field transpose, transpose16, wide_stream, wide_rows, sync_id;
  };
  static const Fields f(isa::kNarrowToWide);
  WideNarrowInstr w;
  w.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  w.indirect = register_indirect(b, isa::kNarrowToWide);
  w.narrow_addr = static_cast<uint32_t>(b.u(f.narrow_addr));
  w.narrow_ttu = dma_ttu(b, f.narrow_walk);
  w.wide_addr = static_cast<uint32_t>(b.u(f.wide_addr));
  w.wide_ttu = dma_ttu(b, f.wide_walk);
  w.transposing = b.flag(f.transpose);
  w.transpose16 = b.flag(f.transpose16);
  w.wide_stream = b.flag(f.wide_stream);
  w.wide_circ = w.wide_stream || b.u(f.wide_rows) != 0;
  if (const uint64_t id = b.u(f.sync_id); id != 0) w.wait_counters = 1u << id;
  return w;
}

MeshInstr decode_mesh(const Bits& b, uint8_t opcode) {
  struct Fields {
    explicit Fields(uint8_t op)
        : tiles(op, "tiles"),
          out_addr(op, "o.addr"),
          out_walk(op, "o.", 4),
          in_addr(op, "i.addr"),
          in_walk(op, "i.", 4),
          fill_en(op, "fill_en"),
          fill(op, "fill"),
          out_gstride(op, "o.gstride"),
          in_gstride(op, "i.gstride"),
          record_ids{Field(op, "s0.id"), Field(op, "s1.id"), Field(op, "s2.id"), Field(op, "s3.id"),
                     Field(op, "s4.id")} {}
    Field tiles, out_addr;
    WalkFields out_walk;
    Field in_addr;
    WalkFields in_walk;
    Field fill_en, fill, out_gstride, in_gstride;
    std::array<Field, 5> record_ids;
  };
  static const std::array<Fields, 4> directions = {Fields(isa::kMeshSouth), Fields(isa::kMeshWest),
                                                   Fields(isa::kMeshNorth), Fields(isa::kMeshEast)};
  const Fields& f = directions[isa::mesh_direction(opcode)];
  MeshInstr m;
  m.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  m.out_addr = static_cast<uint32_t>(b.u(f.out_addr));
  m.out_ttu = dma_ttu(b, f.out_walk);
  m.in_addr = static_cast<uint32_t>(b.u(f.in_addr));
  m.in_ttu = dma_ttu(b, f.in_walk);
  m.fill_en = b.flag(f.fill_en);
  m.fill = static_cast<uint32_t>(b.u(f.fill));
  m.out_active = ttu_used(m.out_ttu);
  m.in_active = ttu_used(m.in_ttu);
  // gstride fields of the outbound and inbound halves: MobileNet v2 moves 24-word positions as a
  // 16-word piece and an 8-word piece (grp 7, gstride 35 = 4 x 8 + level 3).
  const uint64_t out_gstride = b.u(f.out_gstride), in_gstride = b.u(f.in_gstride);
  m.out_piece_level = static_cast<int>(out_gstride & 3);
  m.out_short = static_cast<uint32_t>(out_gstride >> 2);
  m.in_piece_level = static_cast<int>(in_gstride & 3);
  m.in_short = static_cast<uint32_t>(in_gstride >> 2);
  // Records s0-s4: id = counter << 1 | op (isa.md 2.7).
  for (const Field& id_field : f.record_ids)
    if (const uint64_t id = b.u(id_field); id != 0) m.wait_counters |= 1u << (id >> 1);
  return m;
}

NluLoadInstr decode_nlu_load(const Bits& b) {
  struct Fields {
    Fields() : tiles(isa::kNluLoad, "tiles"), mode(isa::kNluLoad, "mode") {
      // 8 segments x 5 coefficients s<segment>c<power>, then the breakpoints b<k>.
      for (int k = 0; k < 40; ++k)
        coefficients[k] =
            Field(isa::kNluLoad, "s" + std::to_string(k / 5) + "c" + std::to_string(k % 5));
      for (int k = 0; k < 7; ++k) breakpoints[k] = Field(isa::kNluLoad, "b" + std::to_string(k));
    }
    Field tiles, mode;
    std::array<Field, 40> coefficients;
    std::array<Field, 7> breakpoints;
  };
  static const Fields f;
  NluLoadInstr n;
  n.tile_mask = static_cast<uint16_t>(b.u(f.tiles));
  for (int k = 0; k < 40; ++k) n.table.coefficients[k] = b.f32(f.coefficients[k]);
  for (int k = 0; k < 7; ++k) n.table.breakpoints[k] = b.f32(f.breakpoints[k]);
  n.table.mode = static_cast<uint32_t>(b.u(f.mode));
  n.table.loaded = true;
  return n;
}

TileSyncInstr decode_tile_sync(const Bits& b) {
  constexpr uint8_t op = isa::kTileSync;
  static const Field tiles(op, "tiles"), counters(op, "counters"), count(op, "count"),
      units(op, "units"), signal(op, "signal");
  TileSyncInstr s;
  s.tiles = static_cast<uint16_t>(b.u(tiles));
  s.counters = static_cast<uint32_t>(b.u(counters));
  s.count = static_cast<uint32_t>(b.u(count));
  s.units = static_cast<uint16_t>(b.u(units));
  s.signal = b.flag(signal);
  return s;
}

ScalarBundle decode_bundle(const Bits& b) {
  constexpr uint8_t op = isa::kBundle;
  static const Field gate(op, "gate"), pred_reg(op, "pred_reg"), pred_pol(op, "pred_pol"),
      enable_vector(op, "enable_vector"), vs_reg_v1(op, "vs_reg_v1"), imm_size(op, "imm_size"),
      v_op(op, "v_op"), v_offset(op, "v_offset"), v_cmd(op, "v_cmd"), vs_reg(op, "vs_reg"),
      s_op(op, "s_op"), s_x(op, "s_x"), s_y(op, "s_y"), imm(op, "imm"), v_op2(op, "v_op2"),
      vs_reg_w(op, "vs_reg_w"), sfu_dst(op, "sfu_dst");
  ScalarBundle s;
  s.gate = b.flag(gate);
  s.pred_reg = static_cast<uint8_t>(b.u(pred_reg));
  s.pred_pol = b.flag(pred_pol);
  s.enable_vector = static_cast<uint8_t>(b.u(enable_vector));
  s.vs_reg_v1 = static_cast<uint8_t>(b.u(vs_reg_v1));
  s.imm_size = static_cast<uint16_t>(b.u(imm_size));
  s.v_op = static_cast<uint8_t>(b.u(v_op));
  s.v_offset = static_cast<uint8_t>(b.u(v_offset));
  s.v_cmd = static_cast<uint8_t>(b.u(v_cmd));
  s.vs_reg = static_cast<uint8_t>(b.u(vs_reg));
  s.s_op = static_cast<uint8_t>(b.u(s_op));
  s.s_x = static_cast<uint8_t>(b.u(s_x));
  s.s_y = static_cast<uint8_t>(b.u(s_y));
  s.imm = static_cast<uint32_t>(b.u(imm));
  s.v_op2 = static_cast<uint8_t>(b.u(v_op2));
  s.vs_reg_w = static_cast<uint8_t>(b.u(vs_reg_w));
  s.sfu_dst = static_cast<uint8_t>(b.u(sfu_dst));
  s.alu_only = s.s_op != 0 && s.enable_vector == 0 && s.v_op == 0 && s.v_op2 == 0;
  return s;
}

BranchInstr decode_branch(const Bits& b) {
  constexpr uint8_t op = isa::kBranch;
  // The condition bits k12, rsv13 (3 bits) and k16: both flags set means "while p0".
  static const Field k12(op, "k12"), k13(op, "rsv13"), k16(op, "k16"), offset(op, "offset");
  const uint64_t condition = b.u(k12) | b.u(k13) << 1 | b.u(k16) << 4;
  if (condition != 0 && condition != 0x11)
    fail("branch with condition bits 0x", std::hex, condition, " (only 0 and 0x11 are known)");
  return BranchInstr{static_cast<int32_t>(b.s(offset)), condition != 0};
}

ScSyncInstr decode_scalar_sync(const Bits& b) {
  constexpr uint8_t op = isa::kScalarSync;
  struct Fields {
    Fields()
        : tiles(op, "tiles"),
          smask(op, "smask"),
          value(op, "value"),
          tokwait(op, "tokwait"),
          tmask(op, "tmask"),
          wait(op, "wait"),
          sunits(op, "sunits") {
      for (int k = 0; k < 9; ++k) thresholds[k] = Field(op, "thr" + std::to_string(k));
    }
    Field tiles, smask, value, tokwait, tmask, wait, sunits;
    std::array<Field, 9> thresholds;
  };
  static const Fields f;
  ScSyncInstr s;
  s.tiles = static_cast<uint16_t>(b.u(f.tiles));
  s.smask = static_cast<uint16_t>(b.u(f.smask));
  s.value = static_cast<uint32_t>(b.u(f.value));
  s.tokwait = b.flag(f.tokwait);
  s.tmask = static_cast<uint16_t>(b.u(f.tmask));
  for (int k = 0; k < 9; ++k) s.thresholds[k] = static_cast<uint16_t>(b.u(f.thresholds[k]));
  s.wait = static_cast<uint16_t>(b.u(f.wait));
  s.sunits = static_cast<uint8_t>(b.u(f.sunits));
  return s;
}

// The fields pops and infeeds share: the stream, the walk's first two limits and the last pass.
struct StreamFields {
  explicit StreamFields(uint8_t op)
      : stream(op, "stream"),
        d0_limit(op, "walk.cnt0"),
        d1_limit(op, "walk.cnt1"),
        count_m1(op, "count_m1"),
        tail_en(op, "tail_en") {}
  Field stream, d0_limit, d1_limit, count_m1, tail_en;
  uint32_t units(const Bits& b) const {
    return stream_units(b.u(d0_limit), b.u(d1_limit), b.u(count_m1), b.flag(tail_en));
  }
};

PopInstr decode_pop(const Bits& b) {
  static const StreamFields f(isa::kPop);
  PopInstr p;
  p.activations = b.flag(f.stream);
  p.units = f.units(b);
  return p;
}

InfeedInstr decode_infeed(const Bits& b) {
  constexpr uint8_t op = isa::kInfeed;
  static const StreamFields f(op);
  static const Field smem(op, "smem"), buf_off(op, "buf_off"), dest(op, "dest"),
      lanes_m1(op, "lanes_m1");
  InfeedInstr in;
  in.activations = b.flag(f.stream);
  in.from_scalar_memory = b.flag(smem);
  in.offset = static_cast<uint32_t>(b.u(buf_off));
  in.units = f.units(b);
  if (in.from_scalar_memory) {
    // Scalar-memory source: 4-byte words with the partial-pass count of pops (isa.md 2.10),
    // sent as 16-byte entries: the word counts are exactly the entries the consumers take
    // (docs/chip.md "Parameters through scalar memory": split_concat 8 and 12 words = 2 and 3
    // entries, MobileNet v1 0.25 word 352: 64 + 16 words = 20 entries = 2 x (bias + 9 taps)).
    in.packet_bytes = kScalarEntryBytes;
  }
  in.tiles = static_cast<uint16_t>(b.u(dest));
  if (!in.from_scalar_memory) in.packet_bytes = 64 * (static_cast<uint32_t>(b.u(lanes_m1)) + 1);
  return in;
}

OutfeedInstr decode_outfeed(const Bits& b) {
  constexpr uint8_t op = isa::kOutfeed;
  static const Field k173(op, "k173"), base(op, "base"), d0_limit(op, "walk.cnt0"),
      d1_limit(op, "walk.cnt1");
  OutfeedInstr o;
  o.to_scalar_memory = b.u(k173) != 3;
  o.base = static_cast<uint32_t>(b.u(base));
  const uint32_t count = static_cast<uint32_t>(b.u(d0_limit)) + 1;
  if (o.to_scalar_memory) {  // 4-byte words: (d0 limit + 1) x (d1 limit + 1), base in words
    o.bytes = 4 * count * (static_cast<uint32_t>(b.u(d1_limit)) + 1);
    o.base *= 4;
  } else {
    o.bytes = 8 * count;
  }
  return o;
}

Decoded decode_item(const isa::Instruction& in) {
  const Bits b{in.bytes, in.opcode()};
  const uint8_t opcode = in.opcode();
  switch (opcode) {
    case isa::kTensorOp:
    case isa::kPoolOp:
    case isa::kReduceOp:
      return decode_op(in);
    case isa::kRingProducer:
    case isa::kRingConsumer0:
    case isa::kRingConsumer1:
      return decode_ring(b, opcode);
    case isa::kNarrowToWide:
      return decode_narrow_to_wide(b);
    case isa::kWideToNarrow:
      return decode_wide_to_narrow(b);
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast:
      return decode_mesh(b, opcode);
    case isa::kNluLoad:
      return decode_nlu_load(b);
    case isa::kTileSync:
      return decode_tile_sync(b);
    case isa::kBundle:
      return decode_bundle(b);
    case isa::kHalt: {
      static const Field code(isa::kHalt, "code");
      return HaltInstr{static_cast<uint8_t>(b.u(code))};
    }
    case isa::kBranch:
      return decode_branch(b);
    case isa::kLoop: {
      static const Field count(isa::kLoop, "count"), body(isa::kLoop, "body");
      return LoopInstr{static_cast<uint32_t>(b.u(count)), static_cast<uint32_t>(b.u(body))};
    }
    case isa::kScalarSync:
      return decode_scalar_sync(b);
    case isa::kPop:
      return decode_pop(b);
    case isa::kInfeed:
      return decode_infeed(b);
    case isa::kOutfeed:
      return decode_outfeed(b);
    case isa::kStart:
    case isa::kEnd:
      return NoInstr{};
    default:
      fail("word ", in.word_offset, ": opcode 0x", std::hex, int{opcode}, std::dec,
           " is decoded but the simulator has no model for it");
  }
}

}  // namespace

std::unique_ptr<Program> Program::decode(std::span<const uint8_t> bitstream) {
  auto program = std::make_unique<Program>();
  program->bitstream.assign(bitstream.begin(), bitstream.end());
  program->hash = hash_of(bitstream);
  program->raw = isa::decode(bitstream);
  program->items.reserve(program->raw.size());
  program->item_at_word.assign(bitstream.size() / isa::kWordBytes, UINT32_MAX);
  for (size_t i = 0; i < program->raw.size(); ++i) {
    const isa::Instruction& in = program->raw[i];
    ProgramItem item;
    item.opcode = in.opcode();
    item.word_offset = in.word_offset;
    item.words = in.spec->words;
    item.decoded = decode_item(in);
    program->item_at_word.at(in.word_offset) = static_cast<uint32_t>(i);
    program->items.push_back(std::move(item));
  }
  program->facts.resize(program->items.size());
  program->opcodes.reserve(program->items.size());
  program->bundles.resize(program->items.size());
  for (size_t i = 0; i < program->items.size(); ++i) {
    const ProgramItem& item = program->items[i];
    program->opcodes.push_back(item.opcode);
    if (const auto* bundle = std::get_if<ScalarBundle>(&item.decoded))
      program->bundles[i] = *bundle;
  }
  return program;
}

uint64_t Program::hash_of(std::span<const uint8_t> bitstream) {
  uint64_t h = 14695981039346656037ull;  // FNV-1a, 8 bytes per round
  size_t i = 0;
  for (; i + 8 <= bitstream.size(); i += 8) {
    uint64_t v;
    std::memcpy(&v, bitstream.data() + i, 8);
    h = (h ^ v) * 1099511628211ull;
  }
  for (; i < bitstream.size(); ++i) h = (h ^ bitstream[i]) * 1099511628211ull;
  return h;
}

std::string opcode_name(uint8_t opcode) {
  if (const isa::OpcodeSpec* spec = isa::find_opcode(opcode)) return std::string(spec->mnemonic);
  return cat("opcode_0x", std::hex, int{opcode});
}

}  // namespace tinycoral::chip
