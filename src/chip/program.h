// A bitstream pre-decoded once into compact per-opcode structs, so that the simulator never
// re-reads bit fields while it runs. Field positions: the reference fact sheet isa.md
// sections 2.5-2.11, in our own words in docs/chip.md.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "chip/tile.h"
#include "isa/isa.h"

namespace tinycoral::chip {

// DMA-style address generator (isa.md 2.0b): same rewinding-increment convention as op TTUs, but
// the unit of an increment depends on the side (narrow words, wide rows, mesh words). Stored as an
// OpTtu with unused levels left at (0, 0).
using DmaTtu = OpTtu;

// Tile instructions whose tile mask (and narrow address) come from scalar registers at dispatch
// (x28, bits 28-45: bit 10 on, bits 5-9 the mask register, bits 0-4 the address register, 0 =
// the instruction's own address). The Keras LSTM gathers one image row per time step from the
// tile holding it (docs/chip.md "Register-indirect tile instructions").
struct RegisterIndirect {
  bool on = false;
  uint8_t mask_reg = 0, addr_reg = 0;
};

// 0x20: one VLIW bundle (geohot's field view, isa.md 2.11).
struct ScalarBundle {
  bool gate = false, pred_pol = false;
  uint8_t pred_reg = 0;
  uint8_t enable_vector = 0, vs_reg_v1 = 0;
  uint16_t imm_size = 0;
  uint8_t v_op = 0, v_offset = 0, vs_reg = 0;
  uint8_t v_cmd = 0;  // with v_op 2: the high bits of the store's word address (v_cmd:v_offset)
  uint8_t s_op = 0, s_x = 0, s_y = 0;
  uint32_t imm = 0;
  uint8_t v_op2 = 0, vs_reg_w = 0, sfu_dst = 0;
  bool alu_only = false;  // only the ALU slot does something (most of the device softmax)
};

struct HaltInstr {
  uint8_t code = 0;  // 4 = program end, 1 = continues in the next bitstream
};
struct LoopInstr {
  uint32_t count = 0, body = 0;  // repeat the next `body` words `count` times
};
struct BranchInstr {
  int32_t offset = 0;  // words, relative to this instruction
  // Bits 12-16 = 0x11 (k12, k16): taken while p0; 0: always taken (the LSTM's time loop,
  // docs/isa.md)
  bool conditional = true;
};
struct ScSyncInstr {
  uint16_t tiles = 0, tmask = 0;
  uint16_t smask = 0, wait = 0;
  uint32_t value = 0;
  bool tokwait = false;
  uint8_t sunits = 0;
  std::array<uint16_t, 9> thresholds{};
};
struct PopInstr {
  bool activations =
      false;  // stream bit: 1 avDataPop (8-byte units), 0 parameterPop (64-byte units)
  uint32_t units = 0;
};
// Parameters that travel through scalar memory reach the ring consumers as 16-byte entries (one
// 4x4 diagonal tap or 4 int32 biases), not 256-byte rows.
constexpr uint32_t kScalarEntryBytes = 16;
struct InfeedInstr {
  bool activations = false;
  bool from_scalar_memory = false;
  uint32_t offset = 0;  // in units of the stream
  uint32_t units = 0;
  uint16_t tiles = 0;
  uint32_t packet_bytes = 256;  // 64 * (lanes per row), field f438
};
struct OutfeedInstr {
  bool to_scalar_memory = false;
  uint32_t base = 0;   // scalar-memory destination (bytes)
  uint32_t bytes = 0;  // host variant: 8 * units; scalar-memory variant: elements (bytes)
};
struct TileSyncInstr {  // 0x1a
  uint16_t tiles = 0;
  uint32_t counters = 0;
  uint32_t count = 0;
  uint16_t units = 0;
  bool signal = false;
};
struct RingInstr {  // 0x10 / 0x11 / 0x12
  uint16_t tile_mask = 0;
  uint32_t addr = 0;  // wide units
  DmaTtu ttu;         // steps of one 256-byte row (4 units) each
  uint8_t mode = 0;
  bool aux_en0 = false, aux_en1 = false;
  uint32_t aux_addr0 = 0, aux_addr1 = 0;
  // Rows each group's aux block fills, from the row of aux_addr0 on: 1 (bias) in per-tensor
  // programs; per-channel ones add the multiplier and weight zero-point rows (docs/chip_ops.md).
  uint32_t aux_rows0 = 1;
  // consumer only: steps of its last pass left out when the stream ends in a short pass
  // (gstride = 4 (slots - p) + 1, isa.md 2.6)
  uint32_t short_last_pass = 0;
  // producer only
  bool to_c1 = false;
  uint32_t dest = 0;  // bit t = tile t, bit 16 = scalar core
  // Producer: the tile sync counters its records r0-r2 wait on (bit k = counter k, isa.md 2.12).
  uint32_t wait_counters = 0;
  RegisterIndirect indirect;
};
struct MeshInstr {  // 0x15..0x18
  uint16_t tile_mask = 0;
  uint32_t out_addr = 0, in_addr = 0;  // narrow bytes
  DmaTtu out_ttu, in_ttu;              // 4-byte elements
  bool out_active = false, in_active = false;
  bool fill_en = false;
  uint32_t fill = 0;
  // A short last piece (isa.md 2.7: gstride = 4 (n - r) + level): in the last iteration of walk
  // level `*_piece_level`, the innermost level moves `*_short` words fewer.
  uint32_t out_short = 0, in_short = 0;
  int out_piece_level = 0, in_piece_level = 0;
  uint32_t wait_counters = 0;  // the tile sync counters its records s0-s4 name (bit k = counter k)
};
struct WideNarrowInstr {  // 0x13 narrowToWide / 0x14 wideToNarrow
  uint16_t tile_mask = 0;
  uint32_t wide_addr = 0;    // units
  DmaTtu wide_ttu;           // rows
  uint32_t narrow_addr = 0;  // words
  DmaTtu narrow_ttu;         // words
  uint8_t mode = 0;          // 0x14: 0 FIFO receive, 1 input with sub-row selection, 2 bias store
  bool skip_en = false;
  uint32_t skip_words = 0;     // words skipped at the start of the wide data
  bool wide_circ = false;      // 0x14 bit 214 / 0x13 bits 489, 491-501: the wide side is a FIFO
  bool wide_stream = false;    // 0x13 bit 489 (`w.circ`): a FIFO written as one byte stream
  bool circ_stream = false;    // 0x14 tail bit 871: circular streaming into a narrow staging
  uint32_t fill_bytes = 0;     // 0x14 bits 489-506 (2-byte units) in bytes: one staging slot
  bool head_en = false;        // 0x14 bit 523: the last chunk is cut at the FIFO wrap
  uint32_t head_words = 0;     // 0x14 bits 507-522 + 1: words of the last chunk before the wrap
  int32_t head_tail = 0;       // 0x14 bits 524-541 (signed bytes): after the wrap, < 0 = skipped
  bool transposing = false;    // 0x13 tail_f799
  bool transpose16 = false;    // 0x13 bit 800: the transposition moves 16-bit elements
  uint32_t wait_counters = 0;  // the tile sync counter its sync record waits on (bit k), or 0
  RegisterIndirect indirect;
};
// Planes a bias load (mode-2 wideToNarrow) writes: the iterations of its narrow level 1 when that
// level steps a whole bias plane of 64 words (per-channel loads: multipliers, then biases), else 1.
// Each group of the stream carries one row per plane (docs/chip_ops.md "Per-channel").
inline uint64_t bias_load_planes(const WideNarrowInstr& n) {
  if (n.mode != 2 || n.narrow_ttu.cnt[1] == 0 || n.narrow_ttu.strides()[1] != 64) return 1;
  return uint64_t{n.narrow_ttu.cnt[1]} + 1;
}
struct NluLoadInstr {
  uint16_t tile_mask = 0;
  NluTable table;
};
struct NoInstr {};

using Decoded = std::variant<NoInstr, ScalarBundle, HaltInstr, LoopInstr, BranchInstr, ScSyncInstr,
                             PopInstr, InfeedInstr, OutfeedInstr, TileSyncInstr, RingInstr,
                             MeshInstr, WideNarrowInstr, NluLoadInstr, OpInstr>;

struct ProgramItem {
  uint8_t opcode = 0;
  uint32_t word_offset = 0;
  uint32_t words = 0;
  Decoded decoded;
};

// Memory spaces an instruction's footprint can touch.
enum class Space : uint8_t { kNarrow, kWide, kBias, kNlu, kScalarMemory };

// A byte region an instruction reads or writes (the scheduler's hazards, footprints.cpp and
// hazards.cpp).
struct Access {
  Space space = Space::kNarrow;
  bool write = false;
  int64_t lo = 0, hi = 0;  // bytes, [lo, hi): the bounding box
  bool forward = false;    // a read with no earlier writer in its region: waits for a later one
  // Reads: the units (bit = UnitId) whose later writes this read may wait for, from the sync
  // counters the instruction waits on (docs/chip.md "Scheduling"); 0 = program order only.
  uint32_t waits_for = 0;
  // The exact byte runs, sorted and merged ([lo, hi) when null): strided halo columns must not
  // look like they touch everything in between. Shared and immutable: the copies of a footprint
  // on every tile (and in every run) refer to one list; a change replaces it.
  std::shared_ptr<const std::vector<std::pair<int64_t, int64_t>>> runs;
};

// What the scheduler derives from one item alone, computed on its first dispatch and kept for
// every later one (loop bodies and the same program resent for the next inference).
struct ItemFacts {
  bool footprint_known = false;
  std::vector<Access> footprint;
  bool rows_known = false;
  // Ring / narrowToWide / wideToNarrow: visits per 256-byte wide row of the wide walk, by row.
  std::vector<std::pair<uint32_t, uint64_t>> row_visits;
  bool mesh_known = false;
  // Mesh moves: element offsets of the outbound and inbound walks (without a short last piece).
  std::vector<int64_t> mesh_out, mesh_in;
  // A relay adding its own data (walks of different lengths): per outbound word, the last inbound
  // step writing its address (-1: none), which must arrive before it is sent.
  std::vector<int64_t> mesh_wait;
};

struct Program {
  std::vector<uint8_t> bitstream;     // the bytes decoded, to recognise the same program resent
  uint64_t hash = 0;                  // of `bitstream`
  std::vector<isa::Instruction> raw;  // OpInstr::source points in here: keep the Program in place
  std::vector<ProgramItem> items;
  // The scalar core's view, dense (an item is hundreds of bytes: stepping through bundles in them
  // missed the cache on every one): per item its opcode and, for 0x20, its bundle.
  std::vector<uint8_t> opcodes;
  std::vector<ScalarBundle> bundles;
  std::vector<uint32_t> item_at_word;  // word offset -> item index (or UINT32_MAX inside an item)
  // Per item, filled by the scheduler as it dispatches (a cache: the program stays immutable).
  mutable std::vector<ItemFacts> facts;

  static uint64_t hash_of(std::span<const uint8_t> bitstream);

  // Throws Error naming the word offset for anything that cannot be decoded.
  static std::unique_ptr<Program> decode(std::span<const uint8_t> bitstream);
};

std::string opcode_name(uint8_t opcode);

}  // namespace tinycoral::chip
