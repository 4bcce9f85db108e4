// One tile of the virtual Edge TPU (isa.md 1.7, 3.1): its memories, bias store and non-linear unit,
// plus the contract between the scheduler (src/chip/, owner "chip") and the op-unit arithmetic
// (src/chip/ops/, owner "chip-ops").
//
// THE OP CONTRACT (read this, chip-ops):
//  * The scheduler pre-decodes every 0x01/0x02/0x03 instruction once into an `OpInstr` (below):
//    main loops, the four op-style TTUs with real byte/unit increments (isa.md 2.0a), the class and
//    datapath fields. Anything not pre-decoded is still reachable through `OpInstr::source`
//    (`source->value("field")`, names from src/isa/opcodes.cpp).
//  * Classification: the scheduler calls `ops::classify(op)` (declared below, defined by chip-ops
//  in
//    src/chip/ops/). It returns the matching `OpClass` from chip-ops' table keyed by (opcode,
//    dp_mode, cfg0, cfg1, cfg2, cfg3, reduce_mask, nlu_mode, ...) or nullptr. nullptr stops the run
//    with an error naming the word offset, opcode and class fields: never compute something made
//    up.
//  * Execution: `OpClass::run(op, env)` is an ordinary function that executes the WHOLE instruction
//    at once. The scheduler calls it only when the op's inputs are ready, so it never blocks:
//      - narrow memory and non-FIFO wide memory: program-order hazards. The scheduler computes the
//        op's footprint from the TTU extents (in/out narrow, par/psum wide) and runs the op only
//        when every earlier instruction on this tile that writes what it reads (or reads/writes
//        what it writes) has completed.
//      - streamed wide FIFOs (weights filled by ringConsumer1 / narrowToWide while the op runs):
//      the
//        class declares how many FIFO fills the op consumes (`OpClass::par_fifo_fills`); the
//        scheduler waits until that many fills were written, and `env.par_fifo_row(fill, row)`
//        returns the bytes of a given fill. (FIFOs are elastic in the simulator: writers never
//        block on them.)
//  * Every memory access goes through `OpEnv`, which bounds-checks and throws tinycoral::Error
//    ("tile 3: op at word 812: narrow read 196600+16 beyond 196608 bytes"). Never index raw vectors
//    with unchecked TTU addresses: programs may be fuzzed.
//  * Count MACs in `env.stats().macs` (statistics only).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/error.h"

namespace tinycoral::isa {
struct Instruction;
}

namespace tinycoral::chip {

constexpr uint32_t kTileCount = 16;        // 4x4 mesh, tile t at row t/4, column t%4
constexpr uint32_t kNarrowBytes = 196608;  // 192 KiB per tile (isa.md 3.1)
constexpr uint32_t kWideUnitBytes = 64;    // wide addresses count 64-byte units
constexpr uint32_t kWideRowBytes = 256;    // one wide row = 4 units = 64 columns x 4 bytes
constexpr uint32_t kWideUnits = 16384;     // the full 14-bit unit address space, no aliasing
constexpr uint32_t kWideBytes = kWideUnits * kWideUnitBytes;  // 1 MiB (programs use up to 520 KiB)
constexpr uint32_t kWideRows = kWideBytes / kWideRowBytes;
// Bias / "scaling" store: size unknown (isa.md 3.1); generous, bounds-checked. A mode-2
// wideToNarrow writes byte 4*w for narrow word address w (so the compiler's 0x40 lands at byte
// 256).
constexpr uint32_t kBiasStoreBytes = 65536;
// The bias plane starts at narrow word 0x40 (per-tensor and per-channel loads); words below it
// hold per-channel multipliers, which the simulator keeps in its own region from kMultStoreBase so
// that neither plane's groups, packed in arrival order, run into the other (docs/chip_ops.md).
constexpr int64_t kBiasPlaneWord = 0x40;
constexpr int64_t kMultStoreBase = 0x8000;

// An op-style address generator (isa.md 2.0a), decoded to real increments:
// inc[k] = 4*inc_k + low2_k (low2_0 = hmode, low2_k = mode_{k-1}). Units: bytes for `in`/`out`,
// 64-byte units for `par`/`psum`.
struct OpTtu {
  int64_t base = 0;
  std::array<int64_t, 8> inc{};
  std::array<uint32_t, 8> cnt{};  // iterations - 1
  uint8_t mode7 = 0;              // the separate flag in mode slot 7
  uint32_t tflags = 0;            // in_tflags / out_tflags / par_tflags / psum_tflags

