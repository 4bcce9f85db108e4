// OpTtu::strides: the O(8) path for ordinary walks equals the saturating definition
// S_k = INC_k + sum_{e<k} cnt_e * S_e (isa.md 2.0a, saturated at +-2^40) on random walks, from
// small to fuzzer-sized increments and counts; and the walker visits base + sum c_k S_k.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "chip/ops/mac_runs.h"
#include "chip/tile.h"

namespace tinycoral::chip {
namespace {

constexpr int64_t kFar = int64_t{1} << 40;
int64_t clamp_far(int64_t v) { return std::clamp(v, -kFar, kFar); }
int64_t mul_far(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? -kFar : kFar;
  return clamp_far(r);
}
std::array<int64_t, 8> saturating_strides(const OpTtu& t) {
  std::array<int64_t, 8> s{};
  for (int k = 0; k < 8; ++k) {
    int64_t v = clamp_far(t.inc[k]);
    for (int e = 0; e < k; ++e) v = clamp_far(v + mul_far(static_cast<int64_t>(t.cnt[e]), s[e]));
    s[k] = v;
  }
  return s;
}

TEST(TtuStrides, FastPathEqualsTheSaturatingDefinition) {
  std::mt19937_64 rng(11);
  int saturated = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    OpTtu t;
    const int scale = trial % 4;  // small, medium, large, fuzzer-sized
    for (int k = 0; k < 8; ++k) {
      const int64_t inc_span = scale == 0   ? 64
                               : scale == 1 ? 1 << 20
                               : scale == 2 ? kFar
                                            : INT64_MAX;
      const uint64_t cnt_span = scale == 0 ? 8 : scale == 1 ? 1 << 12 : UINT32_MAX;
      t.inc[k] =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(inc_span)) * (rng() % 2 ? 1 : -1);
      t.cnt[k] = static_cast<uint32_t>(rng() % cnt_span);
      if (rng() % 3 == 0) t.cnt[k] = 0;
    }
    const auto expected = saturating_strides(t);
    ASSERT_EQ(t.strides(), expected) << "trial " << trial;
    saturated += std::any_of(expected.begin(), expected.end(),
                             [](int64_t v) { return v == kFar || v == -kFar; });
  }
  EXPECT_GT(saturated, 1000);  // the fallback was exercised too
}

// The saturating definition of a walk's lowest and highest address (tile.cpp before its shortcut).
OpTtu::Extent saturating_extent(const OpTtu& t) {
  const auto s = saturating_strides(t);
  OpTtu::Extent e{clamp_far(t.base), clamp_far(t.base)};
  for (int k = 0; k < 8; ++k) {
    const int64_t span = mul_far(s[k], static_cast<int64_t>(t.cnt[k]));
    e.lo = clamp_far(e.lo + std::min<int64_t>(0, span));
    e.hi = clamp_far(e.hi + std::max<int64_t>(0, span));
  }
  return e;
}

TEST(TtuStrides, ExtentEqualsTheSaturatingDefinition) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 20000; ++trial) {
    OpTtu t;
    const int scale = trial % 4;  // small, medium, near the saturation bound, fuzzer-sized
    const int64_t inc_span = scale == 0 ? 64 : scale == 1 ? 1 << 20 : scale == 2 ? kFar / 8 : kFar;
    const uint64_t cnt_span = scale == 0 ? 8 : scale == 1 ? 1 << 12 : 1 << 4;
    for (int k = 0; k < 8; ++k) {
      t.inc[k] =
          static_cast<int64_t>(rng() % static_cast<uint64_t>(inc_span)) * (rng() % 2 ? 1 : -1);
      t.cnt[k] = static_cast<uint32_t>(rng() % cnt_span);
      if (rng() % 3 == 0) t.cnt[k] = 0;
    }
    t.base = static_cast<int64_t>(rng() % static_cast<uint64_t>(2 * kFar)) - kFar;
    if (trial % 5 == 0)
      t.base = (rng() % 2 ? 1 : -1) * (kFar / 2 - 1 + static_cast<int64_t>(rng() % 3));
    const auto want = saturating_extent(t);
    const auto got = t.extent();
    ASSERT_EQ(got.lo, want.lo) << "trial " << trial;
    ASSERT_EQ(got.hi, want.hi) << "trial " << trial;
    ASSERT_EQ(t.min_address(), want.lo) << "trial " << trial;
    ASSERT_EQ(t.max_address(), want.hi) << "trial " << trial;
  }
}

