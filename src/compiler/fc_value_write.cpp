#include "compiler/fc_value_write.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/error.h"
#include "compiler/conv_plan.h"
#include "compiler/program_parts.h"

namespace tinycoral::compiler {
namespace {

constexpr int kValueRowWords = 64;     // 4-byte words in one 256-byte wide row
constexpr int kValueVectorWords = 16;  // a position's 64 channels
constexpr int kPieceBytes = 64;        // a group's 64 channels, one byte each

// Narrow byte of each group's quad buffer: the groups of one tile side by side from narrow_at.
std::vector<int> value_quads_at(const FcValueWrite& w) {
  std::map<int, int> on_tile;
  std::vector<int> at;
  for (const FcParameterRow& r : w.vectors.rows)
    at.push_back(w.narrow_at + on_tile[r.tile]++ * 256);
  return at;
}

std::string value_tiles(int tile) { return cat("tiles=", hex(tile_bit(tile))); }

void check_value_position(const FcValueWrite& w, int pos) {
  if (pos < 0 || pos >= 4 * w.rows) fail("position ", pos, " of a value cache of ", 4 * w.rows);
}

}  // namespace

FcValueWrite fc_value_write(const FcLayer& layer, const FcPlacement& placement,
                            const std::vector<int>& staging_units, int position) {
  // (The rows the tiles hold: op_k's, FcLayer::weight_k where set.)
  if (layer.op_k() <= 0 || layer.op_k() % 4 != 0) fail("a value cache of K = ", layer.op_k());
  FcValueWrite w;
  w.rows = layer.op_k() / 4;
  check_value_position(w, position);
  w.position = position;
  const FcRowWrite first = fc_weight_rows(layer, placement, 0);
  if (staging_units.size() != first.rows.size())
    fail(staging_units.size(), " staging rows for ", first.rows.size(), " groups");
  for (size_t g = 0; g < first.rows.size(); ++g) {
    const int unit = staging_units[g], tile = first.rows[g].tile;
    if (unit < 0 || unit % 4 != 0 || unit + 4 > kFcParamUnits)
      fail("a staging row at wide unit ", unit);
    // Not over a group's parameters on its tile, nor over another group's staging row there.
    if (const int j = fc_group_over(layer, placement, tile, unit, 4); j >= 0)
      fail("a staging row at wide unit ", unit, " inside a group's parameters on tile ", tile,
           " (group ", j, "'s)");
    for (size_t o = 0; o < g; ++o)
      if (w.vectors.rows[o].tile == tile && w.vectors.rows[o].unit == unit)
        fail("groups ", o, " and ", g, " stage in one row (wide unit ", unit, " of tile ", tile,
             ")");
    w.vectors.rows.push_back({tile, unit});
    w.cache_units.push_back(first.rows[g].unit);
    const size_t k = size_t(layer.k);
    for (int c = 0; c < 256; ++c) {
      const size_t output = g * kValueRowWords + size_t(c);
      w.vectors.bytes.push_back(
          c < kValueRowWords ? uint8_t(int{layer.weights[output * k + size_t(position)]} + 128)
                             : uint8_t{128});
    }
  }
  return w;
}

int fc_value_write_narrow_bytes(const FcValueWrite& w) {
  int end = w.narrow_at;
  for (const int a : value_quads_at(w)) end = std::max(end, a + 256);
  return end;
}

void emit_value_copies(Emitter& e, const FcValueWrite& w) {
  const std::vector<int> at = value_quads_at(w);
  for (size_t g = 0; g < at.size(); ++g)
    e.add("w2n", cat(value_tiles(w.vectors.rows[g].tile), " w.addr=", hex(w.vectors.rows[g].unit),
                     " w=(1 x 1) n.addr=", hex(at[g] / 4), " n=", narrow_walk(kValueRowWords),
                     " n.lvl_mask=0x01"));
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

void emit_value_vectors_from_narrow(Emitter& e, const FcValueWrite& w) {
  if (w.from_byte.size() != w.vectors.rows.size())
    fail(w.from_byte.size(), " places for the vectors of ", w.vectors.rows.size(), " groups");
  for (size_t g = 0; g < w.from_byte.size(); ++g) {
    const int b = w.from_byte[g];
    if (b < 0 || b % 4 != 0 || b + kPieceBytes > conv::kNarrowBytes)
      fail("a vector from narrow byte ", b);
    e.add("n2w", cat(value_tiles(w.vectors.rows[g].tile), " n.addr=", hex(b / 4),
                     " n=", narrow_walk(kValueVectorWords),
                     " n.lvl_mask=0x01 w.addr=", hex(w.vectors.rows[g].unit), " w=(1 x 1)"));
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
}

void emit_value_landings(Emitter& e, const FcValueWrite& w) {
  const std::vector<int> at = value_quads_at(w);
  const std::vector<int64_t> fields = fc_value_write_fields(w, w.position);
  // The new vector from the staging row's start into its slot of the quad (the slot marked).
  for (size_t g = 0; g < at.size(); ++g) {
    e.add("w2n", cat(value_tiles(w.vectors.rows[g].tile), " w.addr=", hex(w.vectors.rows[g].unit),
                     " w=(1 x 1) n.addr=", hex(uint64_t(fields[g])),
                     " n=", narrow_walk(kValueVectorWords), " n.lvl_mask=0x01"));
    e.mark("n.addr");
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  // The quad back into the staging row as it is, then transposed into the cache row (marked):
  // the narrow walk takes channel word c of the 4 positions (16 words apart) innermost, so each
  // 4 x 4 block becomes channels 4c..4c+3, each with the 4 positions in its bytes.
  for (size_t g = 0; g < at.size(); ++g)
    e.add("n2w", cat(value_tiles(w.vectors.rows[g].tile), " n.addr=", hex(at[g] / 4),
                     " n=", narrow_walk(kValueRowWords),
                     " n.lvl_mask=0x01 w.addr=", hex(w.vectors.rows[g].unit), " w=(1 x 1)"));
  for (size_t g = 0; g < at.size(); ++g) {
    e.add("n2w", cat(value_tiles(w.vectors.rows[g].tile), " n.addr=", hex(at[g] / 4),
                     " n=", strided_walk({{kValueVectorWords, 4}, {1, kValueVectorWords}}, 6),
                     " n.lvl_mask=0x03 w.addr=", hex(uint64_t(fields[at.size() + g])),
                     " w=(1 x 1) transpose=1"));
    e.mark("w.addr");
  }
  tile_fence(e, "counters=0x1ffff units=0x3ff signal=1");
  wait_tokens(e);
}

std::vector<int64_t> fc_value_write_fields(const FcValueWrite& w, int pos) {
  check_value_position(w, pos);
  std::vector<int64_t> fields;
  for (const int a : value_quads_at(w)) fields.push_back(a / 4 + fc_value_slot_word(pos));
  for (const int unit : w.cache_units) fields.push_back(unit + fc_weight_row_unit(pos));
  return fields;
}

ValueVectorsSideBySide value_vectors_side_by_side(int n_heads, int n_kv_heads, int head_size,
                                                  int base) {
  if (n_heads <= 0 || n_kv_heads <= 0 || n_heads % n_kv_heads != 0 || head_size <= 0)
    fail(n_heads, " heads over ", n_kv_heads, " kv heads of ", head_size, " channels");
  // The landing's narrowToWide reads whole words.
  if (head_size % 4 != 0 || base < 0 || base % 4 != 0)
    fail("vectors of heads of ", head_size, " channels from narrow byte ", base,
         ": not word-aligned");
  const int per_kv = n_heads / n_kv_heads, groups = fc_groups(head_size);
  ValueVectorsSideBySide out;
  out.end = base + kPieceBytes * fc_groups(n_kv_heads * head_size);
  for (int h = 0; h < n_heads; ++h)
    for (int j = 0; j < groups; ++j) {
      out.from_byte.push_back(base + head_size * (h / per_kv) + kPieceBytes * j);
      out.end = std::max(out.end, out.from_byte.back() + kPieceBytes);
    }
  out.end = (out.end + kPieceBytes - 1) / kPieceBytes * kPieceBytes;
  return out;
}

}  // namespace tinycoral::compiler
