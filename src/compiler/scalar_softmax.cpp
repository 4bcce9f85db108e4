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

// Registers (0-11 hold the program's addresses and DMA descriptors). kCount, kTail, kBase and kInv
// live through the loop over heads; kEnd serves the first loop, kRem the second; the exponentials'
// four bytes take kA..kD, the largest byte's loop kA.
constexpr int kCount = 12, kTail = 13, kAddr = 14, kMax = 15, kNext = 16, kEnd = 17, kRem = 17,
              kSum = 18, kPack = 19, kStore = 20, kBase = 21, kInv = 22, kMult = 23, kA = 24,
              kB = 25, kC = 26, kD = 27;
// Predicates: p0 drives the branches ("a word follows", "a head follows"); p4 "a new maximum" in
// the first loop; p3, p4, p5 "byte 1, 2, 3 of this word is a position < n" in the second.
constexpr int kNewMax = 4, kValid1 = 3, kValid2 = 4, kValid3 = 5;

using namespace scalar_alu;  // alu(), movi(), bits() and the operation codes

std::string when(int pred) { return cat("gate=1 pred_reg=", pred, " pred_pol=1 "); }
std::string unless(int pred) { return cat("gate=1 pred_reg=", pred, " pred_pol=0 "); }
// The next word of the head into kNext, kAddr moving on.
std::string load_next() {
  return cat(" enable_vector=3 vs_reg_v1=", kNext, " imm_size=", hex(0x20 | kAddr));
}