TEST(TtuStrides, WalkerVisitsBasePlusCountersTimesStrides) {
  OpTtu t;
  t.base = 100;
  t.cnt = {2, 0, 3, 1, 0, 0, 0, 0};
  t.inc = {4, 7, -5, 64, 0, 0, 0, 0};
  const auto s = t.strides();
  TtuWalker w(t);
  uint64_t visited = 0;
  do {
    int64_t expected = t.base;
    for (int k = 0; k < 8; ++k) expected += int64_t{w.counter(k)} * s[k];
    ASSERT_EQ(w.address(), expected) << "step " << visited;
    ++visited;
  } while (w.next());
  EXPECT_EQ(visited, t.steps());
}

// take(out, n) is n rounds of address() + next() (and skip(n) lands where they land), for chunk
// sizes that end inside, at and across the innermost level's runs, on random walks.
TEST(TtuStrides, TakeEqualsStepping) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 500; ++trial) {
    OpTtu t;
    t.base = static_cast<int64_t>(rng() % 1000);
    for (int k = 0; k < 8; ++k) {
      t.cnt[k] = rng() % 3 == 0 ? rng() % 5 : 0;
      t.inc[k] = static_cast<int64_t>(rng() % 41) - 20;
    }
    TtuWalker stepping(t), taking(t);
    std::vector<int64_t> expected;
    do expected.push_back(stepping.address());
    while (stepping.next());
    std::vector<int64_t> got(expected.size());
    const uint64_t chunk = 1 + rng() % 9;
    for (uint64_t at = 0; at < got.size(); at += chunk)
      taking.take(got.data() + at, std::min<uint64_t>(chunk, got.size() - at));
    ASSERT_EQ(got, expected) << "trial " << trial << " chunk " << chunk;
    EXPECT_EQ(taking.address(), stepping.address());

    // skip(n) lands where n rounds of next() land, also past the end (it stays at the last).
    for (uint64_t from = 0; from < expected.size(); from += 1 + rng() % 4) {
      TtuWalker skipping(t);
      skipping.take(got.data(), from);
      const uint64_t n = rng() % (expected.size() + 3);
      skipping.skip(n);
      ASSERT_EQ(skipping.address(), expected[std::min<uint64_t>(from + n, expected.size() - 1)])
          << "trial " << trial << " from " << from << " skip " << n;
    }
  }
}

// split_walk: where a walk's inner levels cover exactly a run, every run is its start (the outer
// levels' own walk) plus the first run's offsets; elsewhere it declines.
TEST(TtuStrides, SplitWalkGivesRunStartsPlusOnePattern) {
  std::mt19937 rng(13);
  int split = 0;
  for (int trial = 0; trial < 500; ++trial) {
    OpTtu t;
    t.base = static_cast<int64_t>(rng() % 1000);
    for (int k = 0; k < 8; ++k) {
      t.cnt[k] = rng() % 3 == 0 ? rng() % 4 : 0;
      t.inc[k] = static_cast<int64_t>(rng() % 61) - 30;
    }
    std::vector<int64_t> walk;
    TtuWalker w(t);
    do walk.push_back(w.address());
    while (w.next());
    const uint64_t length = 1 + rng() % 12;
    OpTtu outer;
    if (!ops::split_walk(t, length, outer)) continue;
    ++split;
    ASSERT_EQ(walk.size() % length, 0u);
    TtuWalker starts(outer);
    ASSERT_EQ(outer.steps(), walk.size() / length) << "trial " << trial;
    for (size_t r = 0; r < walk.size() / length; ++r, starts.next())
      for (size_t i = 0; i < length; ++i)
        ASSERT_EQ(starts.address() + (walk[i] - walk[0]), walk[r * length + i])
            << "trial " << trial << " run " << r << " step " << i;
  }
  EXPECT_GT(split, 50);
}

}  // namespace
}  // namespace tinycoral::chip
