// The mesh halo exchange (src/compiler/mesh_halo.h) on the virtual Edge TPU: each tile's padded
// block is loaded with random bytes from the host (halo positions included, so every halo byte
// must be overwritten), the exchange runs, and every byte of every tile's narrow memory is checked
// against the map: interiors and everything outside the padded blocks unchanged, each halo pixel
// the neighbouring block's pixel there (corners the diagonal neighbour's), the map's outer border
// the zero point. Also: the instructions' shape beside Google's gen2020 MobileNet v2 words, and
// the errors a wrong setup gives.
#include "compiler/mesh_halo.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"
#include "container/edgetpu_model.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

constexpr int kPacket = 256;        // bytes per ring packet
constexpr int kPacketsPerMove = 4;  // packets per infeed / ring consumer / wideToNarrow
constexpr int kInputFifo = 0x1e00;  // wide rows the packets arrive in, 8 moves' worth
constexpr int kMovesPerFence = 8;
constexpr int kNarrowBytes = 196608;

struct Tile {
  int r, c, index;
};
std::vector<Tile> grid_tiles(const MeshHalo& h) {
  std::vector<Tile> out;
  for (int r = 0; r < static_cast<int>(h.rows.size()); ++r)
    for (int c = 0; c < static_cast<int>(h.cols.size()); ++c) out.push_back({r, c, 4 * r + c});
  return out;
}

// Bytes each grid tile is loaded with from `base`: its largest padded block in whole packets.
int run_bytes(const MeshHalo& h) {
  int64_t most = 0;
  for (const Tile& t : grid_tiles(h)) most = std::max(most, h.buffer_bytes(t.r, t.c));
  return static_cast<int>((most + kPacket - 1) / kPacket * kPacket);
}

// The host's bytes into each grid tile's narrow memory at `base` (`run` bytes per tile, tiles in
// grid order in the input): one activation pop, then per four packets a wideToNarrow, a ring
// consumer and an infeed (the form of the ADD generator's operand stream, eltwise_codegen.cpp).
void load_blocks(Emitter& e, const MeshHalo& h, int run) {
  const std::vector<Tile> tiles = grid_tiles(h);
  const int total = run * static_cast<int>(tiles.size());
  ASSERT_LE(total / 8, 0xffff) << "the infeeds' pop_wait counts 8-byte units in 16 bits";
  input_address(e, "blocks");
  host_pop(e, total);
  int move = 0;
  for (size_t k = 0; k < tiles.size(); ++k)
    for (int at = 0; at < run; at += kPacket * kPacketsPerMove, ++move) {
      if (move > 0 && move % kMovesPerFence == 0) tile_fence(e, "counters=0x1ffff units=0x3ff");
      const uint32_t bit = tile_bit(tiles[k].index);
      const int fifo = kInputFifo + 4 * kPacketsPerMove * (move % kMovesPerFence);
      const int bytes = std::min(kPacket * kPacketsPerMove, run - at);
      host_to_narrow(e, bit, fifo, h.base + at, bytes, (static_cast<int>(k) * run + at) / 8);
    }
  tile_fence(e, "units=0x3ff");
}

// Block origin in the map of grid row r / column c.
int origin(const std::vector<int>& sizes, int k) {
  int at = 0;
  for (int i = 0; i < k; ++i) at += sizes[i];
  return at;
}
// The grid row (column) whose blocks hold map row (column) v.
int owner(const std::vector<int>& sizes, int v) {
  int k = 0;
  while (v >= sizes[k]) v -= sizes[k++];
  return k;
}

