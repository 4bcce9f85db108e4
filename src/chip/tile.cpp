// Tile state and the bounds-checked memory view op implementations use (see tile.h).
#include "chip/tile.h"

#include <algorithm>
#include <cstring>

namespace tinycoral::chip {

namespace {
// Fuzzed walks have strides far beyond any memory; keep the arithmetic defined by saturating at
// +-2^40 (every real address is below 2^24), so that bounds checks reject them later.
constexpr int64_t kFar = int64_t{1} << 40;
int64_t clamp_far(int64_t v) { return std::clamp(v, -kFar, kFar); }
int64_t mul_far(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) return (a < 0) != (b < 0) ? -kFar : kFar;
  return clamp_far(r);
}
}  // namespace

namespace {
// What the walks of one (increments, counts) pair share, whatever their base: the strides and, when
// nothing can saturate, the sums of the negative and the positive spans cnt_k * S_k.
struct WalkShape {
  std::array<int64_t, 8> inc{};
  std::array<uint32_t, 8> cnt{};
  std::array<int64_t, 8> strides{};
  int64_t below = 0, above = 0;  // sum of min(0, span_k), of max(0, span_k)
  bool small = false;            // sum of |span_k| < kFar / 2: no clamping for |base| < kFar / 2
  bool valid = false;
};

// Programs ask for the same few walks thousands of times per run (extents, loop roles, splits):
// remember the last ones per thread, keyed by increments and counts.
const WalkShape& shape_of(const OpTtu& t) {
  thread_local std::array<WalkShape, 64> memo;
  uint64_t hash = 0;
  for (int k = 0; k < 8; ++k)
    hash =
        (hash ^ static_cast<uint64_t>(t.inc[k]) ^ (uint64_t{t.cnt[k]} << 32)) * 0x9e3779b97f4a7c15u;
  WalkShape& m = memo[hash >> 58];
  if (m.valid && m.inc == t.inc && m.cnt == t.cnt) return m;
  m.inc = t.inc;
  m.cnt = t.cnt;
  m.strides = t.compute_strides();
  m.below = m.above = 0;
  m.small = true;
  int64_t total = 0;
  for (int k = 0; k < 8 && m.small; ++k) {
    int64_t span = 0;
    if (__builtin_mul_overflow(m.strides[k], static_cast<int64_t>(t.cnt[k]), &span) ||
        span <= -kFar / 2 || span >= kFar / 2) {
      m.small = false;
      break;
    }
    total += span < 0 ? -span : span;
    (span < 0 ? m.below : m.above) += span;
    m.small = total < kFar / 2;
  }
  m.valid = true;
  return m;
}

bool small_base(int64_t base) { return base > -kFar / 2 && base < kFar / 2; }
}  // namespace

std::array<int64_t, 8> OpTtu::strides() const { return shape_of(*this).strides; }

std::array<int64_t, 8> OpTtu::compute_strides() const {
  // S_k = INC_k + sum_{e<k} cnt_e * S_e (isa.md 2.0a). Fast path, O(8): while the magnitudes of
  // every product and partial sum stay within kFar no saturation can trigger, so the running sum
  // gives exactly what the saturating O(64) loop below gives (ops ask for this many times each).
  {
    std::array<int64_t, 8> s{};
    int64_t sum = 0, bound = 0;  // sum_{e<k} cnt_e * S_e and sum_{e<k} |cnt_e * S_e|
    bool exact = true;
    for (int k = 0; k < 8 && exact; ++k) {
      const int64_t magnitude = inc[k] < 0 ? -inc[k] : inc[k];
      if (inc[k] < -kFar || inc[k] > kFar || bound + magnitude > kFar) {
        exact = false;
        break;
      }
      s[k] = inc[k] + sum;
      int64_t product = 0;
      if (__builtin_mul_overflow(static_cast<int64_t>(cnt[k]), s[k], &product) || product < -kFar ||
          product > kFar) {
        exact = false;
        break;
      }
      sum += product;
      bound += product < 0 ? -product : product;
    }
    if (exact) return s;
  }
  std::array<int64_t, 8> s{};
  for (int k = 0; k < 8; ++k) {
    int64_t v = clamp_far(inc[k]);
    for (int e = 0; e < k; ++e) v = clamp_far(v + mul_far(static_cast<int64_t>(cnt[e]), s[e]));
    s[k] = v;
  }
  return s;
}

int64_t OpTtu::min_address() const {
  const WalkShape& shape = shape_of(*this);
  if (shape.small && small_base(base)) return base + shape.below;
  const auto s = shape.strides;
  int64_t lo = clamp_far(base);
  for (int k = 0; k < 8; ++k)
    lo = clamp_far(lo + std::min<int64_t>(0, mul_far(s[k], static_cast<int64_t>(cnt[k]))));
  return lo;
}

