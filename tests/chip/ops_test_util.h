// Helpers for the op-unit tests: build OpInstr fields from logical strides (the inverse of the
// rewinding increments, isa.md 2.0a) and a tile to run them on.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <utility>

#include "chip/tile.h"

namespace tinycoral::chip::ops_test {

// dims = (stride, iterations) innermost first; inc_k = S_k - sum_{e<k} cnt_e S_e.
inline OpTtu ttu(int64_t base, std::initializer_list<std::pair<int64_t, uint32_t>> dims) {
  OpTtu t;
  t.base = base;
  int k = 0;
  std::array<int64_t, 8> stride{};
  for (const auto& [s, n] : dims) {
    stride[k] = s;
    t.cnt[k] = n - 1;
    int64_t inc = s;
    for (int e = 0; e < k; ++e) inc -= static_cast<int64_t>(t.cnt[e]) * stride[e];
    t.inc[k] = inc;
    ++k;
  }
  // Unused outer dimensions rewind to the base (as the compiler encodes them).
  for (; k < 8; ++k) {
    int64_t inc = 0;
    for (int e = 0; e < k; ++e) inc -= static_cast<int64_t>(t.cnt[e]) * stride[e];
    t.inc[k] = inc;
  }
  return t;
}

inline void loops(OpInstr& op, std::initializer_list<uint32_t> iterations) {
  int k = 0;
  for (uint32_t n : iterations) op.loops[k++] = n - 1;
}

inline void put_i32(ZeroedBytes& mem, size_t at, int32_t v) {
  mem.at(at + 3);  // bounds
  std::memcpy(&mem[at], &v, 4);
}

// An op of the given class key with a unit multiplier and no clamping (tests set the rest).
inline OpInstr unit_op(uint8_t opcode, uint8_t dp, uint32_t cfg0, uint8_t reduce) {
  OpInstr op;
  op.opcode = opcode;
  op.dp_mode = dp;
  op.cfg0 = cfg0;
  op.reduce_mask = reduce;
  op.mult = 1.0f;
  op.clamp_min = -std::numeric_limits<float>::infinity();
  op.clamp_max = std::numeric_limits<float>::infinity();
  return op;
}

// Runs `op` on `tile` through the class the simulator picks for it (failing if none does).
inline void run_class(const OpInstr& op, Tile& tile) {
  const OpClass* cls = ops::classify(op);
  ASSERT_NE(cls, nullptr) << describe_op_class(op);
  OpEnv env(tile, op);
  cls->run(op, env);
}

}  // namespace tinycoral::chip::ops_test