// What every tile's narrow memory must hold after the exchange, given what was loaded.
std::vector<std::vector<uint8_t>> expected_memory(const MeshHalo& h,
                                                  const std::vector<std::vector<uint8_t>>& loaded) {
  std::vector<std::vector<uint8_t>> want = loaded;
  const int height = origin(h.rows, static_cast<int>(h.rows.size()));
  const int width = origin(h.cols, static_cast<int>(h.cols.size()));
  const int pixel = 4 * h.channel_words();
  for (const Tile& t : grid_tiles(h))
    for (int y = 0; y < h.buffer_rows(t.r); ++y)
      for (int x = 0; x < h.buffer_cols(t.c); ++x) {
        const bool interior = y >= h.halo.top && y < h.halo.top + h.rows[t.r] && x >= h.halo.left &&
                              x < h.halo.left + h.cols[t.c];
        if (interior) continue;
        const int Y = origin(h.rows, t.r) + y - h.halo.top;
        const int X = origin(h.cols, t.c) + x - h.halo.left;
        uint8_t* to = want[t.index].data() + h.pixel_address(t.c, y, x);
        if (Y < 0 || Y >= height || X < 0 || X >= width) {
          std::fill(to, to + pixel, h.zero_point);
          continue;
        }
        const int r = owner(h.rows, Y), c = owner(h.cols, X);
        const uint8_t* from =
            loaded[4 * r + c].data() + h.pixel_address(c, Y - origin(h.rows, r) + h.halo.top,
                                                       X - origin(h.cols, c) + h.halo.left);
        std::copy(from, from + pixel, to);
      }
  return want;
}

// Loads random bytes into the padded blocks of each layout (one host input each), runs their
// exchanges one after the other on the virtual Edge TPU (one MeshCounts, no reset between, as
// Google's program does) and compares all 16 tiles' narrow memories byte for byte with
// expected_memory(). The layouts' regions must not overlap.
void check_exchanges(const std::vector<MeshHalo>& layouts, uint32_t seed) {
  for (size_t a = 0; a < layouts.size(); ++a)
    for (size_t b = a + 1; b < layouts.size(); ++b)
      ASSERT_TRUE(layouts[a].base + run_bytes(layouts[a]) <= layouts[b].base ||
                  layouts[b].base + run_bytes(layouts[b]) <= layouts[a].base)
          << "layouts " << a << " and " << b << " overlap";
  Emitter e;
  for (const MeshHalo& h : layouts) load_blocks(e, h, run_bytes(h));
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  MeshCounts counts;
  for (const MeshHalo& h : layouts) emit_mesh_halo(e, h, counts);
  tile_fence(e, "units=0x3ff signal=1");
  wait_tokens(e);
  const container::Bitstream program = e.finish();

  std::mt19937 random(seed);
  std::vector<std::vector<uint8_t>> inputs;
  std::vector<std::vector<uint8_t>> loaded(16, std::vector<uint8_t>(kNarrowBytes, 0));
  for (const MeshHalo& h : layouts) {
    inputs.emplace_back();
    const int run = run_bytes(h);  // (not once per byte: it lists the grid's tiles anew)
    for (const Tile& t : grid_tiles(h))
      for (int i = 0; i < run; ++i) {
        const auto b = static_cast<uint8_t>(random());
        inputs.back().push_back(b);
        loaded[t.index][h.base + i] = b;
      }
  }

  chip::VirtualEdgeTpu chip;
  chip.receive(chip::DmaTag::kInstructions, program.data);
  for (const std::vector<uint8_t>& input : inputs) {
    ASSERT_EQ(chip.advance(), chip::RunState::kWaiting) << chip.fault();
    chip.receive(chip::DmaTag::kInput, input);
  }
  ASSERT_EQ(chip.advance(), chip::RunState::kIdle) << chip.fault();
  EXPECT_EQ(chip.stats().mesh_bytes_dropped_at_edge, 0u);

  std::vector<std::vector<uint8_t>> want = loaded;
  for (const MeshHalo& h : layouts) want = expected_memory(h, want);
  for (int t = 0; t < 16; ++t) {
    const auto& got = chip.tile(t).narrow;
    ASSERT_EQ(got.size(), want[t].size());
    // (The byte loop below, unoptimized in the sanitized build, only to name the wrong bytes.)
    if (std::memcmp(got.data(), want[t].data(), got.size()) == 0) continue;
    int wrong = 0;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != want[t][i] && ++wrong <= 3)
        ADD_FAILURE() << "tile " << t << " narrow byte " << i << ": " << int{got[i]}
                      << ", expected " << int{want[t][i]};
    EXPECT_EQ(wrong, 0) << "wrong bytes on tile " << t;
  }
}

void check_exchange(const MeshHalo& h, uint32_t seed) {
  SCOPED_TRACE(cat(h.rows.size(), " x ", h.cols.size(), " grid, ", h.channels, " channels, base ",
                   hex(h.base), ", zero point ", int{h.zero_point}));
  check_exchanges({h}, seed);
}

