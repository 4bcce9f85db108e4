// The Edge TPU instruction set, driven by one declarative table (opcodes.cpp): every opcode with
// its length in 128-bit words and every bit field, reserved bits included, so that decode -> encode
// is lossless. Decoder, encoder, printer and parser all read that table; no field position is
// written twice. Facts: docs/isa.md.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tinycoral::isa {

constexpr uint32_t kWordBytes = 16;  // one 128-bit word

// Every opcode by name, for code that dispatches on opcodes (the simulator). The table declares
// each opcode with its enumerator (table_*.cpp), so each number is written once; a test checks
// that every enumerator has a table entry and the reverse.
enum Opcode : uint8_t {
  kTensorOp = 0x01,       // op: MAC, requantize, copy, elementwise (isa.md 2.1)
  kPoolOp = 0x02,         // pool: the 0x01 layout (isa.md 2.2)
  kReduceOp = 0x03,       // reduce: the 0x01 layout (isa.md 2.3)
  kOp05 = 0x05,           // op05: undecoded 17-word tile op
  kRingProducer = 0x10,   // ringprod
  kRingConsumer0 = 0x11,  // ringcons0
  kRingConsumer1 = 0x12,  // ringcons1: the weight FIFO's consumer
  kNarrowToWide = 0x13,   // n2w
  kWideToNarrow = 0x14,   // w2n
  kMeshSouth = 0x15,      // mesh_s: tile t to t+4
  kMeshWest = 0x16,       // mesh_w: tile t to t-1
  kMeshNorth = 0x17,      // mesh_n: tile t to t-4
  kMeshEast = 0x18,       // mesh_e: tile t to t+1
  kNluLoad = 0x19,        // nlu
  kTileSync = 0x1a,       // sync
  kBundle = 0x20,         // bundle: the scalar core's VLIW bundle
  kHalt = 0x21,
  kBranch = 0x22,
  kLoop = 0x23,
  kScalarSync = 0x24,  // scsync
  kPop = 0x25,         // avDataPop / parameterPop
  kInfeed = 0x26,
  kOutfeed = 0x27,
  kStart = 0x3e,  // the program header
  kEnd = 0x3f,
};
// The enumerators in order (the test's list; the table must have exactly these).
inline constexpr Opcode kOpcodes[] = {
    kTensorOp,      kPoolOp,        kReduceOp,     kOp05,         kRingProducer,
    kRingConsumer0, kRingConsumer1, kNarrowToWide, kWideToNarrow, kMeshSouth,
    kMeshWest,      kMeshNorth,     kMeshEast,     kNluLoad,      kTileSync,
    kBundle,        kHalt,          kBranch,       kLoop,         kScalarSync,
    kPop,           kInfeed,        kOutfeed,      kStart,        kEnd};
// The scalar ALU's operations: the low 5 bits of a bundle's `s_op` (bit 5 selects the immediate
// form), isa.md 2.11. Comparisons write predicate s_x & 7.
enum ScalarAluOp : uint8_t {
  kAluNone = 0x00,
  kAluAdd = 0x01,
  kAluSub = 0x02,
  kAluAnd = 0x03,
  kAluOr = 0x04,
  kAluXor = 0x05,
  kAluShiftLeft = 0x06,
  kAluShiftRight = 0x07,        // logical
  kAluShiftRightSigned = 0x08,  // arithmetic
  kAluEqual = 0x09,
  kAluNotEqual = 0x0a,
  kAluGreaterSigned = 0x0b,
  kAluLessSigned = 0x0c,
  kAluGreaterEqualUnsigned = 0x0d,
  kAluGreaterEqualSigned = 0x0e,
  kAluMove = 0x0f,
  kAluIntToFloat = 0x10,
  kAluFloatToInt = 0x11,
  kAluFloatAdd = 0x12,
  kAluFloatSub = 0x13,
  kAluFloatMul = 0x14,
  kAluFloatMax = 0x15,
  kAluFloatMin = 0x16,
};
constexpr uint8_t kAluImmediateBit = 0x20;  // in `s_op`: the operand b is `imm`, not register imm
// The vector slot's operations (a bundle's `v_op`), isa.md 2.11.
enum VectorSlotOp : uint8_t {
  kVectorNone = 0x0,
  kStoreToWordAddress = 0x2,  // to the immediate word address v_cmd:v_offset
  kStore = 0x4,
  kStorePostIncrement = 0x6,
  kPushToHost = 0x8,
  kDescriptorWord = 0xa,
  kDescriptorIssue = 0xc,
};

// Tensor ops (0x01-0x03) share one layout; mesh moves (0x15-0x18) one per direction.
constexpr bool is_tensor_op(uint8_t opcode) { return opcode >= kTensorOp && opcode <= kReduceOp; }
constexpr bool is_mesh(uint8_t opcode) { return opcode >= kMeshSouth && opcode <= kMeshEast; }
// The mesh direction index 0..3 (south, west, north, east) of a mesh opcode.
constexpr uint32_t mesh_direction(uint8_t opcode) { return uint32_t{opcode} - kMeshSouth; }

