// Bitstream <-> instructions (isa.md 1.1-1.2): the opcode (bits 6-11 of an instruction's first
// word) fixes its length; decoding keeps every byte, so encode(decode(b)) == b.
#include "common/bits.h"
#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {

std::vector<Instruction> decode(std::span<const uint8_t> bitstream) {
  if (bitstream.size() % kWordBytes != 0) {
    fail("bitstream of ", bitstream.size(), " bytes is not a whole number of 16-byte words");
  }
  const size_t total_words = bitstream.size() / kWordBytes;
  if (total_words > UINT32_MAX) fail("bitstream of ", bitstream.size(), " bytes is too large");
  std::vector<Instruction> out;
  size_t word = 0;
  while (word < total_words) {
    const uint8_t* first = bitstream.data() + word * kWordBytes;
    const auto opcode = static_cast<uint8_t>(get_bits({first, kWordBytes}, 6, 6));
    const OpcodeSpec* spec = find_opcode(opcode);
    if (!spec) fail("word ", word, ": unknown opcode 0x", std::hex, unsigned{opcode});
    if (word + spec->words > total_words) {
      fail("word ", word, ": ", spec->mnemonic, " (0x", std::hex, unsigned{opcode}, std::dec,
           ") needs ", unsigned{spec->words}, " words but the bitstream ends after ",
           total_words - word);
    }
    Instruction in;
    in.word_offset = static_cast<uint32_t>(word);
    in.spec = spec;
    in.bytes.assign(first, first + size_t{spec->words} * kWordBytes);
    out.push_back(std::move(in));
    word += spec->words;
  }
  return out;
}

std::vector<uint8_t> encode(std::span<const Instruction> program) {
  size_t total = 0;
  for (const auto& in : program) total += in.bytes.size();
  std::vector<uint8_t> out;
  out.reserve(total);
  for (const auto& in : program) {
    if (!in.spec || in.bytes.size() != size_t{in.spec->words} * kWordBytes) {
      fail("instruction at word ", in.word_offset, " has ", in.bytes.size(),
           " bytes, not the length of its opcode");
    }
    if (get_bits(in.bytes, 6, 6) != in.spec->opcode) {
      fail("instruction at word ", in.word_offset, ": its opcode bits disagree with ",
           in.spec->mnemonic);
    }
    out.insert(out.end(), in.bytes.begin(), in.bytes.end());
  }
  return out;
}

}  // namespace tinycoral::isa