MeshHalo halo_of(std::vector<int> rows, std::vector<int> cols, int channels, HaloSides sides = {},
                 uint32_t base = 0, uint8_t zero_point = 0) {
  MeshHalo h;
  h.rows = std::move(rows);
  h.cols = std::move(cols);
  h.channels = channels;
  h.halo = sides;
  h.base = base;
  h.zero_point = zero_point;
  return h;
}

TEST(MeshHalo, FourByFourOf28x28x32LikeGooglesFirstDepthwise) {
  check_exchange(halo_of({28, 28, 28, 28}, {28, 28, 28, 28}, 32), 1);
}

TEST(MeshHalo, FourByFourOfUneven14x14Blocks) {
  // 14 = 4 + 3 + 4 + 3 each way (Google's 14x14 maps); a base inside narrow memory.
  check_exchange(halo_of({4, 3, 4, 3}, {4, 3, 4, 3}, 16, {}, 0x400, 0x80), 2);
  check_exchange(halo_of({4, 3, 4, 3}, {4, 3, 4, 3}, 384), 11);  // Google's words 1902-2094
}

TEST(MeshHalo, TwoByTwoWithPixelsOfTwoPieces) {
  // 96 channels = 24 words: a 16-word piece and an 8-word one (Google's grp / gstride fields).
  check_exchange(halo_of({5, 6}, {7, 4}, 96, {}, 0x100, 3), 3);
}

TEST(MeshHalo, OneByFourWithChannelsNotAMultipleOfFour) {
  // 3 channels: one word per pixel, the fourth byte moves with it (the halo pixel is the
  // neighbour's whole word; the border's is the zero point in all four bytes).
  check_exchange(halo_of({9}, {6, 6, 6, 6}, 3, {}, 0, 0x80), 4);
  check_exchange(halo_of({4, 5, 4}, {5, 5}, 6, {}, 0x40, 7), 5);  // 6 channels: 2 words
}

TEST(MeshHalo, OnlyBottomAndRightBeforeAStride2Layer) {
  // Google's words 176-212 (3-channel image, 56x56 blocks, zero point 128), and a smaller one.
  check_exchange(halo_of({56, 56, 56, 56}, {56, 56, 56, 56}, 3, {0, 1, 0, 1}, 0x7080, 128), 6);
  check_exchange(halo_of({4, 4, 4}, {6, 6}, 8, {0, 1, 0, 1}, 0, 9), 7);
}

TEST(MeshHalo, WiderHalosAndSingleRowsOrColumns) {
  check_exchange(halo_of({6, 5, 6}, {5, 7, 5}, 4, {2, 2, 2, 2}, 0, 11), 8);  // 5x5 kernels
  check_exchange(halo_of({3, 4, 3, 4}, {10}, 8, {1, 2, 0, 1}, 0x200, 12), 9);
  check_exchange(halo_of({7}, {7}, 4, {}, 0, 13), 10);  // one tile: every halo is border
}

TEST(MeshHalo, TwoExchangesInARowLikeGooglesFirstTwo) {
  // The image's bottom/right halo at 0x7080 (words 176-212), then the first conv's output with
  // all four at 0 (words 248-320; both fit: 4 x 4 blocks of 12 x 12 here), the counters not reset
  // between; and two on a 2 x 2 grid.
  check_exchanges({halo_of({12, 12, 12, 12}, {12, 12, 12, 12}, 3, {0, 1, 0, 1}, 0x7080, 128),
                   halo_of({12, 12, 12, 12}, {12, 12, 12, 12}, 32)},
                  12);
  check_exchanges(
      {halo_of({5, 6}, {6, 5}, 8, {}, 0x1000, 5), halo_of({3, 4}, {4, 3}, 72, {1, 1, 0, 1}, 0, 6)},
      13);
}