// A branch back to word `target` while p0.
void branch_back(Emitter& e, uint32_t target) {
  const int64_t offset = int64_t{target} - int64_t{e.words()};
  e.add("branch", cat("k12=1 k16=1 offset=", offset, " k33=1"));
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
  const int row_words = s.positions / 4;
  if (s.heads <= 0 || s.positions <= 0 || s.positions % 4 != 0 ||
      int(s.exp_mult.size()) != s.heads || s.scores_word < 0 ||
      s.scores_word + s.heads * row_words >= kScalarMemoryWords || s.inv_word < 0 ||
      s.inv_word + s.heads > kScalarMemoryWords)
    fail("scalar softmax of ", s.heads, " heads of ", s.positions, " positions from word ",
         s.scores_word,
         ": needs positions a multiple of 4, one exp_mult per head and a word after the scores");
  // One loop over the heads, so the code is emitted once: head h's exp_mult waits at word
  // inv_word + h until its 1 / S replaces it.
  for (int h = 0; h <= s.heads; ++h) {
    const int at = s.inv_word + h - 1;
    const std::string store =
        h == 0 ? "" : cat(" v_op=0x2 v_offset=", at & 0xff, " v_cmd=", at >> 8, " vs_reg=", kA);
    const std::string set = h < s.heads ? movi(kA, bits(s.exp_mult[size_t(h)])) : "";
    e.add("bundle", h < s.heads ? set + store : store.substr(1));
  }
  e.add("bundle", movi(kA, uint32_t(s.count_word)));
  e.add("bundle", cat("enable_vector=2 vs_reg_v1=", kCount, " imm_size=", hex(kA)));
  e.add("bundle", movi(kTail, 0xffffffffu));
  // kTail = the last word's bytes below n: 0xffffffff >> 8 ((4 - n % 4) % 4).
  e.add("bundle", alu(kXor | kImm, kA, kCount, 3));
  e.add("bundle", alu(kAdd | kImm, kA, kA, 1));
  e.add("bundle", alu(kAnd | kImm, kA, kA, 3));
  e.add("bundle", alu(kShl | kImm, kA, kA, 3));
  e.add("bundle", alu(kShr, kTail, kTail, kA));
  e.add("bundle", movi(kBase, uint32_t(s.scores_word)));
  e.add("bundle", movi(kInv, uint32_t(s.inv_word)));
  // The loops take the W = (n + 3) / 4 words that hold positions < n, a word an iteration, always
  // at least one; each loads the next word (the last one's a word past the head's scores, never
  // used). Bytes past n in the last word: zeroed by kTail for the largest (0 is no byte's rival),
  // left out of S and of e (their bytes 0) by predicates in the second loop.
  const uint32_t head_loop = e.words();
  // m = the largest byte. In an iteration kAddr = base + w + 1 (word w in kNext), so a word
  // follows while kAddr < kEnd = base + W.
  e.add("bundle", alu(kMov, kAddr, 0, kBase));
  e.add("bundle", alu(kAdd | kImm, kEnd, kCount, 3) +
                      cat(" enable_vector=2 vs_reg_v1=", kMult, " imm_size=", hex(kInv)));
  e.add("bundle", alu(kShr | kImm, kEnd, kEnd, 2) + load_next());
  e.add("bundle", alu(kAdd, kEnd, kEnd, kBase));
  e.add("bundle", movi(kMax, 0));  // (the loaded word is read three bundles after its load)
  const uint32_t max_loop = e.words();
  e.add("bundle", alu(kLt, 0, kAddr, kEnd));
  e.add("bundle", unless(0) + alu(kAnd, kNext, kNext, kTail));
  for (int i = 0; i < 4; ++i) {
    if (i == 0) e.add("bundle", alu(kAnd | kImm, kA, kNext, 0xff));
    if (i > 0) e.add("bundle", alu(kShr | kImm, kA, kNext, 8 * i) + (i == 3 ? load_next() : ""));
    if (i == 1 || i == 2) e.add("bundle", alu(kAnd | kImm, kA, kA, 0xff));
    e.add("bundle", alu(kGt, kNewMax, kA, kMax));
    e.add("bundle", when(kNewMax) + alu(kMov, kMax, 0, kA));
  }
  branch_back(e, max_loop);
  // x = exp2(f32(b - m) exp_mult), S += x in order, e = F2I(x 255) packed four to a word and
  // stored over the scores' word. kRem = n - 4w: byte i of word w is a position < n while
  // kRem > i, a word follows while kRem > 4.
  e.add("bundle", alu(kMov, kAddr, 0, kBase));
  e.add("bundle", alu(kMov, kRem, 0, kCount) + load_next());
  e.add("bundle", alu(kMov, kStore, 0, kBase));
  e.add("bundle", movi(kSum, bits(0.0f)));
  // One word an iteration, every bundle an ALU operation: each byte's exp2 three bundles before
  // its sum (as the compiler's softmax waits), the other bytes' operations in between; the
  // sums in position order; the next word loaded after the last read of this one.
  const auto sub_max = [&](int r) { e.add("bundle", alu(kSub, r, r, kMax)); };
  const auto to_float = [&](int r, const std::string& more = "") {
    e.add("bundle", alu(kI2f, r, 0, r) + more);
  };
  const auto scale = [&](int r) { e.add("bundle", alu(kFmul, r, r, kMult)); };
  const auto sfu_exp2 = [](int r) { return cat(" v_op2=3 vs_reg_w=", r, " sfu_dst=", r); };
  const auto add = [&](int r, int valid) {
    e.add("bundle", (valid < 0 ? std::string() : when(valid)) + alu(kFadd, kSum, kSum, r));
  };
  const auto times255 = [&](int r) { e.add("bundle", alu(kFmul | kImm, r, r, bits(255.0f))); };
  const auto to_int = [&](int dst, int r, const std::string& more = "") {
    e.add("bundle", alu(kF2i, dst, 0, r) + more);
  };
  const auto shift = [&](int r, int by) { e.add("bundle", alu(kShl | kImm, r, r, uint32_t(by))); };
  const auto pack = [&](int r, int valid) {
    e.add("bundle", when(valid) + alu(kOr, kPack, kPack, r));
  };
  const uint32_t exp_loop = e.words();
  e.add("bundle", alu(kGt | kImm, 0, kRem, 4));
  e.add("bundle", alu(kGt | kImm, kValid1, kRem, 1));
  e.add("bundle", alu(kGt | kImm, kValid2, kRem, 2));
  e.add("bundle", alu(kGt | kImm, kValid3, kRem, 3));
  e.add("bundle", alu(kAnd | kImm, kA, kNext, 0xff));
  e.add("bundle", alu(kShr | kImm, kB, kNext, 8));
  sub_max(kA);
  e.add("bundle", alu(kAnd | kImm, kB, kB, 0xff));
  to_float(kA);
  sub_max(kB);
  scale(kA);
  to_float(kB, sfu_exp2(kA));
  e.add("bundle", alu(kShr | kImm, kC, kNext, 16));
  scale(kB);
  e.add("bundle", alu(kAnd | kImm, kC, kC, 0xff) + sfu_exp2(kB));
  add(kA, -1);
  times255(kA);
  sub_max(kC);
  to_int(kPack, kA);
  add(kB, kValid1);
  to_float(kC);
  e.add("bundle", alu(kShr | kImm, kD, kNext, 24) + load_next());
  scale(kC);
  e.add("bundle", alu(kSub, kD, kD, kMax) + sfu_exp2(kC));
  times255(kB);
  to_float(kD);
  scale(kD);
  to_int(kB, kB, sfu_exp2(kD));
  add(kC, kValid2);
  shift(kB, 8);
  add(kD, kValid3);
  times255(kC);
  pack(kB, kValid1);
  to_int(kC, kC);
  times255(kD);
  shift(kC, 16);
  to_int(kD, kD);
  pack(kC, kValid2);
  shift(kD, 24);
  pack(kD, kValid3);
  e.add("bundle", alu(kSub | kImm, kRem, kRem, 4) +
                      cat(" v_op=0x6 v_offset=", hex(0x20 | kStore), " vs_reg=", kPack));
  branch_back(e, exp_loop);
  // 1 / S over the head's exp_mult; the next head while one follows.
  e.add("bundle", cat("v_op2=2 vs_reg_w=", kSum, " sfu_dst=", kA, " ",
                      alu(kAdd | kImm, kBase, kBase, uint32_t(row_words))));
  e.add("bundle", alu(kLt | kImm, 0, kInv, uint32_t(s.inv_word + s.heads - 1)));
  e.add("bundle");
  e.add("bundle",
        alu(kAdd | kImm, kInv, kInv, 1) + cat(" v_op=0x4 v_offset=", kInv, " vs_reg=", kA));
  branch_back(e, head_loop);
}

void emit_scalar_value_prep(Emitter& e, const ScalarValuePrep& p) {
  if (p.heads <= 0 || p.positions <= 0 || p.positions % 4 != 0 || p.base.size() != p.head.size())
    fail("value preparation of ", p.heads, " heads of ", p.positions, " positions and ",
         p.base.size(), " multipliers for ", p.head.size(), " outputs");
  constexpr int kAt = 24, kZero = 20, kZ = 13, kLast = 14, kLim = 15;
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
  constexpr int kFlush = 26, kOut = 27;
  e.add("bundle", movi(kFlush, uint32_t(first)));
  e.add("loop", cat("count=", words, " body=2"));
  e.add("bundle", cat("enable_vector=3 vs_reg_v1=", kOut, " imm_size=", hex(0x20 | kFlush)));
  e.add("bundle", cat("v_op=0x8 vs_reg=", kOut));
}

}  // namespace tinycoral::compiler
