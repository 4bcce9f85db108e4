// The scalar core's ALU bundles as our scalar-core routines write them (the softmax, RMSNorm's
// scale): operation codes and text of isa.md 2.11, one definition for every routine.
#pragma once

#include <bit>
#include <cstdint>
#include <string>

#include "chip/scalar_memory.h"
#include "common/error.h"

namespace tinycoral::compiler {

// Scalar memory in the 32-bit words the routines load and store.
constexpr int kScalarMemoryWords = static_cast<int>(chip::kScalarMemoryBytes / 4);

}  // namespace tinycoral::compiler

namespace tinycoral::compiler::scalar_alu {

// ALU operations (isa.md 2.11; bit 5 of s_op: the operand is the immediate).
enum : uint32_t {
  kAdd = 0x01,
  kSub = 0x02,
  kAnd = 0x03,
  kOr = 0x04,
  kXor = 0x05,
  kShl = 0x06,
  kShr = 0x07,
  kEq = 0x09,
  kGt = 0x0b,
  kLt = 0x0c,
  kMov = 0x0f,
  kI2f = 0x10,
  kF2i = 0x11,
  kFadd = 0x12,
  kFmul = 0x14,
};
constexpr uint32_t kImm = 0x20;

// dst = src OP imm (or the register imm without kImm); compares write predicate dst.
inline std::string alu(uint32_t op, int dst, int src, uint64_t imm) {
  return cat("s_op=", hex(op), " s_x=", dst, " s_y=", src, " imm=", hex(imm));
}
inline std::string movi(int dst, uint64_t value) { return alu(kMov | kImm, dst, 0, value); }
inline uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }

}  // namespace tinycoral::compiler::scalar_alu
