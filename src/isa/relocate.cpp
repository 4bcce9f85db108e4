// Applying and locating relocations (relocate.h, driver.md 5.5).
#include "isa/relocate.h"

#include <algorithm>

#include "common/bits.h"
#include "common/error.h"

namespace tinycoral::isa {

void apply_field_offset(std::span<uint8_t> bitstream, int64_t offset_bit, uint32_t value) {
  const int64_t bits = static_cast<int64_t>(bitstream.size()) * 8;
  if (offset_bit < 0 || offset_bit > bits - 32) {
    fail("relocation at bit ", offset_bit, " does not fit in a bitstream of ", bitstream.size(),
         " bytes");
  }
  set_bits(bitstream, static_cast<uint32_t>(offset_bit), 32, value);
}

void write_field(std::span<uint8_t> bitstream, int64_t offset_bit, int width, uint64_t value) {
  const int64_t bits = static_cast<int64_t>(bitstream.size()) * 8;
  if (width < 1 || width > 64 || offset_bit < 0 || offset_bit > bits - width)
    fail("a field of ", width, " bits at bit ", offset_bit, " does not fit in a bitstream of ",
         bitstream.size(), " bytes");
  if (width < 64 && value >> width != 0)
    fail("value ", value, " does not fit in a field of ", width, " bits");
  set_bits(bitstream, static_cast<uint32_t>(offset_bit), static_cast<uint32_t>(width), value);
}

std::optional<BitLocation> locate_bit(std::span<const Instruction> program, int64_t bit) {
  if (bit < 0 || program.empty()) return std::nullopt;
  const int64_t word = bit / 128;
  // Last instruction starting at or before `word`.
  auto it = std::upper_bound(program.begin(), program.end(), word,
                             [](int64_t w, const Instruction& in) { return w < in.word_offset; });
  if (it == program.begin()) return std::nullopt;
  --it;
  const int64_t rel = bit - int64_t{it->word_offset} * 128;
  if (rel >= int64_t{it->spec->bits()}) return std::nullopt;
  for (const auto& f : it->spec->fields) {
    if (rel >= f.lo && rel < f.lo + f.width) {
      return BitLocation{static_cast<size_t>(it - program.begin()), &f,
                         static_cast<uint32_t>(rel - f.lo)};
    }
  }
  return std::nullopt;
}

bool is_movi_immediate(std::span<const Instruction> program, int64_t offset_bit) {
  const auto where = locate_bit(program, offset_bit);
  if (!where || where->bit_in_field != 0) return false;
  const Instruction& in = program[where->instruction];
  return in.spec->opcode == 0x20 && where->field->name == "imm" && where->field->width == 32 &&
         in.value("s_op") == 0x2f;
}

}  // namespace tinycoral::isa