  // Logical strides S_k (addr = base + sum c_k S_k), from the rewinding increments.
  std::array<int64_t, 8> strides() const;
  std::array<int64_t, 8> compute_strides() const;  // the same, without the per-thread memo
  // Lowest and highest address the walk touches (analytic, O(8)).
  int64_t min_address() const;
  int64_t max_address() const;
  // Both at once (one strides() computation).
  struct Extent {
    int64_t lo = 0, hi = 0;
  };
  Extent extent() const;
  uint64_t steps() const;  // product of (cnt_k + 1)
};

// Steps through an OpTtu exactly as the hardware iterates (isa.md 2.0a): start at base; each step
// increments the innermost counter that has not reached its count, zeroes the inner ones and adds
// that dimension's increment.
class TtuWalker {
 public:
  // Levels with one iteration never advance (their counter stays 0), so only the others are
  // visited: the same walk, without scanning and re-zeroing idle levels on every step.
  explicit TtuWalker(const OpTtu& ttu) : ttu_(ttu), address_(ttu.base) {
    for (int d = 0; d < 8; ++d)
      if (ttu.cnt[d] != 0) levels_[levels_count_++] = static_cast<uint8_t>(d);
  }
  int64_t address() const { return address_; }
  // Advances one step; returns false (and stays) after the last address.
  bool next() {
    if (levels_count_ > 0 && counter_[levels_[0]] < ttu_.cnt[levels_[0]]) {  // most steps
      ++counter_[levels_[0]];
      address_ += ttu_.inc[levels_[0]];
      return true;
    }
    for (int i = 1; i < levels_count_; ++i) {
      const int d = levels_[i];
      if (counter_[d] < ttu_.cnt[d]) {
        ++counter_[d];
        for (int j = 0; j < i; ++j) counter_[levels_[j]] = 0;
        address_ += ttu_.inc[d];
        return true;
      }
    }
    return false;
  }
  // Calls f(i, address) for the next n steps (i = 0..n-1), then advances past them: the same as n
  // rounds of address() and next(). Whole blocks of the innermost levels (a depthwise tap window,
  // or every position of a batch) run as nested loops of constant increments.
  template <typename F>
  void walk(uint64_t n, F&& f) {
    uint64_t i = 0;
    while (i < n) {
      if (levels_count_ == 0) {
        f(i++, address_);
        next();
        continue;
      }
      // The most innermost levels that are all at their start and fit in what is left.
      int depth = 0;
      uint64_t size = 1;
      while (depth < levels_count_ && counter_[levels_[depth]] == 0) {
        const uint64_t bigger = size * (uint64_t{ttu_.cnt[levels_[depth]]} + 1);
        if (bigger > n - i) break;
        size = bigger;
        ++depth;
      }
      if (depth > 0) {
        address_ = block(depth, address_, i, f);
        for (int k = 0; k < depth; ++k) counter_[levels_[k]] = ttu_.cnt[levels_[k]];
        next();
        continue;
      }
      // Part of the innermost level.
      const int d = levels_[0];
      const int64_t inc = ttu_.inc[d];
      const uint64_t run = std::min<uint64_t>(n - i, uint64_t{ttu_.cnt[d]} - counter_[d] + 1);
      int64_t at = address_;
      for (uint64_t j = 0; j < run; ++j, at += inc) f(i + j, at);
      // All but the last step of the run stay in the innermost level; next() takes the last.
      counter_[d] += static_cast<uint32_t>(run - 1);
      address_ = at - inc;
      next();
      i += run;
    }
  }
  // Advances n steps without visiting them (stays at the last address at the end of the walk, like
  // next()): counters by mixed-radix addition, the address as base + sum c_k S_k (isa.md 2.0a).
  // Exact for walks whose strides do not saturate (every walk within memory bounds).
  void skip(uint64_t n) {
    if (n == 0 || levels_count_ == 0) return;
    uint64_t carry = n;
    bool past_end = false;
    for (int i = 0; i < levels_count_ && carry > 0; ++i) {
      const int d = levels_[i];
      const uint64_t radix = uint64_t{ttu_.cnt[d]} + 1;
      const uint64_t sum = counter_[d] + carry % radix;
      carry = carry / radix + sum / radix;
      counter_[d] = static_cast<uint32_t>(sum % radix);
    }
    past_end = carry > 0;
    if (past_end)  // stay at the last step
      for (int i = 0; i < levels_count_; ++i) counter_[levels_[i]] = ttu_.cnt[levels_[i]];
    if (!strides_known_) {
      strides_ = ttu_.strides();
      strides_known_ = true;
    }
    const auto& strides = strides_;
    address_ = ttu_.base;
    for (int i = 0; i < levels_count_; ++i)
      address_ += static_cast<int64_t>(counter_[levels_[i]]) * strides[levels_[i]];
  }
  // The addresses of the next n steps into out[0..n), then advances past them.
  void take(int64_t* out, uint64_t n) {
    walk(n, [out](uint64_t i, int64_t at) { out[i] = at; });
  }
  uint32_t counter(int d) const { return counter_[d]; }

