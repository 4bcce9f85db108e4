// The mesh halo exchange (mesh_halo.h). Walks, records and groups follow Google's gen2020
// MobileNet v2 words 176-212 and 248-320 (docs/compiler.md "Mesh halo exchange").
#include "compiler/mesh_halo.h"

#include <algorithm>
#include <string>
#include <utility>

#include "common/error.h"
#include "compiler/program_parts.h"  // strided_walk

namespace tinycoral::compiler {

namespace {

constexpr int kGridMax = 4;           // the mesh is 4 x 4 tiles
constexpr int kNarrowBytes = 196608;  // narrow memory per tile (isa.md 3.1)
constexpr int kPieceWords = 16;       // Google's moves walk a pixel in pieces of at most 16 words
constexpr int kMaxCount = (1 << 15) - 1;  // a record's value (count << 2 | 3) is 18 bits signed

// Directions in isa::mesh_direction order (opcodes 0x15-0x18).
enum Direction { kSouth = 0, kWest = 1, kNorth = 2, kEast = 3 };
constexpr const char* kMnemonic[4] = {"mesh_s", "mesh_w", "mesh_n", "mesh_e"};
// MESH_*_IN counts the inbound half's writes (NORTH_IN: words from the north, mesh_s), MESH_*_OUT
// the words sent that way (isa.md 2.12; docs/chip.md).
constexpr int kNorthIn = 3, kSouthIn = 5;
constexpr int kOutCounter[4] = {9, 10, 7, 8};

// A rectangle of a tile's padded image: rows [y, y + h), columns [x, x + w).
struct Rect {
  int y = 0, x = 0, h = 0, w = 0;
};

// A walk over `rect` of block (r, c): level 0 the words of one piece of a pixel, level 1 the
// pixels of a row, level 2 the rows, level 3 the pieces (Google's order and strides).
std::string walk(const MeshHalo& h, int c, const Rect& rect) {
  const int cw = h.channel_words();
  const int piece = std::min(cw, kPieceWords);
  const int pieces = (cw + kPieceWords - 1) / kPieceWords;
  const int64_t row_words = int64_t{cw} * h.buffer_cols(c);
  return strided_walk({{1, piece}, {cw, rect.w}, {row_words, rect.h}, {piece, pieces}}, 4);
}

// A short last piece (more than 16 channel words, not a multiple of 16): its words and the group
// fields Google writes for it (MobileNet v2 word 462: 24 words as 16 + 8, grp 7, gstride 35).
std::string short_piece(const MeshHalo& h, const char* half) {
  const int cw = h.channel_words();
  const int rest = cw % kPieceWords;
  if (cw <= kPieceWords || rest == 0) return "";
  return cat(" ", half, ".grp=", rest - 1, " ", half, ".gstride=", 4 * (kPieceWords - rest) + 3);
}

// What tile (r, c) sends and where it writes what arrives, for one direction.
struct Move {
  bool send = false, receive = false, fill = false;
  Rect from, into;
};

Move move_of(const MeshHalo& h, Direction d, int r, int c) {
  const int R = static_cast<int>(h.rows.size()), C = static_cast<int>(h.cols.size());
  const HaloSides& s = h.halo;
  const int bh = h.rows[r], bw = h.cols[c];
  const int height = h.buffer_rows(r);
  Move m;
  switch (d) {
    case kWest:  // the first `right` columns to the west neighbour's right halo
      m.send = c > 0;
      m.receive = c < C - 1;
      m.from = {0, s.left, height, s.right};
      m.into = {0, s.left + bw, height, s.right};
      break;
    case kEast:  // the last `left` columns to the east neighbour's left halo
      m.send = c < C - 1;
      m.receive = c > 0;
      m.from = {0, s.left + bw - s.left, height, s.left};
      m.into = {0, 0, height, s.left};
      break;
    case kNorth:  // the first `bottom` rows to the north neighbour's bottom halo
      m.send = r > 0;
      m.receive = r < R - 1;
      m.from = {s.top, s.left, s.bottom, bw};
      m.into = {s.top + bh, s.left, s.bottom, bw};
      break;
    case kSouth:  // the last `top` rows to the south neighbour's top halo
      m.send = r < R - 1;
      m.receive = r > 0;
      m.from = {s.top + bh - s.top, s.left, s.top, bw};
      m.into = {0, s.left, s.top, bw};
      break;
  }
  m.fill = !m.receive;  // the map's border: nothing arrives, the zero point is written
  return m;
}

int width_of(const HaloSides& s, Direction d) {
  return d == kWest ? s.right : d == kEast ? s.left : d == kNorth ? s.bottom : s.top;
}

// Sync records: the blocks' writer (AVDATA, id 0) for every sending move; for horizontal moves,
// which carry the halo rows, the vertical moves' inbound counters they wait for.
std::string records(const MeshHalo& h, Direction d, const MeshCounts& counts) {
  std::vector<std::pair<int, int>> waits;  // (id, count)
  if (h.avdata > 0) waits.push_back({0, h.avdata});
  if (d == kWest || d == kEast) {
    if (h.halo.top > 0) waits.push_back({kNorthIn << 1, counts.in[kSouth] + 1});
    if (h.halo.bottom > 0) waits.push_back({kSouthIn << 1, counts.in[kNorth] + 1});
  }
  std::string out;
  for (size_t k = 0; k < waits.size(); ++k) {
    const auto [id, count] = waits[k];
    if (id != 0) out += cat(" s", k, ".id=", hex(id));
    out += cat(" s", k, ".val=", count << 2 | 3, " s", k, ".en_a=1 s", k, ".en_b=1");
  }
  return out;
}

std::string fields_of(const MeshHalo& h, Direction d, int r, int c, const MeshCounts& counts) {
  const Move m = move_of(h, d, r, c);
  std::string f;
  if (m.send)
    f += cat(" o.addr=", hex(h.pixel_address(c, m.from.y, m.from.x)), " o=", walk(h, c, m.from),
             " o.sdims=15", short_piece(h, "o"));
  f += cat(" i.addr=", hex(h.pixel_address(c, m.into.y, m.into.x)), " i=", walk(h, c, m.into),
           " i.sdims=15", short_piece(h, "i"));
  if (m.send) f += " out_mode=3 f475=1";
  f += " in_mode=7";
  if (m.send) f += records(h, d, counts);
  if (m.fill) f += cat(" fill_en=1 fill=", hex(uint32_t{h.zero_point} * 0x01010101u));
  return f;
}

}  // namespace

uint32_t MeshHalo::tile_mask() const {
  uint32_t mask = 0;
  for (size_t r = 0; r < rows.size(); ++r)
    for (size_t c = 0; c < cols.size(); ++c) mask |= 1u << (4 * r + c);
  return mask;
}

void check_mesh_halo(const MeshHalo& h) {
  const size_t R = h.rows.size(), C = h.cols.size();
  if (R < 1 || R > kGridMax || C < 1 || C > kGridMax)
    fail("mesh halo: a grid of ", R, " x ", C, " tiles; the mesh has 1 to ", kGridMax,
         " rows and columns");
  for (size_t r = 0; r < R; ++r)
    if (h.rows[r] < 1) fail("mesh halo: grid row ", r, " has blocks of ", h.rows[r], " rows");
  for (size_t c = 0; c < C; ++c)
    if (h.cols[c] < 1) fail("mesh halo: grid column ", c, " has blocks of ", h.cols[c], " columns");
  if (h.channels < 1) fail("mesh halo: ", h.channels, " channels");
  const HaloSides& s = h.halo;
  if (s.top < 0 || s.bottom < 0 || s.left < 0 || s.right < 0)
    fail("mesh halo: a negative halo width (top ", s.top, ", bottom ", s.bottom, ", left ", s.left,
         ", right ", s.right, ")");
  // Sizes no narrow memory holds, refused before the buffer arithmetic could overflow.
  const int most = std::max({*std::max_element(h.rows.begin(), h.rows.end()),
                             *std::max_element(h.cols.begin(), h.cols.end()), h.channels, s.top,
                             s.bottom, s.left, s.right});
  if (most > kNarrowBytes)
    fail("mesh halo: a block side, halo or channel count of ", most, ", more than the ",
         kNarrowBytes, " bytes of narrow memory hold");
  if (s.top + s.bottom + s.left + s.right == 0) fail("mesh halo: no side has a halo");
  if (h.base % 4 != 0) fail("mesh halo: base ", hex(h.base), " is not a multiple of 4 bytes");
  if (h.avdata < 0 || h.avdata > kMaxCount)
    fail("mesh halo: AVDATA count ", h.avdata, " outside 0..", kMaxCount);
  // A block sends its neighbours the pixels of their halo: it must have that many.
  for (size_t c = 0; c < C; ++c) {
    if (c > 0 && h.cols[c] < s.right)
      fail("mesh halo: blocks of grid column ", c, " are ", h.cols[c],
           " columns wide, fewer than the west neighbour's right halo of ", s.right);
    if (c + 1 < C && h.cols[c] < s.left)
      fail("mesh halo: blocks of grid column ", c, " are ", h.cols[c],
           " columns wide, fewer than the east neighbour's left halo of ", s.left);
  }
  for (size_t r = 0; r < R; ++r) {
    if (r > 0 && h.rows[r] < s.bottom)
      fail("mesh halo: blocks of grid row ", r, " are ", h.rows[r],
           " rows high, fewer than the north neighbour's bottom halo of ", s.bottom);
    if (r + 1 < R && h.rows[r] < s.top)
      fail("mesh halo: blocks of grid row ", r, " are ", h.rows[r],
           " rows high, fewer than the south neighbour's top halo of ", s.top);
  }
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < C; ++c) {
      const int64_t end =
          int64_t{h.base} + h.buffer_bytes(static_cast<int>(r), static_cast<int>(c));
      if (end > kNarrowBytes)
        fail("mesh halo: the padded block of tile ", 4 * r + c, " (", h.buffer_rows(r), " x ",
             h.buffer_cols(c), " pixels of ", 4 * h.channel_words(), " bytes from ", hex(h.base),
             ") ends at byte ", end, ", beyond the ", kNarrowBytes, " bytes of narrow memory");
    }
}

