// Test helper: builds small bitstreams instruction by instruction, setting fields at the bit
// positions the simulator reads (docs/chip.md), so tests can drive the virtual Edge TPU with
// programs whose effect is known exactly.
#pragma once

#include <cstdint>
#include <vector>

#include "common/bits.h"
#include "isa/isa.h"

namespace tinycoral::chip::testing {

class ProgramBuilder {
 public:
  ProgramBuilder() { add(0x3e); }

  // Appends an instruction of `opcode` (length from the ISA table) and returns its index.
  size_t add(uint8_t opcode) {
    const isa::OpcodeSpec* spec = isa::find_opcode(opcode);
    if (!spec) throw std::logic_error("unknown opcode in test program");
    words_.push_back(static_cast<uint32_t>(bytes_.size() / 16));
    starts_.push_back(bytes_.size());
    bytes_.resize(bytes_.size() + 16u * spec->words, 0);
    set(starts_.size() - 1, 6, 6, opcode);
    return starts_.size() - 1;
  }
  void set(size_t index, uint32_t lo, uint32_t width, uint64_t value) {
    std::span<uint8_t> span(bytes_.data() + starts_[index], bytes_.size() - starts_[index]);
    set_bits(span, lo, width, value);
  }
  uint32_t word_of(size_t index) const { return words_[index]; }

  // Scalar bundle: s[x] = imm (MOVI).
  size_t movi(uint32_t reg, uint32_t imm) {
    const size_t i = add(0x20);
    set(i, 54, 6, 0x2f);
    set(i, 60, 5, reg);
    set(i, 70, 32, imm);
    return i;
  }
  // s[x] = s[y] + imm.
  size_t addi(uint32_t x, uint32_t y, uint32_t imm) {
    const size_t i = add(0x20);
    set(i, 54, 6, 0x21);
    set(i, 60, 5, x);
    set(i, 65, 5, y);
    set(i, 70, 32, imm);
    return i;
  }
  // Descriptor word k = s[reg]; issue.
  size_t desc(uint32_t k, uint32_t reg) {
    const size_t i = add(0x20);
    set(i, 31, 5, 0xa);
    set(i, 36, 8, k);
    set(i, 49, 5, reg);
    return i;
  }
  size_t issue() {
    const size_t i = add(0x20);
    set(i, 31, 5, 0xc);
    return i;
  }
  // Host DMA descriptor (address 0) with a length held in `len_reg` and a tag in `tag_reg`.
  void descriptor(uint32_t len_reg, uint32_t tag_reg, uint32_t zero_reg) {
    desc(0, zero_reg);
    desc(1, zero_reg);
    desc(2, len_reg);
    desc(3, tag_reg);
    issue();
  }
  std::vector<uint8_t> finish(uint8_t halt_code = 4) {
    const size_t h = add(0x21);
    set(h, 14, 5, halt_code);
    for (int k = 0; k < 4; ++k) add(0x20);
    add(0x3f);
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<size_t> starts_;
  std::vector<uint32_t> words_;
};

}  // namespace tinycoral::chip::testing