 private:
  // Walks levels_[0..depth) through all their iterations from `at` (steps i onwards); returns the
  // address of the last step. Between iterations of a level its increment applies, which rewinds
  // the levels inside it (isa.md 2.0a).
  template <typename F>
  int64_t block(int depth, int64_t at, uint64_t& i, F& f) const {
    const int d = levels_[depth - 1];
    const uint32_t last = ttu_.cnt[d];
    const int64_t inc = ttu_.inc[d];
    // The step index lives in a local while it counts (through the reference every f call would
    // load and store it).
    if (depth == 1) {
      uint64_t n = i;
      for (uint32_t j = 0; j < last; ++j, at += inc) f(n++, at);
      f(n++, at);
      i = n;
      return at;
    }
    if (depth == 2) {  // the common tap window, without calls
      const int e = levels_[0];
      const uint32_t inner_last = ttu_.cnt[e];
      const int64_t inner_inc = ttu_.inc[e];
      uint64_t n = i;
      for (uint32_t j = 0;; ++j) {
        for (uint32_t k = 0; k < inner_last; ++k, at += inner_inc) f(n++, at);
        f(n++, at);
        if (j == last) {
          i = n;
          return at;
        }
        at += inc;
      }
    }
    for (uint32_t j = 0;; ++j) {
      at = block(depth - 1, at, i, f);
      if (j == last) return at;
      at += inc;
    }
  }

