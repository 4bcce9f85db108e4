// Field access on one decoded instruction (isa.h): every read and write goes through the FieldSpec
// of the opcode table, so no bit position appears outside table_*.cpp.
#include "common/bits.h"
#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

const FieldSpec& named_field(const OpcodeSpec& spec, std::string_view name) {
  const FieldSpec* f = spec.field(name);
  if (!f) fail("instruction ", spec.mnemonic, " has no field '", name, "'");
  return *f;
}

}  // namespace

uint64_t Instruction::raw(const FieldSpec& field) const {
  return get_bits(bytes, field.lo, field.width);
}

int64_t Instruction::value(const FieldSpec& field) const {
  const uint64_t bits = raw(field);
  return field.is_signed ? sign_extend(bits, field.width) : static_cast<int64_t>(bits);
}

int64_t Instruction::value(std::string_view field_name) const {
  return value(named_field(*spec, field_name));
}

void Instruction::set_raw(const FieldSpec& field, uint64_t bits) {
  if (field.width < 64 && (bits >> field.width) != 0) {
    fail("field ", field.name, " of ", spec->mnemonic, ": 0x", std::hex, bits, " does not fit in ",
         std::dec, unsigned{field.width}, " bits");
  }
  set_bits(bytes, field.lo, field.width, bits);
}

void Instruction::set(const FieldSpec& field, int64_t value) {
  const unsigned w = field.width;
  if (field.is_signed) {
    const int64_t lo = w >= 64 ? INT64_MIN : -(int64_t{1} << (w - 1));
    const int64_t hi = w >= 64 ? INT64_MAX : (int64_t{1} << (w - 1)) - 1;
    if (value < lo || value > hi) {
      fail("field ", field.name, " of ", spec->mnemonic, ": ", value, " is outside [", lo, ", ", hi,
           "]");
    }
    const uint64_t mask = w >= 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
    set_bits(bytes, field.lo, w, static_cast<uint64_t>(value) & mask);
    return;
  }
  if (value < 0) fail("field ", field.name, " of ", spec->mnemonic, ": ", value, " is negative");
  set_raw(field, static_cast<uint64_t>(value));
}

void Instruction::set(std::string_view field_name, int64_t value) {
  set(named_field(*spec, field_name), value);
}

Instruction make_instruction(const OpcodeSpec& spec, uint32_t word_offset) {
  Instruction in;
  in.word_offset = word_offset;
  in.spec = &spec;
  in.bytes.assign(size_t{spec.words} * kWordBytes, 0);
  in.set_raw(*spec.field("opcode"), spec.opcode);
  return in;
}

bool is_nop(const Instruction& in) {
  if (in.spec->opcode != 0x20) return false;
  for (const auto& f : in.spec->fields) {
    if (f.name != "opcode" && in.raw(f) != 0) return false;
  }
  return true;
}

}  // namespace tinycoral::isa
