// Test helper: builds small bitstreams instruction by instruction, setting fields by their names in
// the ISA table (src/isa), so tests can drive the virtual Edge TPU with programs whose effect is
// known exactly, and a field the table does not have, or a value too wide for it, is a test error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
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
    specs_.push_back(spec);
    set(starts_.size() - 1, "opcode", opcode);
    return starts_.size() - 1;
  }
  // Appends an instruction of `opcode` with `fields` set and returns its index.
  size_t add(uint8_t opcode, std::initializer_list<std::pair<std::string_view, int64_t>> fields) {
    const size_t i = add(opcode);
    for (const auto& [name, value] : fields) set(i, name, value);
    return i;
  }
  // Sets field `name` of instruction `index` to `value` (its low bits for a signed field).
  void set(size_t index, std::string_view name, int64_t value) {
    const isa::FieldSpec* field = specs_.at(index)->field(name);
    if (!field) throw std::logic_error("test program: no field " + std::string(name));
    const uint64_t bits = static_cast<uint64_t>(value);
    const uint64_t mask = field->width >= 64 ? ~uint64_t{0} : (uint64_t{1} << field->width) - 1;
    const bool fits =
        field->is_signed ? (value >> (field->width - 1)) == 0 || (value >> (field->width - 1)) == -1
                         : (bits & ~mask) == 0;
    if (!fits)
      throw std::logic_error("test program: " + std::to_string(value) + " does not fit field " +
                             std::string(name));
    std::span<uint8_t> span(bytes_.data() + starts_[index], bytes_.size() - starts_[index]);
    set_bits(span, field->lo, field->width, bits & mask);
  }
  uint32_t word_of(size_t index) const { return words_[index]; }

  // Scalar bundle: s[x] = imm (MOVI).
  size_t movi(uint32_t reg, uint32_t imm) {
    const size_t i = add(0x20);
    set(i, "s_op", 0x2f);
    set(i, "s_x", reg);
    set(i, "imm", imm);
    return i;
  }
  // s[x] = s[y] + imm.
  size_t addi(uint32_t x, uint32_t y, uint32_t imm) {
    const size_t i = add(0x20);
    set(i, "s_op", 0x21);
    set(i, "s_x", x);
    set(i, "s_y", y);
    set(i, "imm", imm);
    return i;
  }
  // Descriptor word k = s[reg]; issue.
  size_t desc(uint32_t k, uint32_t reg) {
    const size_t i = add(0x20);
    set(i, "v_op", 0xa);
    set(i, "v_offset", k);
    set(i, "vs_reg", reg);
    return i;
  }
  size_t issue() {
    const size_t i = add(0x20);
    set(i, "v_op", 0xc);
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
    set(h, "code", halt_code);
    for (int k = 0; k < 4; ++k) add(0x20);
    add(0x3f);
    return bytes_;
  }

 private:
  std::vector<uint8_t> bytes_;
  std::vector<size_t> starts_;
  std::vector<uint32_t> words_;
  std::vector<const isa::OpcodeSpec*> specs_;
};

// A program that never ends and grows without end: s0 == 0 sets p0, then a fence dispatched to
// all 16 tiles and a branch back to it while p0 (16 unit instructions per pass, each kept until
// the program ends). The hostile-input tests use it against the simulator's limits.
inline std::vector<uint8_t> fence_loop_forever() {
  ProgramBuilder p;
  const size_t set_p0 = p.add(0x20);
  p.set(set_p0, "s_op", 0x29);
  const size_t fence = p.add(0x1a);
  p.set(fence, "tiles", 0xffff);
  p.set(fence, "units", 0x3ff);
  const size_t branch = p.add(0x22);
  p.set(branch, "offset", int64_t{p.word_of(fence)} - int64_t{p.word_of(branch)});
  return p.finish();
}

}  // namespace tinycoral::chip::testing