  const OpTtu& ttu_;
  int64_t address_;
  std::array<uint32_t, 8> counter_{};
  std::array<uint8_t, 8> levels_{};   // levels with more than one iteration, innermost first
  std::array<int64_t, 8> strides_{};  // the walk's strides, once skip() needed them
  bool strides_known_ = false;
  int levels_count_ = 0;
};

// A pre-decoded 0x01 / 0x02 / 0x03 instruction (field positions: isa.md 2.1.1).
struct OpInstr {
  const isa::Instruction* source = nullptr;  // the full instruction, for fields not listed here
  uint32_t word_offset = 0;
  uint8_t opcode = 0;
  uint16_t tile_mask = 0;
  std::array<uint32_t, 8> loops{};  // main loop nest, iterations - 1, innermost first
  OpTtu in, out, par, psum;
  // Records of a partial last round / group (isa.md 2.1.3), raw.
  uint32_t rsv174 = 0;  // partial last round of loop0
  uint32_t out_last_cnt = 0, out_last_mode = 0, out_last_skip = 0;
  uint32_t par_fifo = 0;  // rows of the weight FIFO (bit 13 = partial last round)
  uint32_t in_sync =
      0;  // `in.sync`: non-zero when `in` streams from a staging a wideToNarrow fills
  uint32_t cfg0 = 0, cfg1 = 0, cfg2 = 0, cfg3 = 0, cfg4 = 0;
  std::array<uint16_t, 5> sync{};  // sync0..sync4 (diagnostics)
  uint8_t dp_mode = 0;
  uint8_t reduce_mask = 0;
  uint8_t out_ch = 0, out_ch_last = 0;  // channels per output group - 1
  uint8_t nlu_mode = 0;                 // bits 1946-1948
  uint8_t w_zp = 0, in_zp = 0, out_zp = 0;
  float mult = 0, clamp_max = 0, clamp_min = 0;
  int32_t offset = 0;
  // Per-channel requantization (cfg3 8, docs/chip_ops.md): the wide unit of the row holding each
  // column's int32 weight zero point, and whether the multipliers come from the bias store.
  uint32_t pc_zp_unit = 0;
  bool pc_mult = false;
};

// The non-linear unit's spline table, loaded by 0x19 (isa.md 2.4).
struct NluTable {
  std::array<float, 40> coefficients{};  // c[segment][power], segment = k / 5
  std::array<float, 7> breakpoints{};
  uint32_t mode = 0;
  bool loaded = false;
};

struct TileStats {
  uint64_t macs = 0;
  uint64_t narrow_bytes_read = 0, narrow_bytes_written = 0;
  uint64_t wide_bytes_read = 0, wide_bytes_written = 0;
};

// Streamed wide FIFO rows: fills that arrived for a FIFO row beyond the one currently in wide
// memory (elastic FIFO, see the contract above). Keyed by 256-byte row index.
// The fills queued on one FIFO row, oldest first: a buffer with a moving head instead of a deque,
// so that a row refilled thousands of times per inference reuses its storage (a deque allocates a
// block per two rows), and whose rows are not zeroed before being written (a vector's are).
//
// Prefix fills: a depthwise stream writes 16-byte entries, each a new fill equal to the row's
// latest with its first 16 bytes replaced, hundreds per row and instruction. Stored whole, every
// entry would cost a 256-byte copy into memory that no longer fits the cache. Instead a queue
// started empty may keep such fills as their prefixes over one shared rest (`start_prefixes`,
// `push_prefix`); `row(i)` puts fill i together when it is read. Any other push first turns the
// prefixes back into whole rows, so the contents never depend on the representation.
class FillQueue {
 public:
  using Row = std::array<uint8_t, kWideRowBytes>;
  FillQueue() = default;
  FillQueue(const FillQueue& o) { *this = o; }
  FillQueue& operator=(const FillQueue& o) {
    if (this == &o) return *this;
    head_ = tail_ = 0;
    prefix_ = 0;
    capacity_ = o.size();
    rows_ = capacity_ ? std::make_unique_for_overwrite<Row[]>(capacity_) : nullptr;
    for (size_t i = 0; i < o.size(); ++i)
      std::memcpy(rows_[tail_++].data(), o.row(i), kWideRowBytes);
    return *this;
  }
  FillQueue(FillQueue&&) = default;
  FillQueue& operator=(FillQueue&&) = default;

  // Queues a copy of the kWideRowBytes bytes at `bytes`.
  void push_back(const uint8_t* bytes) { std::memcpy(push_uninitialized(), bytes, kWideRowBytes); }
  void push_back(const Row& row) { push_back(row.data()); }
  // Queues a whole row whose bytes the caller writes next (pointers from row() may move).
  uint8_t* push_uninitialized() {
    if (prefix_) expand();
    if (tail_ == capacity_) make_room();
    return rows_[tail_++].data();
  }