TEST(MeshHalo, RandomGridsShapesHalosAndChannels) {
  // 24 random valid setups: grids of 1-4 x 1-4, blocks of 1-9 per row and column, halos of 0-2
  // per side, 1-80 channels (one to five pieces per pixel, short ones included), any zero point.
  std::mt19937 random(2026);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution(lo, hi)(random); };
  for (int done = 0; done < 24;) {
    std::vector<int> rows(pick(1, 4)), cols(pick(1, 4));
    for (int& v : rows) v = pick(1, 9);
    for (int& v : cols) v = pick(1, 9);
    const HaloSides sides{pick(0, 2), pick(0, 2), pick(0, 2), pick(0, 2)};
    const MeshHalo h = halo_of(rows, cols, pick(1, 80), sides, 4 * pick(0, 256),
                               static_cast<uint8_t>(pick(0, 255)));
    try {
      check_mesh_halo(h);
    } catch (const Error&) {
      continue;  // blocks smaller than a halo, or no halo at all: drawn again
    }
    SCOPED_TRACE(cat("setup ", done, ": halo ", sides.top, " ", sides.bottom, " ", sides.left, " ",
                     sides.right));
    check_exchange(h, 100 + done);
    ++done;
  }
}

// The mesh moves of a program, per opcode: their tile masks in order; index 4: the fences'
// (tiles, count) after them.
std::vector<std::vector<uint32_t>> masks_by_direction(const container::Bitstream& b) {
  std::vector<std::vector<uint32_t>> out(5);
  bool moved = false;
  for (const isa::Instruction& in : isa::decode(b.data))
    if (in.opcode() >= isa::kMeshSouth && in.opcode() <= isa::kMeshEast) {
      out[isa::mesh_direction(in.opcode())].push_back(static_cast<uint32_t>(in.value("tiles")));
      moved = true;
    } else if (in.opcode() == isa::kTileSync && moved) {
      out[4].push_back(static_cast<uint32_t>(in.value("tiles")));
      out[4].push_back(static_cast<uint32_t>(in.value("count")));
    }
  return out;
}

TEST(MeshHalo, ThreeInstructionsPerDirectionForEqualBlocksMoreForUnevenOnes) {
  Emitter e;
  MeshCounts counts;
  emit_mesh_halo(e, halo_of({28, 28, 28, 28}, {28, 28, 28, 28}, 32), counts);
  auto masks = masks_by_direction(e.finish());
  // South, west, north, east: receivers first, then the middle tiles, then the edge that fills.
  EXPECT_EQ(masks[0], (std::vector<uint32_t>{0xf000, 0x0ff0, 0x000f}));
  EXPECT_EQ(masks[1], (std::vector<uint32_t>{0x1111, 0x6666, 0x8888}));
  EXPECT_EQ(masks[2], (std::vector<uint32_t>{0x000f, 0x0ff0, 0xf000}));
  EXPECT_EQ(masks[3], (std::vector<uint32_t>{0x8888, 0x6666, 0x1111}));
  // The border tiles, which do not send every way, get their counters set to the others' 1
  // (Google's word 1342).
  EXPECT_EQ(masks[4], (std::vector<uint32_t>{0xf99f, 1}));
  EXPECT_EQ(counts.out, (std::array<int, 4>{1, 1, 1, 1}));

  // 4 + 3 + 4 + 3: each column width and row height walks its own buffer (Google's 1558-1600).
  Emitter u;
  MeshCounts fresh;
  emit_mesh_halo(u, halo_of({4, 3, 4, 3}, {4, 3, 4, 3}, 192, {0, 1, 0, 1}), fresh);
  masks = masks_by_direction(u.finish());
  EXPECT_EQ(masks[1], (std::vector<uint32_t>{0x0101, 0x0202, 0x0404, 0x0808, 0x1010, 0x2020, 0x4040,
                                             0x8080}));
  EXPECT_EQ(masks[2], (std::vector<uint32_t>{0x0005, 0x000a, 0x0050, 0x00a0, 0x0500, 0x0a00, 0x5000,
                                             0xa000}));
  EXPECT_TRUE(masks[0].empty());
  EXPECT_TRUE(masks[3].empty());
  EXPECT_EQ(masks[4], (std::vector<uint32_t>{0x111f, 3}));  // Google's word 1654
  EXPECT_EQ(fresh.out, (std::array<int, 4>{0, 3, 3, 0}));   // 48 words: three 16-word pieces

  // One tile sends nothing: its fills need no counters evened out, and no fence.
  Emitter one;
  MeshCounts none;
  emit_mesh_halo(one, halo_of({7}, {7}, 4), none);
  masks = masks_by_direction(one.finish());
  EXPECT_EQ(masks[1], std::vector<uint32_t>{1});
  EXPECT_TRUE(masks[4].empty());
}