// One bit field of an instruction, at absolute bit positions in the little-endian integer formed by
// all of the instruction's words (bit 0 = bit 0 of byte 0 of the first word).
struct FieldSpec {
  std::string_view name;  // unique within the opcode; reserved fields are named "rsv<lo>"
  uint16_t lo = 0;        // first bit
  uint8_t width = 0;      // 1..64
  bool is_signed = false;
  std::string_view meaning;  // one line, for the docs and the disassembler's help
  enum class Format : uint8_t {
    kDec,
    kHex,
    kF32
  } format = Format::kDec;  // how the printer shows it

  bool reserved() const { return name.starts_with("rsv"); }
};

// One level of a loop nest (a TTU or a walk): indices into OpcodeSpec::fields, -1 when absent
// (the main loop of 0x01 has counts only; DMA-style levels have no mode).
struct LoopLevel {
  int16_t inc = -1;
  int16_t count = -1;  // the field holds iterations - 1
  int16_t mode = -1;
};
// A loop nest printed as one token of (increment x iterations) levels, innermost first.
struct LoopNestSpec {
  std::string_view name;
  std::vector<LoopLevel> levels;
};

enum class Unit : uint8_t { kTile, kScalar };

struct OpcodeSpec {
  uint8_t opcode = 0;
  std::string_view mnemonic;
  uint8_t words = 0;
  Unit unit = Unit::kScalar;
  bool sequenced = false;  // carries a sequence number (tile-dispatched, isa.md 1.3)
  std::span<const FieldSpec> fields;
  std::string_view summary;
  std::span<const LoopNestSpec> nests;  // fields grouped into loop nests for printing

  const FieldSpec* field(std::string_view name) const;
  uint32_t bits() const { return words * 128u; }
};

std::span<const OpcodeSpec> opcode_table();
const OpcodeSpec* find_opcode(uint8_t opcode);
const OpcodeSpec* find_mnemonic(std::string_view mnemonic);

// One decoded instruction: its raw bytes plus where it sits in the stream.
struct Instruction {
  uint32_t word_offset = 0;  // in 128-bit words from the start of the bitstream
  const OpcodeSpec* spec = nullptr;
  std::vector<uint8_t> bytes;  // spec->words * 16 bytes

  uint8_t opcode() const { return spec->opcode; }
  uint64_t raw(const FieldSpec& field) const;        // zero-extended bits
  int64_t value(const FieldSpec& field) const;       // sign-extended where the field is signed
  int64_t value(std::string_view field_name) const;  // throws Error for an unknown name
  void set(const FieldSpec& field, int64_t value);   // throws Error if it does not fit
  void set(std::string_view field_name, int64_t value);
  void set_raw(const FieldSpec& field, uint64_t bits);  // throws Error if bits exceed the width
};

// Builds an all-zero instruction of `spec` with its opcode field set.
Instruction make_instruction(const OpcodeSpec& spec, uint32_t word_offset = 0);
// Whether `in` is a nop with every field but its opcode zero (the check and the printer's `nop`).
bool is_nop(const Instruction& in);

// Splits a bitstream into instructions by their opcodes' lengths. Throws Error naming the word
// offset for a length that is not a multiple of 16, an unknown opcode, or an instruction cut off at
// the end.
std::vector<Instruction> decode(std::span<const uint8_t> bitstream);
std::vector<uint8_t> encode(std::span<const Instruction> program);

// A diagnostic from check(): the word offset and what is wrong.
struct Diagnostic {
  uint32_t word_offset = 0;
  std::string message;
};
// Structural checks a real program passes (isa.md 1.3-1.4): start/halt/nop/end frame, start's
// length field, the running sequence number. `first_seq` continues numbering across bitstreams.
std::vector<Diagnostic> check(std::span<const Instruction> program, uint32_t first_seq = 0);
// Tile-dispatched (sequence-numbered) instructions in `program`: the next bitstream's first_seq is
// this bitstream's first_seq plus this count.
uint32_t count_sequenced(std::span<const Instruction> program);

// Assembly text: one instruction per line (see docs/isa.md for the syntax).
std::string print(const Instruction& instruction);
std::string print_program(std::span<const Instruction> program);
// A note printed as a comment after the instruction at `word_offset` (e.g. a relocation mark).
struct Annotation {
  uint32_t word_offset = 0;
  std::string text;
};
std::string print_program(std::span<const Instruction> program,
                          std::span<const Annotation> annotations);
// Parses assembly text; throws Error with the line number on any mistake.
std::vector<Instruction> parse(std::string_view text);

// A readable reading of a 0x20 bundle's slots (`s4 = s4 + 0x1; desc[1] = s5`, isa.md 2.11), ""
// for other opcodes and nops. print_program adds it as a comment.
std::string describe_bundle(const Instruction& instruction);

// The opcode table as markdown (the reference part of docs/isa.md; `tinycoral disasm --table`).
std::string table_markdown();

}  // namespace tinycoral::isa