  // Whether the queue holds prefix fills of `length` bytes (then a push_prefix of that length
  // queues its latest fill with the first `length` bytes replaced).
  bool holds_prefixes(size_t length) const { return prefix_ == length && !empty(); }
  // An empty queue starts keeping fills as `length`-byte prefixes over `base`'s other bytes.
  void start_prefixes(size_t length, const uint8_t* base) {
    if (!empty() || length == 0 || length >= kWideRowBytes)
      fail("FillQueue: prefix fills need an empty queue and 0 < length < ", kWideRowBytes);
    prefix_ = length;
    if (!scratch_) scratch_ = std::make_unique_for_overwrite<Row>();  // only rows that use it
    std::memcpy(scratch_->data(), base, kWideRowBytes);
    scratch_index_ = SIZE_MAX;
  }
  // Queues base (start_prefixes) with its first `length` bytes taken from `bytes`.
  void push_prefix(const uint8_t* bytes) {
    if ((tail_ + 1) * prefix_ > prefixes_.size())
      prefixes_.resize(std::max<size_t>(64 * prefix_, 2 * (tail_ + 1) * prefix_));
    copy_prefix(prefixes_.data() + tail_ * prefix_, bytes);
    ++tail_;
  }

  // Fill i (0 = oldest) as a whole row. Valid until the next push, pop or row() of this queue:
  // a prefix fill is put together in one scratch row (an op reads one fill of a row at a time).
  const uint8_t* row(size_t i) const {
    if (!prefix_) return rows_[head_ + i].data();
    if (scratch_index_ != head_ + i) {
      copy_prefix(scratch_->data(), prefixes_.data() + (head_ + i) * prefix_);
      scratch_index_ = head_ + i;
    }
    return scratch_->data();
  }
  const uint8_t* front() const { return row(0); }
  const uint8_t* back() const { return row(size() - 1); }
  void pop_front() {
    if (++head_ == tail_) clear();
  }
  size_t size() const { return tail_ - head_; }
  bool empty() const { return head_ == tail_; }
  void clear() {  // keeps the storage for the next program
    head_ = tail_ = 0;
    prefix_ = 0;
    scratch_index_ = SIZE_MAX;
  }

 private:
  // A depthwise entry's 16 bytes as one fixed-size copy (a variable-length memcpy is a call).
  void copy_prefix(uint8_t* to, const uint8_t* from) const {
    if (prefix_ == 16)
      std::memcpy(to, from, 16);
    else
      std::memcpy(to, from, prefix_);
  }
  // Full: reclaim the consumed front when it is at least half the storage (amortised O(1)), else
  // grow. Rows are not zeroed first (every row is written right after).
  void make_room() {
    if (head_ > 0 && 2 * head_ >= tail_) {
      std::memmove(rows_.get(), rows_.get() + head_, (tail_ - head_) * sizeof(Row));
      tail_ -= head_;
      head_ = 0;
      return;
    }
    const size_t capacity = std::max<size_t>(4, 2 * capacity_);
    auto rows = std::make_unique_for_overwrite<Row[]>(capacity);
    if (tail_ > head_) std::memcpy(rows.get(), rows_.get() + head_, (tail_ - head_) * sizeof(Row));
    tail_ -= head_;
    head_ = 0;
    rows_ = std::move(rows);
    capacity_ = capacity;
  }
  // Prefix fills back to whole rows (the whole-row storage is unused while prefixes are kept).
  void expand() {
    const size_t count = size(), first = head_, length = prefix_;
    if (capacity_ < count) {
      capacity_ = std::max<size_t>(4, count);
      rows_ = std::make_unique_for_overwrite<Row[]>(capacity_);
    }
    for (size_t k = 0; k < count; ++k) {
      std::memcpy(rows_[k].data(), scratch_->data(), kWideRowBytes);
      std::memcpy(rows_[k].data(), prefixes_.data() + (first + k) * length, length);
    }
    head_ = 0;
    tail_ = count;
    prefix_ = 0;
  }
  std::unique_ptr<Row[]> rows_;
  size_t head_ = 0, tail_ = 0, capacity_ = 0;
  size_t prefix_ = 0;              // bytes per prefix fill; 0: whole rows
  std::vector<uint8_t> prefixes_;  // prefix fills, prefix_ bytes each, indexed like rows_
  std::unique_ptr<Row> scratch_;   // the shared rest; bytes [0, prefix_) of fill scratch_index_
  mutable size_t scratch_index_ = SIZE_MAX;
};

struct FifoRow {
  FillQueue fills;
  uint64_t written = 0;   // fills written into this row during the current program
  uint64_t consumed = 0;  // fills consumed
};

// A tile's FIFO rows by 256-byte row index: a flat table (ring consumers look a row up for every
// packet, too often for a hash map), remembering the rows in use so that clearing stays cheap.
class FifoRows {
 public:
  FifoRow& operator[](uint32_t row) {
    if (row >= kWideRows) fail("FIFO row ", row, " beyond the ", kWideRows, " wide rows");
    if (rows_.empty()) {
      rows_.resize(kWideRows);
      in_use_.resize(kWideRows);
    }
    if (!in_use_[row]) {
      in_use_[row] = 1;
      used_.push_back(row);
    }
    return rows_[row];
  }
  // The row, or nullptr when it was never used.
  FifoRow* find(uint32_t row) { return row < rows_.size() && in_use_[row] ? &rows_[row] : nullptr; }
  const FifoRow* find(uint32_t row) const {
    return row < rows_.size() && in_use_[row] ? &rows_[row] : nullptr;
  }
  void clear() {
    for (uint32_t row : used_) {  // the fill storage stays for the next program's fills
      rows_[row].fills.clear();
      rows_[row].written = rows_[row].consumed = 0;
      in_use_[row] = 0;
    }
    used_.clear();
  }

