// Reading an instruction's bit fields by position, for the simulator's pre-decoders (program.cpp,
// op_decode.cpp). The positions are the ISA table's (src/isa); a test decodes Google's programs
// with `FieldBits::reads` set and checks that every range read lies inside one field of the table
// for that opcode, so the decoders and the table cannot drift apart.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

#include "common/bits.h"

namespace tinycoral::chip {

struct FieldRead {
  uint8_t opcode = 0;
  uint32_t lo = 0, width = 0;
};

struct FieldBits {
  std::span<const uint8_t> bytes;
  uint8_t opcode = 0;

  uint64_t u(uint32_t lo, uint32_t width) const {
    if (reads) reads->push_back({opcode, lo, width});
    return get_bits(bytes, lo, width);
  }
  int64_t s(uint32_t lo, uint32_t width) const { return sign_extend(u(lo, width), width); }
  float f(uint32_t lo) const { return std::bit_cast<float>(static_cast<uint32_t>(u(lo, 32))); }

  // While set (tests), every range read on this thread is appended here.
  static inline thread_local std::vector<FieldRead>* reads = nullptr;
};

}  // namespace tinycoral::chip