std::string error_of(const MeshHalo& h) {
  try {
    check_mesh_halo(h);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MeshHalo, WrongSetupsGiveClearErrors) {
  const auto has = [](const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(error_of(halo_of({8, 8, 8, 8, 8}, {8}, 4)), "a grid of 5 x 1 tiles"));
  EXPECT_TRUE(has(error_of(halo_of({8}, {8, 8, 8, 8, 8}, 4)), "a grid of 1 x 5 tiles"));
  EXPECT_TRUE(has(error_of(halo_of({}, {8}, 4)), "a grid of 0 x 1 tiles"));
  EXPECT_TRUE(has(error_of(halo_of({8, 0}, {8}, 4)), "grid row 1 has blocks of 0 rows"));
  EXPECT_TRUE(has(error_of(halo_of({8}, {8}, 0)), "0 channels"));
  EXPECT_TRUE(has(error_of(halo_of({8}, {8}, 4, {0, 0, 0, 0})), "no side has a halo"));
  EXPECT_TRUE(has(error_of(halo_of({8}, {8}, 4, {-1, 1, 1, 1})), "negative halo width"));
  EXPECT_TRUE(has(error_of(halo_of({8}, {8}, 4, {}, 2)), "not a multiple of 4"));
  // Blocks smaller than the halo they send.
  EXPECT_TRUE(has(error_of(halo_of({8}, {8, 1}, 4, {2, 2, 2, 2})),
                  "grid column 1 are 1 columns wide, fewer than the west neighbour's right halo"));
  EXPECT_TRUE(has(error_of(halo_of({1, 8}, {8}, 4, {2, 2, 2, 2})),
                  "grid row 0 are 1 rows high, fewer than the south neighbour's top halo"));
  // The edge blocks send nothing outwards: a 1-column last block is fine with a left halo of 1.
  EXPECT_EQ(error_of(halo_of({8}, {8, 1}, 4, {0, 0, 1, 0})), "");
  // Beyond narrow memory: a 114 x 114 padded block of 16-byte pixels.
  EXPECT_TRUE(has(error_of(halo_of({112}, {112}, 16)), "beyond the 196608 bytes of narrow memory"));
  EXPECT_TRUE(has(error_of(halo_of({2000000000}, {2000000000}, 2000000000)),
                  "a block side, halo or channel count of 2000000000, more than"));
  EXPECT_TRUE(
      has(error_of(halo_of({8}, {8}, 4, {1, 2000000000, 2000000000, 1})), "more than the 196608"));
  // emit_mesh_halo checks too, before emitting anything.
  Emitter e;
  MeshCounts counts;
  EXPECT_THROW(emit_mesh_halo(e, halo_of({8, 8, 8, 8, 8}, {8}, 4), counts), Error);
  EXPECT_EQ(e.words(), 1u);
  // Counters counted on another grid.
  counts.tiles = 0x0033;
  try {
    emit_mesh_halo(e, halo_of({8}, {8}, 4), counts);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_TRUE(has(error.what(), "the counters were counted on tiles 0x33; reset them"))
        << error.what();
  }
  counts.tiles = 0;
  // Counters that would pass what a record holds.
  counts.out[1] = 32767;
  try {
    emit_mesh_halo(e, halo_of({8}, {8}, 4), counts);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_TRUE(has(error.what(), "the mesh_w counters would pass 32767")) << error.what();
  }
  EXPECT_EQ(e.words(), 1u);
}

// Google's gen2020 MobileNet v2 program, executable 0 (TINYCORAL_TESTDATA), its instructions
// at words [first, last].
std::vector<isa::Instruction> googles_words(const std::filesystem::path& dir, uint32_t first,
                                            uint32_t last) {
  const auto model = container::read_edgetpu_model_file(
      dir / "gen2020" / "mobilenet_v2_1.0_224_quant_edgetpu.tflite");
  const auto& exe = model.edgetpu_ops.at(0).options.packages.at(0).executables.at(0);
  std::vector<isa::Instruction> out;
  for (isa::Instruction& in : isa::decode(exe.bitstreams.at(0).data))
    if (in.word_offset >= first && in.word_offset <= last) out.push_back(std::move(in));
  return out;
}

// The mesh moves and fences of an emitted exchange.
std::vector<isa::Instruction> emitted_exchange(Emitter& e) {
  std::vector<isa::Instruction> out;
  for (isa::Instruction& in : isa::decode(e.finish().data))
    if (in.opcode() == isa::kTileSync ||
        (in.opcode() >= isa::kMeshSouth && in.opcode() <= isa::kMeshEast))
      out.push_back(std::move(in));
  return out;
}

// Per instruction, the names of the fields (but `seq`) where ours and Google's differ.
std::vector<std::vector<std::string>> differing_fields(
    const std::vector<isa::Instruction>& ours, const std::vector<isa::Instruction>& google) {
  std::vector<std::vector<std::string>> out;
  EXPECT_EQ(ours.size(), google.size());
  for (size_t k = 0; k < std::min(ours.size(), google.size()); ++k) {
    EXPECT_EQ(ours[k].opcode(), google[k].opcode()) << "word " << google[k].word_offset;
    std::vector<std::string> differ;
    if (ours[k].opcode() == google[k].opcode())
      for (const isa::FieldSpec& f : ours[k].spec->fields)
        if (f.name != "seq" && ours[k].raw(f) != google[k].raw(f))
          differ.push_back(std::string(f.name));
    out.push_back(differ);
  }
  return out;
}

// Words 176-212 (before the stride-2 first conv: west and north only) and 248-320 (after it, all
// four directions) are ours field for field, but the sequence numbers: the walks, records, tile
// groups, and the fences (on the receiving row and column, 0x111f, after the first; on all 16
// after the second, whose east and south counters are behind).
TEST(MeshHalo, GooglesFirstTwoExchangesFieldForField) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::vector<isa::Instruction> google = googles_words(dir, 176, 212);
  for (isa::Instruction& in : googles_words(dir, 248, 320)) google.push_back(std::move(in));

  Emitter e;
  MeshCounts counts;  // reset by Google's fence at word 175
  emit_mesh_halo(e, halo_of({56, 56, 56, 56}, {56, 56, 56, 56}, 3, {0, 1, 0, 1}, 0x7080, 128),
                 counts);
  MeshHalo first = halo_of({28, 28, 28, 28}, {28, 28, 28, 28}, 32);
  first.avdata = 1;  // the first conv (op 227) wrote the blocks in the same region
  emit_mesh_halo(e, first, counts);
  const std::vector<isa::Instruction> ours = emitted_exchange(e);

  const auto differ = differing_fields(ours, google);
  ASSERT_EQ(differ.size(), 20u);
  for (size_t k = 0; k < differ.size(); ++k)
    EXPECT_TRUE(differ[k].empty()) << "word " << google[k].word_offset << ": ours "
                                   << isa::print(ours[k]) << "\nGoogle's " << isa::print(google[k]);
}

