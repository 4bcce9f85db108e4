// Instruction -> one line of assembly (syntax: docs/isa.md). Every non-zero field is printed, so
// parse(print(x)) re-encodes to the same bytes; zero fields are left out to keep lines readable.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "isa/isa.h"
#include "isa/syntax.h"

namespace tinycoral::isa {
namespace detail {

std::vector<int> nest_membership(const OpcodeSpec& spec) {
  std::vector<int> member(spec.fields.size(), -1);
  for (size_t n = 0; n < spec.nests.size(); ++n) {
    for (const auto& level : spec.nests[n].levels) {
      for (int16_t f : {level.inc, level.count, level.mode}) {
        if (f >= 0) member[static_cast<size_t>(f)] = static_cast<int>(n);
      }
    }
  }
  return member;
}

}  // namespace detail

namespace {

void append_hex(std::string& out, uint64_t v, unsigned width_bits) {
  char buf[32];
  const int digits = static_cast<int>((width_bits + 3) / 4);
  std::snprintf(buf, sizeof buf, "0x%0*llx", digits > 16 ? 16 : digits,
                static_cast<unsigned long long>(v));
  out += buf;
}

// Float fields print as a decimal that reads back to the same bits; anything else (NaN) as hex.
void append_f32(std::string& out, uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  if (!std::isnan(f)) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.9g", static_cast<double>(f));
    const float back = std::strtof(buf, nullptr);
    uint32_t back_bits;
    std::memcpy(&back_bits, &back, 4);
    if (back_bits == bits) {
      out += buf;
      return;
    }
  }
  append_hex(out, bits, 32);
}

void append_value(std::string& out, const Instruction& in, const FieldSpec& f) {
  const uint64_t raw = in.raw(f);
  if (f.format == FieldSpec::Format::kF32) {
    append_f32(out, static_cast<uint32_t>(raw));
  } else if (f.format == FieldSpec::Format::kHex || f.reserved()) {
    append_hex(out, raw, f.width);
  } else {
    out += std::to_string(in.value(f));
  }
}

bool nest_is_zero(const Instruction& in, const LoopNestSpec& nest) {
  for (const auto& level : nest.levels) {
    for (int16_t f : {level.inc, level.count, level.mode}) {
      if (f >= 0 && in.raw(in.spec->fields[static_cast<size_t>(f)]) != 0) return false;
    }
  }
  return true;
}

// (inc x iterations [mMODE]) per level, innermost first, trailing all-zero levels left out.
void append_nest(std::string& out, const Instruction& in, const LoopNestSpec& nest) {
  const auto& fields = in.spec->fields;
  size_t used = nest.levels.size();
  while (used > 0) {
    const auto& level = nest.levels[used - 1];
    bool zero = true;
    for (int16_t f : {level.inc, level.count, level.mode}) {
      if (f >= 0 && in.raw(fields[static_cast<size_t>(f)]) != 0) zero = false;
    }
    if (!zero) break;
    --used;
  }
  out += nest.name;
  out += '=';
  for (size_t k = 0; k < used; ++k) {
    const auto& level = nest.levels[k];
    out += '(';
    if (level.inc >= 0) {
      out += std::to_string(in.value(fields[static_cast<size_t>(level.inc)]));
      out += " x ";
    }
    out += std::to_string(in.raw(fields[static_cast<size_t>(level.count)]) + 1);
    if (level.mode >= 0) {
      if (const uint64_t mode = in.raw(fields[static_cast<size_t>(level.mode)]); mode != 0) {
        out += " m";
        out += std::to_string(mode);
      }
    }
    out += ')';
  }
}

}  // namespace

std::string print(const Instruction& in) {
  std::string out;
  char offset[16];
  std::snprintf(offset, sizeof offset, "%5u: ", in.word_offset);
  out += offset;
  if (is_nop(in)) {
    out += detail::kNopMnemonic;
    return out;
  }
  out += in.spec->mnemonic;
  const auto member = detail::nest_membership(*in.spec);
  std::vector<bool> nest_done(in.spec->nests.size(), false);
  const auto& fields = in.spec->fields;
  for (size_t i = 0; i < fields.size(); ++i) {
    const FieldSpec& f = fields[i];
    if (f.name == "opcode") continue;
    if (member[i] >= 0) {
      const auto n = static_cast<size_t>(member[i]);
      if (nest_done[n]) continue;
      nest_done[n] = true;
      if (nest_is_zero(in, in.spec->nests[n])) continue;
      out += ' ';
      append_nest(out, in, in.spec->nests[n]);
      continue;
    }
    const bool always = in.spec->sequenced && (f.name == "tiles" || f.name == "seq");
    if (!always && in.raw(f) == 0) continue;
    out += ' ';
    out += f.name;
    out += '=';
    append_value(out, in, f);
  }
  return out;
}

std::string print_program(std::span<const Instruction> program) {
  return print_program(program, {});
}

std::string print_program(std::span<const Instruction> program,
                          std::span<const Annotation> annotations) {
  std::string out;
  for (const auto& in : program) {
    out += print(in);
    bool first = true;
    const auto comment = [&](const std::string& text) {
      out += first ? "  ; " : "; ";
      out += text;
      first = false;
    };
    for (const auto& note : annotations) {
      if (note.word_offset == in.word_offset) comment(note.text);
    }
    if (const std::string reading = describe_bundle(in); !reading.empty()) comment(reading);
    out += '\n';
  }
  return out;
}

}  // namespace tinycoral::isa
