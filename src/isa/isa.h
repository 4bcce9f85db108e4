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