// Words 1902-2094: 14x14 blocks of 4 + 3 + 4 + 3, 384 channels (six 16-word pieces), 32 moves.
// Every walk, address, tile group and fence field is ours; Google's first west and north moves
// on the tiles whose blocks are not 4 x 4 carry one more record pair (AVDATA again, and a record
// of id 0x01 without a value), which ours lack.
TEST(MeshHalo, GooglesUnevenExchangeFieldForFieldButOneRecordPair) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const std::vector<isa::Instruction> google = googles_words(dir, 1902, 2094);
  Emitter e;
  MeshCounts counts;  // what the exchange at words 1558-1654 left: three pieces west and north
  counts.in[1] = counts.in[2] = counts.out[1] = counts.out[2] = 3;
  MeshHalo h = halo_of({4, 3, 4, 3}, {4, 3, 4, 3}, 384);
  h.avdata = 53;
  emit_mesh_halo(e, h, counts);
  const std::vector<isa::Instruction> ours = emitted_exchange(e);

  const auto differ = differing_fields(ours, google);
  ASSERT_EQ(differ.size(), 33u);
  int extra = 0;
  for (size_t k = 0; k < differ.size(); ++k) {
    for (const std::string& f : differ[k]) {
      // Only records Google has where ours has none.
      ASSERT_TRUE(f.size() > 2 && f[0] == 's' && f[2] == '.')
          << "word " << google[k].word_offset << ": " << f;
      EXPECT_EQ(ours[k].value(f), 0) << "word " << google[k].word_offset << ": " << f;
    }
    extra += !differ[k].empty();
  }
  EXPECT_EQ(extra, 12);  // 6 west, 6 north
}

}  // namespace
}  // namespace tinycoral::compiler
