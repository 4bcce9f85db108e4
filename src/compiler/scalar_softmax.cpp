// The scalar-core softmax (scalar_softmax.h). Every bundle uses slots whose semantics isa.md 2.11
// gives and the simulator models (the device softmax of Google's classifiers runs on them): the
// integer and float32 ALU, predicated bundles, loads with post-increment, register stores, host
// pushes, exp2 and reciprocal, branches while p0 and hardware loops.
#include "compiler/scalar_softmax.h"

#include <bit>
#include <cstdint>
#include <string>

#include "common/error.h"
#include "compiler/scalar_alu.h"

namespace tinycoral::compiler {
namespace {

// Registers (0-11 hold the program's addresses and DMA descriptors).
constexpr int kCount = 12, kPos = 13, kAddr = 14, kMax = 15, kWord = 16, kLow = 17, kByte = 18,
              kSum = 19, kPack = 21, kShift = 23, kAt = 24, kInv = 25, kFlush = 26, kOut = 27;
// Predicates: p0 drives the branches; p3 "a new word", p4 "a new maximum".
constexpr int kNewWord = 3, kNewMax = 4;

using namespace scalar_alu;  // alu(), movi(), bits() and the operation codes

std::string when(int pred) { return cat("gate=1 pred_reg=", pred, " pred_pol=1 "); }

// A branch back to word `target` while p0.
void branch_back(Emitter& e, uint32_t target) {
  const int64_t offset = int64_t{target} - int64_t{e.words()};
  e.add("branch", cat("k12=1 k16=1 offset=", offset, " k33=1"));
}

// The next score byte of the head into kByte (t = kPos; words are read at t % 4 == 0 through
// kAddr, bytes taken low first), and t + 1, p0 = t + 1 < n between the load and its first use.
void next_byte(Emitter& e) {
  e.add("bundle", alu(kAnd | kImm, kLow, kPos, 3));
  e.add("bundle", alu(kEq | kImm, kNewWord, kLow, 0));
  e.add("bundle",
        when(kNewWord) + cat("enable_vector=3 vs_reg_v1=", kWord, " imm_size=", hex(0x20 | kAddr)));
  e.add("bundle", alu(kAdd | kImm, kPos, kPos, 1));
  e.add("bundle", alu(kLt, 0, kPos, kCount));
  e.add("bundle", alu(kAnd | kImm, kByte, kWord, 0xff));
  e.add("bundle", alu(kShr | kImm, kWord, kWord, 8));
}

// m_j = f32(base_j scale), scale the float32 at word scale_word + of[j] (of[j] < 0: m_j = 0, the
// register `zero` holds 0), to word mult_word + j, one bundle each: the product into one of two
// registers while the other's (the previous output's) is stored at its immediate word address.
// Registers 16-18 are its own.
void emit_products(Emitter& e, int mult_word, int scale_word, const std::vector<float>& base,
                   const std::vector<int>& of, int scales, int zero) {
  constexpr int kScale = 16, kProduct = 17;
  std::string pending;  // the store the next bundle carries
  const auto store = [](int reg, int word) {
    return cat(" v_op=0x2 v_offset=", word & 0xff, " v_cmd=", word >> 8, " vs_reg=", reg);
  };
  int loaded = -1;
  for (size_t j = 0; j < of.size(); ++j) {
    const int word = mult_word + int(j), h = of[j];
    if (h < 0) {
      if (!pending.empty()) e.add("bundle", pending.substr(1));
      pending = store(zero, word);
      continue;
    }
    if (h != loaded) {
      if (h >= scales) fail("output ", j, " of head ", h, " of ", scales);
      e.add("bundle",
            cat("enable_vector=1 vs_reg_v1=", kScale, " imm_size=", hex(scale_word + h), pending));
      pending.clear();
      e.add("bundle");  // the loaded word two bundles later, as the softmax's loops use theirs
      e.add("bundle");
      loaded = h;
    }
    const int reg = kProduct + int(j % 2);
    e.add("bundle", alu(kFmul | kImm, reg, kScale, bits(base[j])) + pending);
    pending = store(reg, word);
  }
  if (!pending.empty()) e.add("bundle", pending.substr(1));
}

}  // namespace

void emit_scalar_softmax(Emitter& e, const ScalarSoftmax& s) {
  if (s.heads <= 0 || s.positions <= 0 || s.positions % 4 != 0 || int(s.exp_mult.size()) != s.heads)
    fail("scalar softmax of ", s.heads, " heads of ", s.positions,
         " positions: needs positions a multiple of 4 and one exp_mult per head");
  e.add("bundle", movi(kAt, uint32_t(s.count_word)));
  e.add("bundle", cat("enable_vector=2 vs_reg_v1=", kCount, " imm_size=", hex(kAt)));
  for (int h = 0; h < s.heads; ++h) {
    const int base = s.scores_word + h * s.positions / 4;
    // m = the largest byte.
    e.add("bundle", movi(kPos, 0));
    e.add("bundle", movi(kAddr, uint32_t(base)));
    e.add("bundle", movi(kMax, 0));
    const uint32_t max_loop = e.words();
    next_byte(e);
    e.add("bundle", alu(kGt, kNewMax, kByte, kMax));
    e.add("bundle", when(kNewMax) + alu(kMov, kMax, 0, kByte));
    branch_back(e, max_loop);
    // x = exp2(f32(b - m) exp_mult), S += x in order, e = F2I(x 255) packed four to a word and
    // stored over the scores' word.
    e.add("bundle", movi(kPos, 0));
    e.add("bundle", movi(kAddr, uint32_t(base)));
    e.add("bundle", movi(kSum, bits(0.0f)));
    const uint32_t exp_loop = e.words();
    e.add("bundle", alu(kShr | kImm, kAt, kPos, 2));  // the word t / 4, before t moves on
    e.add("bundle", alu(kAnd | kImm, kLow, kPos, 3));
    e.add("bundle", alu(kShl | kImm, kShift, kLow, 3));  // the byte's shift in its word
    e.add("bundle", alu(kEq | kImm, kNewWord, kLow, 0));
    e.add("bundle", when(kNewWord) +
                        cat("enable_vector=3 vs_reg_v1=", kWord, " imm_size=", hex(0x20 | kAddr)));
    e.add("bundle", when(kNewWord) + movi(kPack, 0));
    e.add("bundle", alu(kAdd | kImm, kPos, kPos, 1));
    e.add("bundle", alu(kLt, 0, kPos, kCount));
    e.add("bundle", alu(kAnd | kImm, kByte, kWord, 0xff));
    e.add("bundle", alu(kShr | kImm, kWord, kWord, 8));
    e.add("bundle", alu(kSub, kByte, kByte, kMax));
    e.add("bundle", alu(kI2f, kByte, 0, kByte));
    e.add("bundle", alu(kFmul | kImm, kByte, kByte, bits(s.exp_mult[size_t(h)])));
    // exp2, and two bundles before its result is read (as the compiler's softmax waits).
    e.add("bundle", cat("v_op2=3 vs_reg_w=", kByte, " sfu_dst=", kInv, " ",
                        alu(kAdd | kImm, kAt, kAt, uint32_t(base))));
    e.add("bundle");
    e.add("bundle");
    e.add("bundle", alu(kFadd, kSum, kSum, kInv));
    e.add("bundle", alu(kFmul | kImm, kInv, kInv, bits(255.0f)));
    e.add("bundle", alu(kF2i, kInv, 0, kInv));
    e.add("bundle", alu(kShl, kInv, kInv, kShift));
    e.add("bundle", alu(kOr, kPack, kPack, kInv));
    e.add("bundle", cat("v_op=0x4 v_offset=", kAt, " vs_reg=", kPack));
    branch_back(e, exp_loop);
    // 1 / S.
    e.add("bundle", cat("v_op2=2 vs_reg_w=", kSum, " sfu_dst=", kInv, " ",
                        movi(kAt, uint32_t(s.inv_word + h))));
    e.add("bundle");
    e.add("bundle");
    e.add("bundle", cat("v_op=0x4 v_offset=", kAt, " vs_reg=", kInv));
  }
}

void emit_scalar_value_prep(Emitter& e, const ScalarValuePrep& p) {
  if (p.heads <= 0 || p.positions <= 0 || p.positions % 4 != 0 || p.base.size() != p.head.size())
    fail("value preparation of ", p.heads, " heads of ", p.positions, " positions and ",
         p.base.size(), " multipliers for ", p.head.size(), " outputs");
  constexpr int kZero = 20, kZ = 13, kLast = 14, kLim = 15;
  constexpr int kPast = 5;  // predicate: the word lies past n
  // kLast = the last word of a row that holds e: (n + 3) / 4 - 1.
  e.add("bundle", movi(kAt, uint32_t(p.count_word)));
  e.add("bundle", cat("enable_vector=2 vs_reg_v1=", kCount, " imm_size=", hex(kAt)));
  e.add("bundle", movi(kZero, 0));
  e.add("bundle", alu(kAdd | kImm, kLast, kCount, 3));
  e.add("bundle", alu(kShr | kImm, kLast, kLast, 2));
  e.add("bundle", alu(kSub | kImm, kLast, kLast, 1));
  for (int h = 0; h < p.heads; ++h) {
    const int base = p.scores_word + h * p.positions / 4;
    e.add("bundle", movi(kZ, uint32_t(base)));
    e.add("bundle", alu(kAdd | kImm, kLim, kLast, uint32_t(base)));
    e.add("loop", cat("count=", p.positions / 4, " body=3"));
    e.add("bundle", alu(kGt, kPast, kZ, kLim));
    e.add("bundle", when(kPast) + cat("v_op=0x4 v_offset=", kZ, " vs_reg=", kZero));
    e.add("bundle", alu(kAdd | kImm, kZ, kZ, 1));
  }
  emit_products(e, p.mult_word, p.inv_word, p.base, p.head, p.heads, kZero);
}

void emit_scalar_rope_multipliers(Emitter& e, const ScalarRopeMultipliers& m) {
  const int n = int(m.base.size());
  if (m.padding.size() != m.base.size() || n == 0 || m.r_word < 0 ||
      m.r_word >= kScalarMemoryWords || m.mult_word < 0 || m.mult_word + n > kScalarMemoryWords ||
      (m.r_word >= m.mult_word && m.r_word < m.mult_word + n))
    fail("RoPE multipliers of ", n, " outputs (", m.padding.size(), " padding flags) from word ",
         m.mult_word, " with r at word ", m.r_word);
  constexpr int kZero = 20;
  std::vector<int> of(m.padding.size(), 0);
  for (size_t j = 0; j < of.size(); ++j)
    if (m.padding[j]) of[j] = -1;
  e.add("bundle", movi(kZero, 0));
  emit_products(e, m.mult_word, m.r_word, m.base, of, 1, kZero);
}

void emit_scalar_rope_multipliers_loop(Emitter& e, int r_word, int mult_word, int base_word,
                                       int n) {
  const auto inside = [](int at, int words) {
    return at >= 0 && words >= 0 && at + words <= kScalarMemoryWords;
  };
  const auto over = [&](int at) { return r_word >= at && r_word < at + n; };
  // The in-place form reads j and j + 1 before it writes them; shifted ranges would read a word
  // the loop already wrote.
  const bool apart =
      base_word == mult_word || base_word + n <= mult_word || mult_word + n <= base_word;
  if (n <= 0 || n % 4 != 0 || n / 4 > 0xffff || !inside(r_word, 1) || !inside(mult_word, n) ||
      !inside(base_word, n) || over(mult_word) || over(base_word) || !apart)
    fail("a loop of ", n, " RoPE multipliers from word ", base_word, " to word ", mult_word,
         " with r at word ", r_word);
  // Four outputs an iteration: each product two bundles after its load (as emit_products waits)
  // and stored the bundle after it, the memory slot busy in all but one of eight bundles.
  constexpr int kR = 16, kFrom = 17, kTo = 18, kB = 19, kP = 23;  // kB, kP: four each
  const auto load_next = [](int reg) {
    return cat("enable_vector=3 vs_reg_v1=", reg, " imm_size=", hex(0x20 | kFrom));
  };
  const auto store_next = [](int reg) {
    return cat(" v_op=0x6 v_offset=", hex(0x20 | kTo), " vs_reg=", reg);
  };
  const auto product = [](int i) { return alu(kFmul, kP + i, kB + i, kR); };
  e.add("bundle", cat("enable_vector=1 vs_reg_v1=", kR, " imm_size=", hex(r_word)));
  e.add("bundle", movi(kFrom, uint32_t(base_word)));
  e.add("bundle", movi(kTo, uint32_t(mult_word)));  // (r is read two bundles after its load)
  e.add("loop", cat("count=", n / 4, " body=8"));
  e.add("bundle", load_next(kB));
  e.add("bundle", load_next(kB + 1));
  e.add("bundle", load_next(kB + 2));
  e.add("bundle", load_next(kB + 3) + " " + product(0));
  for (int i = 0; i < 3; ++i) e.add("bundle", product(i + 1) + store_next(kP + i));
  e.add("bundle", store_next(kP + 3).substr(1));
}

void emit_push_words(Emitter& e, int first, int words) {
  if (words <= 0 || words > 0xffff) fail("pushing ", words, " scalar-memory words");
  e.add("bundle", movi(kFlush, uint32_t(first)));
  e.add("loop", cat("count=", words, " body=2"));
  e.add("bundle", cat("enable_vector=3 vs_reg_v1=", kOut, " imm_size=", hex(0x20 | kFlush)));
  e.add("bundle", cat("v_op=0x8 vs_reg=", kOut));
}

}  // namespace tinycoral::compiler