void emit_mesh_halo(Emitter& e, const MeshHalo& h, MeshCounts& counts) {
  check_mesh_halo(h);
  const int R = static_cast<int>(h.rows.size()), C = static_cast<int>(h.cols.size());
  const int pieces = (h.channel_words() + kPieceWords - 1) / kPieceWords;
  if (counts.tiles != 0 && counts.tiles != h.tile_mask())
    fail("mesh halo: the counters were counted on tiles ", hex(counts.tiles),
         "; reset them (a fence with counters=0x1ffff, a new MeshCounts) before an exchange on ",
         hex(h.tile_mask()));
  for (int d = 0; d < 4; ++d)
    if (std::min(counts.in[d], counts.out[d]) < 0)
      fail("mesh halo: negative ", kMnemonic[d], " counter counts (", counts.in[d], ", ",
           counts.out[d], ")");
  for (int d = 0; d < 4; ++d)
    if (std::max(counts.in[d], counts.out[d]) + pieces > kMaxCount)
      fail("mesh halo: the ", kMnemonic[d], " counters would pass ", kMaxCount,
           "; reset them first (a fence with counters=0x1ffff, a new MeshCounts)");
  counts.tiles = h.tile_mask();
  uint32_t units = 0, out_counters = 0;
  int fence_count = 0;
  // Per tile and direction, its MESH_*_OUT count after the exchange: a tile that does not send
  // that way keeps the count from before.
  std::array<std::array<int, 4>, 16> own{};
  for (auto& t : own) t = counts.out;
  for (const Direction d : {kWest, kEast, kNorth, kSouth}) {
    if (width_of(h.halo, d) == 0) continue;
    // Tiles from the receiving end of the chain to the sending one (Google's order), each joining
    // the instruction of the first tile with the same fields.
    std::vector<std::pair<std::string, uint32_t>> groups;
    const bool horizontal = d == kWest || d == kEast;
    const bool reverse = d == kEast || d == kSouth;
    const int outer = horizontal ? R : C, inner = horizontal ? C : R;
    bool sent = false;
    const auto add_tile = [&](int r, int c) {
      const std::string f = fields_of(h, d, r, c, counts);
      auto it =
          std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == f; });
      if (it == groups.end()) it = groups.insert(groups.end(), {f, 0});
      it->second |= 1u << (4 * r + c);
      if (move_of(h, d, r, c).send) {
        own[4 * r + c][d] += pieces;
        sent = true;
      }
    };
    if (horizontal) {
      for (int r = 0; r < outer; ++r)
        for (int k = 0; k < inner; ++k) add_tile(r, reverse ? inner - 1 - k : k);
    } else {
      for (int k = 0; k < inner; ++k)
        for (int c = 0; c < outer; ++c) add_tile(reverse ? inner - 1 - k : k, c);
    }
    for (const auto& [fields, tiles] : groups)
      e.add(kMnemonic[d], cat("tiles=", hex(tiles), fields));
    counts.in[d] += pieces;  // every tile receives or fills
    units |= 1u << (6 + d);
    out_counters |= 1u << kOutCounter[d];
    fence_count = std::max(fence_count, counts.out[d] + (sent ? pieces : 0));
  }
  // The fence sets the named counters to `count` (0 would reset them) on the tiles where they
  // differ, those that did not send in some direction, so that every tile counts alike again
  // (all 18 mesh fences of Google's v2 program follow this rule; docs/compiler.md).
  uint32_t fenced = 0;
  for (int t = 0; t < 16; ++t)
    if (h.tile_mask() >> t & 1)
      for (int d = 0; d < 4; ++d)
        if ((units >> (6 + d) & 1) && own[t][d] != fence_count) fenced |= 1u << t;
  for (int d = 0; d < 4; ++d)
    if (units >> (6 + d) & 1) counts.out[d] = fence_count;
  if (fenced != 0)
    e.add("sync", cat("tiles=", hex(fenced), " counters=", hex(out_counters),
                      " count=", hex(fence_count), " units=", hex(units)));
}

}  // namespace tinycoral::compiler
