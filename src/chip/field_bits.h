// Reading an instruction's bit fields by name, for the simulator's pre-decoders (program.cpp,
// op_decode.cpp). A Field is looked up by name in the ISA table (src/isa) once, where a decoder
// keeps it (function-local statics); each read then costs a bit extraction. No bit position is
// written in src/chip. A test decodes Google's programs with `FieldBits::reads` set and checks
// every range read lies inside one field of the table for that opcode.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/bits.h"

namespace tinycoral::chip {

// One field of one opcode, by name. Throws std::logic_error (a simulator bug, not bad input) when
// the table has no such field.
struct Field {
  Field() = default;
  Field(uint8_t opcode, std::string_view name);
  uint16_t lo = 0;
  uint8_t width = 0;
};

// The DMA-style levels of a walk named `prefix` in the table: increments <prefix>inc<k> (signed)
// and counts <prefix>cnt<k> (iterations - 1), k < levels.
struct WalkFields {
  WalkFields(uint8_t opcode, std::string_view prefix, int levels);
  int levels = 0;
  std::array<Field, 8> inc, cnt;
};

struct FieldRead {
  uint8_t opcode = 0;
  uint32_t lo = 0, width = 0;
};

struct FieldBits {
  std::span<const uint8_t> bytes;
  uint8_t opcode = 0;

  uint64_t u(const Field& f) const {
    if (reads) reads->push_back({opcode, f.lo, f.width});
    return get_bits(bytes, f.lo, f.width);
  }
  // Sign-extended from the field's width.
  int64_t s(const Field& f) const { return sign_extend(u(f), f.width); }
  bool flag(const Field& f) const { return u(f) != 0; }
  float f32(const Field& f) const { return std::bit_cast<float>(static_cast<uint32_t>(u(f))); }

  // While set (tests), every range read on this thread is appended here.
  static inline thread_local std::vector<FieldRead>* reads = nullptr;
};

}  // namespace tinycoral::chip
