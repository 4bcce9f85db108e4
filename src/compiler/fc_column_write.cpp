#include "compiler/fc_column_write.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/error.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {
namespace {

constexpr int kColumnRowWords = 64;  // 4-byte words in one 256-byte wide row

// Narrow byte of each group's copy: the groups of one tile side by side from byte 0.
std::vector<int> column_copies_at(const FcColumnWrite& w) {
  std::map<int, int> on_tile;
  std::vector<int> at;
  for (const FcParameterRow& r : w.words.rows)
    at.push_back(w.narrow_at + on_tile[r.tile]++ * w.rows * 256);
  return at;
}

std::string column_tiles(int tile) { return cat("tiles=", hex(tile_bit(tile))); }

}  // namespace

FcColumnWrite fc_column_write(const FcLayer& layer, const FcPlacement& placement, int column) {
  if (column < 0 || column >= kColumnRowWords) fail("column ", column, " of a 64-output group");
  // The column's words travel as one wide row per group and are scattered over the group's
  // weight rows (op_k / 4, FcLayer::weight_k): a longer or ragged K would scatter past the
  // streamed row.
  const int op_k = layer.op_k();
  if (op_k <= 0 || op_k > 256 || op_k % 4 != 0)
    fail("a column write needs the weights' K a multiple of 4 up to 256 (one wide row), not ",
         op_k);
  FcColumnWrite w;
  w.rows = op_k / 4;
  w.column = column;
  const FcRowWrite first = fc_weight_rows(layer, placement, 0);
  w.words.rows = first.rows;
  for (size_t g = 0; g < first.rows.size(); ++g) {
    const size_t output = g * kColumnRowWords + size_t(column), k = size_t(layer.k);
    for (int b = 0; b < 256; ++b)
      w.words.bytes.push_back(b < op_k ? uint8_t(int{layer.weights[output * k + size_t(b)]} + 128)
                                       : uint8_t{128});
  }
  return w;
}

int fc_column_write_narrow_bytes(const FcColumnWrite& w) {
  const std::vector<int> at = column_copies_at(w);
  int end = w.narrow_at;
  for (const int a : at) end = std::max(end, a + w.rows * 256);
  return end;
}

void emit_column_copies(Emitter& e, const FcColumnWrite& w) {
  const std::vector<int> at = column_copies_at(w);
  for (size_t g = 0; g < at.size(); ++g)
    e.add("w2n", cat(column_tiles(w.words.rows[g].tile), " w.addr=", hex(w.words.rows[g].unit),
                     " w=(1 x ", w.rows, ") n.addr=", hex(at[g] / 4),
                     " n=", narrow_walk(w.rows * kColumnRowWords), " n.lvl_mask=0x01"));
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

void emit_column_words_from_narrow(Emitter& e, const FcColumnWrite& w) {
  if (w.from_byte.size() != w.words.rows.size())
    fail(w.from_byte.size(), " places for the words of ", w.words.rows.size(), " groups");
  // A whole wide row from the group's first word: the words are its first scattered() ones, the
  // rest is never read (the copy goes back over every row after the scatter).
  for (size_t g = 0; g < w.from_byte.size(); ++g)
    e.add("n2w", cat(column_tiles(w.words.rows[g].tile), " n.addr=", hex(w.from_byte[g] / 4),
                     " n=", narrow_walk(kColumnRowWords),
                     " n.lvl_mask=0x01 w.addr=", hex(w.words.rows[g].unit), " w=(1 x 1)"));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

void emit_column_scatters(Emitter& e, const FcColumnWrite& w) {
  const std::vector<int> at = column_copies_at(w);
  // Word r of the streamed row to word 64 r + column of the copy: row r's word of the column.
  // Its narrow address is the only place the column enters the program (marked: another column
  // of the same groups is this program with that field rewritten).
  for (size_t g = 0; g < at.size(); ++g) {
    e.add("w2n", cat(column_tiles(w.words.rows[g].tile), " w.addr=", hex(w.words.rows[g].unit),
                     " w=(1 x 1) n.addr=", hex(at[g] / 4 + w.column), " n=",
                     strided_walk({{kColumnRowWords, w.scattered()}}, 6), " n.lvl_mask=0x01"));
    e.mark("n.addr");
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  for (size_t g = 0; g < at.size(); ++g)
    e.add("n2w", cat(column_tiles(w.words.rows[g].tile), " n.addr=", hex(at[g] / 4),
                     " n=", narrow_walk(w.rows * kColumnRowWords), " n.lvl_mask=0x01 w.addr=",
                     hex(w.words.rows[g].unit), " w=(1 x ", w.rows, ")"));
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

}  // namespace tinycoral::compiler