int64_t OpTtu::max_address() const {
  const WalkShape& shape = shape_of(*this);
  if (shape.small && small_base(base)) return base + shape.above;
  const auto s = shape.strides;
  int64_t hi = clamp_far(base);
  for (int k = 0; k < 8; ++k)
    hi = clamp_far(hi + std::max<int64_t>(0, mul_far(s[k], static_cast<int64_t>(cnt[k]))));
  return hi;
}

OpTtu::Extent OpTtu::extent() const {
  const WalkShape& shape = shape_of(*this);
  if (shape.small && small_base(base)) return {base + shape.below, base + shape.above};
  const auto s = shape.strides;
  Extent e{clamp_far(base), clamp_far(base)};
  for (int k = 0; k < 8; ++k) {
    const int64_t span = mul_far(s[k], static_cast<int64_t>(cnt[k]));
    e.lo = clamp_far(e.lo + std::min<int64_t>(0, span));
    e.hi = clamp_far(e.hi + std::max<int64_t>(0, span));
  }
  return e;
}

uint64_t OpTtu::steps() const {
  uint64_t n = 1;
  for (uint32_t c : cnt) n *= uint64_t{c} + 1;
  return n;
}

void Tile::reset() {
  narrow.zero();
  wide.zero();
  bias_store.zero();
  nlu = NluTable{};
  counters.fill(0);
  stats = TileStats{};
  fifo_rows.clear();
  staging.clear();
}

void OpEnv::fail_op(const std::string& what) const {
  fail("tile ", tile_.index, ": op 0x", std::hex, int{op_.opcode}, std::dec, " at word ",
       op_.word_offset, ": ", what);
}

const uint8_t* OpEnv::narrow_read(int64_t address, uint32_t length) {
  if (address < 0 || address + length > kNarrowBytes)
    fail_op(cat("narrow read ", address, "+", length, " outside ", kNarrowBytes, " bytes"));
  tile_.stats.narrow_bytes_read += length;
  return tile_.narrow.data() + address;
}

uint8_t* OpEnv::narrow_write(int64_t address, uint32_t length) {
  if (address < 0 || address + length > kNarrowBytes)
    fail_op(cat("narrow write ", address, "+", length, " outside ", kNarrowBytes, " bytes"));
  tile_.stats.narrow_bytes_written += length;
  return tile_.narrow.data() + address;
}

const uint8_t* OpEnv::wide_read(int64_t unit, uint32_t length) {
  const int64_t byte = unit * kWideUnitBytes;
  if (unit < 0 || byte + length > kWideBytes)
    fail_op(
        cat("wide read at unit ", unit, " (+", length, " bytes) outside ", kWideUnits, " units"));
  tile_.stats.wide_bytes_read += length;
  return tile_.wide.data() + byte;
}

uint8_t* OpEnv::wide_write(int64_t unit, uint32_t length) {
  const int64_t byte = unit * kWideUnitBytes;
  if (unit < 0 || byte + length > kWideBytes)
    fail_op(
        cat("wide write at unit ", unit, " (+", length, " bytes) outside ", kWideUnits, " units"));
  tile_.stats.wide_bytes_written += length;
  // An op's partial-sum row (the softmax shift constant's -m) supersedes fills still queued in
  // that row: the Keras LSTM's softmax writes it into row 0x2068, where its time loop's feeds
  // leave a fill, and the bias load after it (word 3378, two visits) must read the sums.
  if (unit % 4 == 0 && length == kWideRowBytes)
    if (FifoRow* r = tile_.fifo_rows.find(static_cast<uint32_t>(unit / 4)))
      while (!r->fills.empty()) {
        r->fills.pop_front();
        ++r->consumed;
      }
  return tile_.wide.data() + byte;
}

[[noreturn]] void OpEnv::fail_fifo_row(uint32_t fill, int64_t unit) const {
  if (unit < 0 || unit % 4 != 0 || unit >= kWideUnits)
    fail_op(
        cat("FIFO row at unit ", unit, " is not a wide row start inside ", kWideUnits, " units"));
  fail_op(cat("FIFO row at unit ", unit, ": fill ", fill, " was never written"));
}

uint8_t* OpEnv::bias_store(int64_t address, uint32_t length) {
  if (address < 0 || address + length > kBiasStoreBytes)
    fail_op(
        cat("bias store access ", address, "+", length, " outside ", kBiasStoreBytes, " bytes"));
  return tile_.bias_store.data() + address;
}

}  // namespace tinycoral::chip
