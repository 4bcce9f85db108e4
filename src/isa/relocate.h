// Relocations ("field offsets", driver.md 5.5): a buffer's device address, low or high 32 bits,
// inserted into a bitstream at a bit offset. Compiled programs point every one at the 32-bit
// immediate (bit 70) of a MOVI bundle (isa.md 1.6). Plain values only: the container types stay in
// the container layer.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "isa/isa.h"

namespace tinycoral::isa {

// Writes `value` as a 32-bit little-endian bit field at `offset_bit` (bit b = bit b%8 of byte
// b/8). Throws Error if the field does not lie inside the bitstream.
void apply_field_offset(std::span<uint8_t> bitstream, int64_t offset_bit, uint32_t value);

// One field of an encoded program (compiler::Emitter::mark): the bit of the bitstream where it
// starts, its width (the ISA table's), and the value it was encoded with. A program's user may
// rewrite it in place (runtime::Program::patch_field) instead of generating the program again.
struct EncodedField {
  int64_t offset_bit = 0;
  int width = 0;
  int64_t value = 0;
};
// Writes `value` as the `width`-bit (1..64) field at `offset_bit`, the bits around it kept. Throws
// Error if the field does not lie inside the bitstream or `value` does not fit in it (unsigned).
void write_field(std::span<uint8_t> bitstream, int64_t offset_bit, int width, uint64_t value);

// Where a bit of a decoded program lies: which instruction, which field, which bit of the field.
struct BitLocation {
  size_t instruction = 0;  // index into the program
  const FieldSpec* field = nullptr;
  uint32_t bit_in_field = 0;
};
std::optional<BitLocation> locate_bit(std::span<const Instruction> program, int64_t bit);

// True if a relocation at `offset_bit` patches exactly the 32-bit immediate of a MOVI bundle
// (opcode 0x20, s_op 0x2f), as every compiled program does.
bool is_movi_immediate(std::span<const Instruction> program, int64_t offset_bit);

}  // namespace tinycoral::isa