 private:
  std::vector<FifoRow> rows_;
  std::vector<uint8_t> in_use_;
  std::vector<uint32_t> used_;
};

// Tile memory that starts zeroed without being written: calloc takes large blocks from pages the
// kernel zeroes on first touch, so a tile's 1 MiB of wide memory costs nothing until a program
// uses it (16 tiles wrote 19 MiB of zeros before the first instruction, most of a run's set-up).
class ZeroedBytes {
 public:
  explicit ZeroedBytes(size_t size) : size_(size), data_(allocate(size)) {}
  ZeroedBytes(const ZeroedBytes& o) : size_(o.size_), data_(allocate(o.size_)) {
    std::memcpy(data_, o.data_, size_);
  }
  ZeroedBytes& operator=(const ZeroedBytes& o) {
    if (this != &o) {
      ZeroedBytes copy(o);
      std::swap(size_, copy.size_);
      std::swap(data_, copy.data_);
    }
    return *this;
  }
  ~ZeroedBytes() { std::free(data_); }

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint8_t* begin() { return data_; }
  uint8_t* end() { return data_ + size_; }
  const uint8_t* begin() const { return data_; }
  const uint8_t* end() const { return data_ + size_; }
  uint8_t& operator[](size_t i) { return data_[i]; }
  const uint8_t& operator[](size_t i) const { return data_[i]; }
  uint8_t& at(size_t i) {
    if (i >= size_) fail("tile memory index ", i, " beyond ", size_, " bytes");
    return data_[i];
  }
  // All zero again, without writing the pages (fresh ones from calloc).
  void zero() {
    uint8_t* fresh = allocate(size_);
    std::free(data_);
    data_ = fresh;
  }

 private:
  static uint8_t* allocate(size_t size) {
    auto* p = static_cast<uint8_t*>(std::calloc(size, 1));
    if (!p) throw std::bad_alloc();
    return p;
  }
  size_t size_;
  uint8_t* data_;
};

// (tests/chip/engine_reference_test.cpp's copy_into copies a Tile member by member: a new
// member goes there too.)
struct Tile {
  uint32_t index = 0;
  ZeroedBytes narrow{kNarrowBytes};
  ZeroedBytes wide{kWideBytes};
  ZeroedBytes bias_store{kBiasStoreBytes};  // "scaling" store (isa.md 2.5)
  NluTable nlu;
  std::array<int32_t, 19>
      counters{};  // tile sync counters: recorded for diagnostics, never waited on
  TileStats stats;
  FifoRows fifo_rows;
  // Chunks a circular-streaming wideToNarrow wrote into its narrow staging (keyed by the staging's
  // word address), in order: the chip's op and wideToNarrow hand the staging over chunk by chunk,
  // which instructions running as a whole can only replay from this history (docs/chip.md).
  std::unordered_map<uint32_t, std::vector<std::vector<uint8_t>>> staging;

