// The scalar-core RMSNorm scale (scalar_rms.h). Its slots are the softmax's (scalar_softmax.cpp):
// the integer and float32 ALU, loads with post-increment, a hardware loop and a store to an
// immediate word address, all of isa.md 2.11 and modeled by the simulator.
#include "compiler/scalar_rms.h"

#include <bit>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "compiler/scalar_alu.h"

namespace tinycoral::compiler {
// (A named namespace: in a unity build the softmax's anonymous one, with the same names, shares
// the file.)
namespace scalar_rms_parts {

// Registers (0-11 hold the program's addresses and DMA descriptors).
constexpr int kSs = 12, kAddr = 13, kWord = 14, kByte = 15, kA = 16, kHalf = 17, kY = 18, kT = 19,
              kMagic = 20;

using namespace scalar_alu;  // alu(), bits() and the operation codes

// Bundles of square_word for `bytes` bytes: the load, its two waits, six ALU ops a byte and a shift
// before each byte after the first.
constexpr int square_word_bundles(int bytes) { return 3 + 6 * bytes + (bytes - 1); }
// A hardware loop's body is at most 31 words (a 5-bit field, isa.md 0x23); bundles are one word.
static_assert(square_word_bundles(4) <= 31);

// The next word of x into kWord (kAddr moves on), then its first `bytes` bytes squared into kSs.
void square_word(Emitter& e, int bytes, uint32_t zero_point) {
  e.add("bundle", cat("enable_vector=3 vs_reg_v1=", kWord, " imm_size=", hex(0x20 | kAddr)));
  e.add("bundle");  // the loaded word two bundles later, as the softmax's loops use theirs
  e.add("bundle");
  for (int b = 0; b < bytes; ++b) {
    if (b > 0) e.add("bundle", alu(kShr | kImm, kWord, kWord, 8));
    e.add("bundle", alu(kAnd | kImm, kByte, kWord, 0xff));
    e.add("bundle", alu(kSub | kImm, kByte, kByte, zero_point));
    e.add("bundle", alu(kI2f, kByte, 0, kByte));
    e.add("bundle", alu(kFmul, kByte, kByte, kByte));
    e.add("bundle", alu(kF2i, kByte, 0, kByte));
    e.add("bundle", alu(kAdd, kSs, kSs, kByte));
  }
}

void emit(Emitter& e, const ScalarRms& s) {
  if (s.n <= 0 || s.n > 33000 || s.zero_point < 0 || s.zero_point > 255 || s.x_word < 0 ||
      s.x_word + (s.n + 3) / 4 > kScalarMemoryWords || s.r_word < 0 ||
      s.r_word >= kScalarMemoryWords || !(s.mean_mult > 0))
    fail("a scalar RMSNorm scale of ", s.n, " bytes at word ", s.x_word, ", zero point ",
         s.zero_point, ", r at word ", s.r_word);
  const uint32_t zero_point = uint32_t(s.zero_point);
  e.add("bundle", alu(kMov | kImm, kSs, 0, 0));
  e.add("bundle", alu(kMov | kImm, kAddr, 0, uint32_t(s.x_word)));
  if (const int words = s.n / 4; words > 0) {
    e.add("loop", cat("count=", words, " body=", square_word_bundles(4)));
    square_word(e, 4, zero_point);
  }
  if (s.n % 4 != 0) square_word(e, s.n % 4, zero_point);
  // a = f32(f32(ss) c) + 1e-5; the guess from a's bits; three Newton steps.
  e.add("bundle", alu(kI2f, kA, 0, kSs));
  e.add("bundle", alu(kFmul | kImm, kA, kA, bits(s.mean_mult)));
  e.add("bundle", alu(kFadd | kImm, kA, kA, bits(kRmsEpsilon)));
  e.add("bundle", alu(kFmul | kImm, kHalf, kA, bits(-0.5f)));
  e.add("bundle", alu(kShr | kImm, kY, kA, 1));
  e.add("bundle", alu(kMov | kImm, kMagic, 0, kRsqrtMagic));
  e.add("bundle", alu(kSub, kY, kMagic, kY));
  for (int step = 0; step < kRsqrtNewtonSteps; ++step) {
    e.add("bundle", alu(kFmul, kT, kY, kY));
    e.add("bundle", alu(kFmul, kT, kT, kHalf));
    e.add("bundle", alu(kFadd | kImm, kT, kT, bits(1.5f)));
    e.add("bundle", alu(kFmul, kY, kY, kT));
  }
  e.add("bundle",
        cat("v_op=0x2 v_offset=", s.r_word & 0xff, " v_cmd=", s.r_word >> 8, " vs_reg=", kY));
}

}  // namespace scalar_rms_parts

void emit_scalar_rms(Emitter& e, const ScalarRms& s) { scalar_rms_parts::emit(e, s); }

}  // namespace tinycoral::compiler
