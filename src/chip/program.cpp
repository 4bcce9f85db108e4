// Pre-decoding of a bitstream into ProgramItems (see program.h). Bit positions follow the reference
// fact sheet (isa.md sections 2.4-2.11); docs/chip.md restates what each field means to the
// simulator.
#include "chip/program.h"

#include <bit>
#include <cstring>

#include "chip/field_bits.h"
#include "common/bits.h"
#include "common/error.h"

namespace tinycoral::chip {
namespace {

using Bits = FieldBits;

// `levels` DMA-style levels of (inc: 17 bits signed, count - 1: 16 bits), 33 bits apart.
DmaTtu dma_ttu(const Bits& b, int64_t base, uint32_t first_lo, int levels) {
  DmaTtu t;
  t.base = base;
  for (int d = 0; d < levels; ++d) {
    t.inc[d] = b.s(first_lo + 33 * d, 17);
    t.cnt[d] = static_cast<uint32_t>(b.u(first_lo + 33 * d + 17, 16));
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
    case isa::kRingConsumer1: {
      RingInstr r;
      r.tile_mask = static_cast<uint16_t>(b.u(12, 16));
      r.addr = static_cast<uint32_t>(b.u(60, 18));
      r.ttu = dma_ttu(b, 0, 78, 4);
      r.mode = static_cast<uint8_t>(b.u(335, 2));
      if (opcode == isa::kRingProducer) {
        r.to_c1 = b.u(466, 1) != 0;
        r.dest = static_cast<uint32_t>(b.u(467, 17));
        // Records r0-r2: id = op << 5 | counter (isa.md 2.6).
        for (uint32_t at : {343u, 384u, 425u})
          if (const uint64_t id = b.u(at, 7); id != 0) r.wait_counters |= 1u << (id & 31);
      } else {
        r.aux_en0 = b.u(267, 1) != 0;
        r.aux_addr0 = static_cast<uint32_t>(b.u(268, 18));
        r.aux_rows0 = static_cast<uint32_t>(b.u(286, 14)) + 1;
        r.aux_en1 = b.u(318, 1) != 0;
        r.aux_addr1 = static_cast<uint32_t>(b.u(300, 18));
        const uint64_t gstride = b.u(249, 18);
        const uint64_t slots = b.u(216, 11);
        if (gstride % 4 == 1 && (gstride - 1) / 4 < slots && slots == r.ttu.cnt[0] + 1)
          r.short_last_pass = static_cast<uint32_t>((gstride - 1) / 4);
      }
      return r;
    }
    case isa::kNarrowToWide:
    case isa::kWideToNarrow: {
      WideNarrowInstr w;
      w.tile_mask = static_cast<uint16_t>(b.u(12, 16));
      if (opcode == isa::kWideToNarrow) {
        w.wide_addr = static_cast<uint32_t>(b.u(60, 14));
        w.wide_ttu = dma_ttu(b, 0, 78, 4);
        w.narrow_addr = static_cast<uint32_t>(b.u(267, 16));
        w.narrow_ttu = dma_ttu(b, 0, 283, 6);
        w.mode = static_cast<uint8_t>(b.u(487, 2));
        // Tail bit 867 marks every bias load: the 424 mode-2 loads of the test data and the 7
        // mode-1 loads of the on-tile softmax, which move the shift constant's partial-sum row
        // into the bias of the subtraction (docs/chip_ops.md 6.2). All of them write the bias
        // store.
        if (b.u(867, 1) != 0) w.mode = 2;
        w.skip_en = b.u(542, 1) != 0;
        w.skip_words = static_cast<uint32_t>(b.u(562, 16)) + 1;
        w.wide_circ = b.u(214, 1) != 0;
        w.circ_stream = b.u(871, 1) != 0;
        w.fill_bytes = 2 * static_cast<uint32_t>(b.u(489, 18));
        w.head_en = b.u(523, 1) != 0;
        w.head_words = static_cast<uint32_t>(b.u(507, 16)) + 1;
        w.head_tail = static_cast<int32_t>(b.s(524, 18));
        if (const uint64_t id = b.u(615, 5); id != 0) w.wait_counters = 1u << id;
      } else {
        w.narrow_addr = static_cast<uint32_t>(b.u(62, 16));
        w.narrow_ttu = dma_ttu(b, 0, 78, 6);
        w.wide_addr = static_cast<uint32_t>(b.u(335, 14));
        w.wide_ttu = dma_ttu(b, 0, 353, 4);
        w.transposing = b.u(799, 1) != 0;
        w.transpose16 = b.u(800, 1) != 0;
        w.wide_stream = b.u(489, 1) != 0;
        w.wide_circ = w.wide_stream || b.u(491, 11) != 0;
        if (const uint64_t id = b.u(547, 5); id != 0) w.wait_counters = 1u << id;
      }
      return w;
    }
    case isa::kMeshSouth:
    case isa::kMeshWest:
    case isa::kMeshNorth:
    case isa::kMeshEast: {
      MeshInstr m;
      m.tile_mask = static_cast<uint16_t>(b.u(12, 16));
      m.out_addr = static_cast<uint32_t>(b.u(60, 18));
      m.out_ttu = dma_ttu(b, 0, 78, 4);
      m.in_addr = static_cast<uint32_t>(b.u(265, 18));
      m.in_ttu = dma_ttu(b, 0, 283, 4);
      m.fill_en = b.u(727, 1) != 0;
      m.fill = static_cast<uint32_t>(b.u(728, 32));
      m.out_active = ttu_used(m.out_ttu);
      m.in_active = ttu_used(m.in_ttu);
      // gstride fields at bits 249 (outbound) and 454 (inbound): MobileNet v2 moves 24-word
      // positions as a 16-word piece and an 8-word piece (grp 7, gstride 35 = 4 x 8 + level 3).
      const uint64_t out_gstride = b.u(249, 16), in_gstride = b.u(454, 16);
      m.out_piece_level = static_cast<int>(out_gstride & 3);
      m.out_short = static_cast<uint32_t>(out_gstride >> 2);
      m.in_piece_level = static_cast<int>(in_gstride & 3);
      m.in_short = static_cast<uint32_t>(in_gstride >> 2);
      // Records s0-s4: id = counter << 1 | op (isa.md 2.7).
      for (uint32_t k = 0; k < 5; ++k)
        if (const uint64_t id = b.u(480 + 41 * k, 6); id != 0) m.wait_counters |= 1u << (id >> 1);
      return m;
    }
    case isa::kNluLoad: {
      NluLoadInstr n;
      n.tile_mask = static_cast<uint16_t>(b.u(12, 16));
      for (int k = 0; k < 40; ++k)
        n.table.coefficients[k] = std::bit_cast<float>(static_cast<uint32_t>(b.u(62 + 32 * k, 32)));
      for (int k = 0; k < 7; ++k)
        n.table.breakpoints[k] =
            std::bit_cast<float>(static_cast<uint32_t>(b.u(62 + 32 * (40 + k), 32)));
      n.table.mode = static_cast<uint32_t>(b.u(1566, 32));
      n.table.loaded = true;
      return n;
    }
    case isa::kTileSync: {
      TileSyncInstr s;
      s.tiles = static_cast<uint16_t>(b.u(12, 16));
      s.counters = static_cast<uint32_t>(b.u(44, 19));
      s.count = static_cast<uint32_t>(b.u(63, 16));
      s.units = static_cast<uint16_t>(b.u(79, 10));
      s.signal = b.u(107, 1) != 0;
      return s;
    }
    case isa::kBundle: {
      ScalarBundle s;
      s.gate = b.u(0, 1) != 0;
      s.pred_reg = static_cast<uint8_t>(b.u(1, 3));
      s.pred_pol = b.u(4, 1) != 0;
      s.enable_vector = static_cast<uint8_t>(b.u(12, 2));
      s.vs_reg_v1 = static_cast<uint8_t>(b.u(14, 5));
      s.imm_size = static_cast<uint16_t>(b.u(19, 12));
      s.v_op = static_cast<uint8_t>(b.u(31, 5));
      s.v_offset = static_cast<uint8_t>(b.u(36, 8));
      s.v_cmd = static_cast<uint8_t>(b.u(44, 5));
      s.vs_reg = static_cast<uint8_t>(b.u(49, 5));
      s.s_op = static_cast<uint8_t>(b.u(54, 6));
      s.s_x = static_cast<uint8_t>(b.u(60, 5));
      s.s_y = static_cast<uint8_t>(b.u(65, 5));
      s.imm = static_cast<uint32_t>(b.u(70, 32));
      s.v_op2 = static_cast<uint8_t>(b.u(102, 3));
      s.vs_reg_w = static_cast<uint8_t>(b.u(105, 5));
      s.sfu_dst = static_cast<uint8_t>(b.u(110, 5));
      s.alu_only = s.s_op != 0 && s.enable_vector == 0 && s.v_op == 0 && s.v_op2 == 0;
      return s;
    }
    case isa::kHalt:
      return HaltInstr{static_cast<uint8_t>(b.u(14, 5))};
    case isa::kBranch: {
      const uint64_t condition = b.u(12, 1) | b.u(13, 3) << 1 | b.u(16, 1) << 4;  // k12 .. k16
      if (condition != 0 && condition != 0x11)
        fail("branch with condition bits 0x", std::hex, condition, " (only 0 and 0x11 are known)");
      return BranchInstr{static_cast<int32_t>(b.s(17, 15)), condition != 0};
    }
    case isa::kLoop:
      return LoopInstr{static_cast<uint32_t>(b.u(12, 16)), static_cast<uint32_t>(b.u(28, 5))};
    case isa::kScalarSync: {
      ScSyncInstr s;
      s.tiles = static_cast<uint16_t>(b.u(12, 16));
      s.smask = static_cast<uint16_t>(b.u(32, 9));
      s.value = static_cast<uint32_t>(b.u(43, 13));
      s.tokwait = b.u(57, 1) != 0;
      s.tmask = static_cast<uint16_t>(b.u(73, 16));
      for (int k = 0; k < 9; ++k) s.thresholds[k] = static_cast<uint16_t>(b.u(93 + 16 * k, 16));
      s.wait = static_cast<uint16_t>(b.u(237, 9));
      s.sunits = static_cast<uint8_t>(b.u(246, 5));
      return s;
    }
    case isa::kPop: {
      PopInstr p;
      p.activations = b.u(12, 1) != 0;
      p.units = stream_units(b.u(44, 15), b.u(75, 15), b.u(142, 14), b.u(157, 1) != 0);
      return p;
    }
    case isa::kInfeed: {
      InfeedInstr f;
      f.activations = b.u(12, 1) != 0;
      f.from_scalar_memory = b.u(13, 1) != 0;
      f.offset = static_cast<uint32_t>(b.u(14, 20));
      if (f.from_scalar_memory) {
        // Scalar-memory source: 4-byte words with the partial-pass count of pops (isa.md 2.10),
        // sent as 16-byte entries: the word counts are exactly the entries the consumers take
        // (docs/chip.md "Parameters through scalar memory": split_concat 8 and 12 words = 2 and 3
        // entries, MobileNet v1 0.25 word 352: 64 + 16 words = 20 entries = 2 x (bias + 9 taps)).
        f.units = stream_units(b.u(55, 20), b.u(96, 20), b.u(183, 14), b.u(203, 1) != 0);
        f.packet_bytes = kScalarEntryBytes;
      } else {
        f.units = stream_units(b.u(55, 20), b.u(96, 20), b.u(183, 14), b.u(203, 1) != 0);
      }
      f.tiles = static_cast<uint16_t>(b.u(409, 16));
      if (!f.from_scalar_memory) f.packet_bytes = 64 * (static_cast<uint32_t>(b.u(438, 2)) + 1);
      return f;
    }
    case isa::kOutfeed: {
      OutfeedInstr o;
      const uint32_t k173 = static_cast<uint32_t>(b.u(173, 2));
      o.to_scalar_memory = k173 != 3;
      o.base = static_cast<uint32_t>(b.u(12, 15));
      const uint32_t count = static_cast<uint32_t>(b.u(43, 15)) + 1;
      if (o.to_scalar_memory) {  // 4-byte words: (d0 limit + 1) x (d1 limit + 1), base in words
        o.bytes = 4 * count * (static_cast<uint32_t>(b.u(74, 15)) + 1);
        o.base *= 4;
      } else {
        o.bytes = 8 * count;
      }
      return o;
    }
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