  void reset();
};

// What an op implementation sees: bounds-checked memory of its tile and statistics.
class OpEnv {
 public:
  OpEnv(Tile& tile, const OpInstr& op) : tile_(tile), op_(op) {}
  Tile& tile() { return tile_; }
  TileStats& stats() { return tile_.stats; }

  // Narrow memory (byte addresses). Throw Error when [address, address+length) leaves the tile.
  const uint8_t* narrow_read(int64_t address, uint32_t length);
  uint8_t* narrow_write(int64_t address, uint32_t length);
  // Wide memory by 64-byte unit address; `length` bytes from the unit's first byte.
  const uint8_t* wide_read(int64_t unit, uint32_t length);
  uint8_t* wide_write(int64_t unit, uint32_t length);
  // Byte `lane` (0..3) of every 4-byte column of a wide row would be: wide_read(unit_of_row)[4*c +
  // lane]. Streamed FIFO access: the bytes of fill number `fill` (0-based, counted within this op)
  // of the FIFO row starting at `unit` (must be a multiple of 4). Throws if that fill does not
  // exist.
  const uint8_t* par_fifo_row(uint32_t fill, int64_t unit) {  // inline: once per row and fill
    const FifoRow* r = unit >= 0 && unit % 4 == 0 && unit < kWideUnits
                           ? tile_.fifo_rows.find(static_cast<uint32_t>(unit / 4))
                           : nullptr;
    if (!r || fill >= r->fills.size()) fail_fifo_row(fill, unit);
    tile_.stats.wide_bytes_read += kWideRowBytes;
    return r->fills.row(fill);
  }
  uint8_t* bias_store(int64_t address, uint32_t length);
  const NluTable& nlu() const { return tile_.nlu; }

  // Error with the op's location: "tile 3: op 0x01 at word 812: <what>".
  [[noreturn]] void fail_op(const std::string& what) const;
  [[noreturn]] void fail_fifo_row(uint32_t fill, int64_t unit) const;

 private:
  Tile& tile_;
  const OpInstr& op_;
};

// One operation class: chip-ops' table entry.
struct OpClass {
  const char* name = "";  // e.g. "FULLY_CONNECTED", "conv K-chunked", "word copy"
  void (*run)(const OpInstr& op, OpEnv& env) = nullptr;
  // Number of streamed FIFO fills of the `par` TTU the op consumes (0 or nullptr = parameters are
  // resident; no FIFO wait).
  uint32_t (*par_fifo_fills)(const OpInstr& op) = nullptr;
  // Whether the op writes and reads partial sums in its `psum` rows (nullptr = never).
  bool (*keeps_partial_sums)(const OpInstr& op) = nullptr;
};

// Decodes an opcode 0x01/0x02/0x03 instruction into an OpInstr (src/chip/op_decode.cpp).
OpInstr decode_op(const isa::Instruction& instruction);
// Short description of an op's class fields for error messages and traces:
// "opcode 0x01 dp_mode 4 cfg0 0x127 cfg1 0x0 cfg2 0xe cfg3 6 reduce_mask 0b11 nlu 0".
std::string describe_op_class(const OpInstr& op);

namespace ops {
// The main loops of an op's nest (OpInstr::loops).
constexpr int kLoops = 8;
// Defined by chip-ops (src/chip/ops/): the class of an op, or nullptr when unknown.
const OpClass* classify(const OpInstr& op);
}  // namespace ops

}  // namespace tinycoral::chip
