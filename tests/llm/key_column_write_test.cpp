// The step a key written by the chip itself needs (docs/llm.md "The key written by the chip"): in
// the scores' weight layout a position's key is one column, one word in each of the group's K / 4
// wide rows, and a narrowToWide writes rows from their start. So the tile reads the group's rows
// into narrow memory (a wideToNarrow), scatters the key's words into the column there (a
// wideToNarrow whose narrow walk steps a row's 64 words), and writes the rows back (a
// narrowToWide). On the virtual Edge TPU every byte of the 16 rows must be the old weights with
// that column replaced; a walk one word off moves the key to the wrong column. The value cache's
// write (compiler/fc_value_write.h) rests on the transposing narrowToWide, checked alone below.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {
namespace {

constexpr int kTile = 5;
constexpr int kRows = 16;           // K = 64: 4 key bytes per row
constexpr int kWeightUnit = 0x100;  // the group's first weight row (64-byte units)
constexpr int kScratchUnit = 0x1800;
constexpr int kCopy = 0x1000;  // narrow byte of the rows' copy
constexpr int kKey = 0;        // narrow byte of the new key
constexpr int kInputFifo = 0x1e00;
constexpr int kMove = 1024;  // bytes per wideToNarrow / consumer / infeed of the host's input

// The host's input from byte `offset` into narrow memory: (narrow byte, bytes) pieces in turn.
void load(Emitter& e, int offset, const std::vector<std::pair<int, int>>& pieces) {
  int move = 0;
  for (const auto& [at, bytes] : pieces)
    for (int done = 0; done < bytes; done += kMove, ++move) {
      if (move > 0 && move % 8 == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const int n = std::min(kMove, bytes - done);
      host_to_narrow(e, tile_bit(kTile), kInputFifo + 16 * (move % 8), at + done, n, offset / 8);
      offset += n;
    }
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

void n2w(Emitter& e, int narrow_byte, int words, int unit, int rows) {
  e.add("n2w", cat("tiles=", hex(tile_bit(kTile)), " n.addr=", hex(narrow_byte / 4),
                   " n=", narrow_walk(words), " n.lvl_mask=0x01 w.addr=", hex(unit), " w=(1 x ",
                   rows, ")"));
}

void w2n(Emitter& e, int unit, int rows, int narrow_word, const std::string& walk) {
  e.add("w2n", cat("tiles=", hex(tile_bit(kTile)), " w.addr=", hex(unit), " w=(1 x ", rows,
                   ") n.addr=", hex(narrow_word), " n=", walk, " n.lvl_mask=0x01"));
}

// Runs the write of `key` into column `column` of rows holding `weights`; returns the rows.
std::vector<uint8_t> write_column(const std::vector<uint8_t>& weights,
                                  const std::vector<uint8_t>& key, int column, int stride) {
  const int row_words = 64, bytes = kRows * 256;
  Emitter e;
  input_address(e, "x");
  host_pop(e, 2 * bytes + 64);
  // The rows as a caching run leaves them, then other bytes over the narrow copy's place.
  load(e, 0, {{kCopy, bytes}});
  n2w(e, kCopy, kRows * row_words, kWeightUnit, kRows);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  load(e, bytes, {{kCopy, bytes}, {kKey, 64}});
  // The write: rows to narrow, the key's words into the column, rows back.
  w2n(e, kWeightUnit, kRows, kCopy / 4, narrow_walk(kRows * row_words));
  n2w(e, kKey, kRows, kScratchUnit, 1);
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  w2n(e, kScratchUnit, 1, kCopy / 4 + column, strided_walk({{stride, kRows}}, 6));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  n2w(e, kCopy, kRows * row_words, kWeightUnit, kRows);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);

  std::vector<uint8_t> input = weights;
  std::mt19937 random(7);
  for (int i = 0; i < bytes; ++i) input.push_back(static_cast<uint8_t>(random()));
  input.insert(input.end(), key.begin(), key.end());
  chip::VirtualEdgeTpu chip;
  chip.receive(chip::DmaTag::kInstructions, e.finish().data);
  EXPECT_EQ(chip.advance(), chip::RunState::kWaiting) << chip.fault();
  chip.receive(chip::DmaTag::kInput, input);
  EXPECT_EQ(chip.advance(), chip::RunState::kIdle) << chip.fault();
  const auto& wide = chip.tile(kTile).wide;
  return {wide.begin() + 64 * kWeightUnit, wide.begin() + 64 * kWeightUnit + bytes};
}

TEST(KeyColumnWrite, TheChipWritesAKeyIntoItsColumnOfTheScoresWeightRows) {
  std::mt19937 random(3);
  std::vector<uint8_t> weights(kRows * 256), key(64);
  for (uint8_t& b : weights) b = static_cast<uint8_t>(random());
  for (uint8_t& b : key) b = static_cast<uint8_t>(random());
  for (const int column : {0, 37, 63}) {
    SCOPED_TRACE(cat("column ", column));
    // The rows with key word `row` written at word `column - slope * row` of each row.
    auto with_key = [&](int slope) {
      std::vector<uint8_t> rows = weights;
      for (int row = 0; row < kRows; ++row)
        for (int b = 0; b < 4; ++b)
          rows[size_t(256 * row + 4 * (column - slope * row) + b)] = key[size_t(4 * row + b)];
      return rows;
    };
    const std::vector<uint8_t> want = with_key(0);
    const std::vector<uint8_t> got = write_column(weights, key, column, 64);
    int wrong = 0;
    for (size_t i = 0; i < want.size(); ++i)
      if (got[i] != want[i] && ++wrong <= 3)
        ADD_FAILURE() << "row " << i / 256 << " byte " << i % 256 << ": " << int{got[i]}
                      << ", expected " << int{want[i]};
    EXPECT_EQ(wrong, 0);
    // A walk one word short of a row per step puts the key on a diagonal instead: row r's word
    // at column - r, every other byte the old weights.
    if (column == 37) {
      const std::vector<uint8_t> diagonal = write_column(weights, key, column, 63);
      EXPECT_NE(diagonal, want);
      EXPECT_EQ(diagonal, with_key(1));
    }
  }
}

// The value cache's row from 4 position vectors (fc_value_write.h): a transposing narrowToWide
// whose narrow walk takes channel word c of the 4 positions innermost writes, into byte b of word
// c of the row, channel c of position b (the layout the weighted sum's FC reads: word = channel,
// byte = position). The vectors need only be evenly spaced: here 24 words apart. The same walk
// without the transposing bit writes the gathered words as they are.
std::vector<uint8_t> write_quad(const std::vector<uint8_t>& vectors, bool transposing) {
  constexpr int kSpacing = 24, kQuad = 0x800;  // words between the vectors; their narrow byte
  Emitter e;
  input_address(e, "x");
  host_pop(e, int64_t(vectors.size()));
  load(e, 0, {{kQuad, int(vectors.size())}});
  e.add("n2w", cat("tiles=", hex(tile_bit(kTile)), " n.addr=", hex(kQuad / 4),
                   " n=", strided_walk({{kSpacing, 4}, {1, 16}}, 6), " n.lvl_mask=0x03 w.addr=",
                   hex(kScratchUnit), " w=(1 x 1)", transposing ? " transpose=1" : ""));
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  chip::VirtualEdgeTpu chip;
  chip.receive(chip::DmaTag::kInstructions, e.finish().data);
  EXPECT_EQ(chip.advance(), chip::RunState::kWaiting) << chip.fault();
  chip.receive(chip::DmaTag::kInput, vectors);
  EXPECT_EQ(chip.advance(), chip::RunState::kIdle) << chip.fault();
  const auto& wide = chip.tile(kTile).wide;
  return {wide.begin() + 64 * kScratchUnit, wide.begin() + 64 * kScratchUnit + 256};
}

TEST(TransposingNarrowToWide, PutsEachChannelsFourPositionsInItsWordsBytes) {
  std::mt19937 random(5);
  // Position b's 64 channels at byte 96 b (24 words apart), other bytes between them.
  std::vector<uint8_t> vectors(4 * 96);
  for (uint8_t& b : vectors) b = static_cast<uint8_t>(random());
  std::vector<uint8_t> want(256), gathered(256);
  for (int c = 0; c < 16; ++c)
    for (int b = 0; b < 4; ++b)
      for (int j = 0; j < 4; ++j) {
        const uint8_t byte = vectors[size_t(96 * b + 4 * c + j)];  // channel 4c + j of position b
        want[size_t(4 * (4 * c + j) + b)] = byte;
        gathered[size_t(16 * c + 4 * b + j)] = byte;
      }
  EXPECT_EQ(write_quad(vectors, true), want);
  const std::vector<uint8_t> plain = write_quad(vectors, false);
  EXPECT_NE(plain, want);
  EXPECT_EQ(plain, gathered);
}

}  // namespace
}  // namespace tinycoral::compiler
