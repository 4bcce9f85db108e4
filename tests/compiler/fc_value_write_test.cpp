// The value write's stage alone (fc_value_write.h) with its vectors taken from narrow memory, as a
// chain's tail will take them from an earlier op's output pieces: one hand-built program, generated
// for position 0 and patched per position, on the virtual Edge TPU. After each run every byte of
// the two groups' rows in the lanes of positions up to the new one is the host's layout
// (fc_weight_rows of the layer with each position's vector as its column). Then B.3's form: v~'s
// 64-channel pieces on their own tiles, broadcast side by side to the cache groups' tiles, each
// group's vector taken at value_vectors_side_by_side's byte.
#include "compiler/fc_value_write.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/ffn_parts.h"
#include "compiler/program_parts.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {
namespace {

constexpr int kTile = 6;
constexpr int kInputFifo = 0x1e00;

// A value cache's layer as the write sees it: n outputs (64 a head group) over k positions, random
// bytes everywhere (what an earlier sequence left), the sum's quantization beside the point.
FcLayer cache_layer(std::mt19937& random, int n, int k) {
  FcLayer l;
  l.n = n;
  l.k = k;
  l.weights.resize(size_t(l.n) * size_t(l.k));
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 256) - 128);
  l.mult.assign(size_t(l.n), 0.001f);
  l.in_zp = 0;
  l.in_scale = 1.0f;
  l.out_zp = 128;
  l.out_scale = 1.0f;
  l.input_name = "x";
  l.output_name = "y";
  return l;
}

TEST(FcValueWriteOnTheVirtualEdgeTpu, VectorsFromNarrowMemoryLandInTheHostsRows) {
  std::mt19937 random(29);
  // Two 64-output groups over 64 positions, both on one tile; random bytes everywhere first.
  FcLayer l = cache_layer(random, 128, 64);
  FcPlacement at;
  at.tiles = {kTile, kTile};
  at.param_units = {0, 72};
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(l, at), {});

  FcValueWrite w = fc_value_write(l, at, {512, 516}, 0);
  w.narrow_at = 0x1000;
  w.from_byte = {4, 100};  // word-aligned, not at a 64-byte piece
  Emitter e;
  input_address(e, "x");
  host_pop(e, 256);
  host_to_narrow(e, tile_bit(kTile), kInputFifo, 0, 256, 0);
  tile_fence(e, "units=0x3ff");
  tile_fence(e, "counters=0x1ffff units=0x3ff");
  emit_value_copies(e, w);
  emit_value_vectors_from_narrow(e, w);
  emit_value_landings(e, w);
  const std::vector<isa::EncodedField> marks = e.marks();
  container::Bitstream program = e.finish();
  ASSERT_EQ(marks.size(), size_t(4));

  for (int pos = 0; pos < 10; ++pos) {
    SCOPED_TRACE("position " + std::to_string(pos));
    std::vector<uint8_t> input(256);
    for (uint8_t& b : input) b = static_cast<uint8_t>(random());
    for (int g = 0; g < 2; ++g)
      for (int c = 0; c < 64; ++c)
        l.weights[size_t(64 * g + c) * size_t(l.k) + size_t(pos)] =
            static_cast<int8_t>(int{input[size_t(w.from_byte[size_t(g)] + c)]} - 128);
    const std::vector<int64_t> fields = fc_value_write_fields(w, pos);
    for (size_t i = 0; i < marks.size(); ++i)
      isa::write_field(program.data, marks[i].offset_bit, marks[i].width, uint64_t(fields[i]));
    chip.receive(chip::DmaTag::kInstructions, program.data);
    ASSERT_EQ(chip.advance(), chip::RunState::kWaiting) << chip.fault();
    chip.receive(chip::DmaTag::kInput, input);
    ASSERT_EQ(chip.advance(), chip::RunState::kIdle) << chip.fault();
    const auto& wide = chip.tile(kTile).wide;
    for (int kq = 0; kq <= pos / 4; ++kq) {
      const FcRowWrite host = fc_weight_rows(l, at, kq);
      for (size_t g = 0; g < host.rows.size(); ++g)
        for (int c = 0; c < 64; ++c)
          for (int b = 0; b < 4 && 4 * kq + b <= pos; ++b)
            ASSERT_EQ(int(wide[size_t(64 * host.rows[g].unit + 4 * c + b)]),
                      int(host.bytes[256 * g + size_t(4 * c + b)]))
                << "group " << g << ", channel " << c << ", position " << 4 * kq + b;
    }
  }
}

// v~ of kv_dim channels in 64-channel pieces, piece i on tile 2 + i at narrow byte 64 i (as a
// chain's follower leaves its groups), every piece broadcast to the cache groups' tiles (two
// groups a tile from tile 6) from narrow byte kBase, then written into the cache from the bytes
// value_vectors_side_by_side names. Over 10 positions every channel of a head in every group's
// rows is its kv head's v~ channel: heads of 48 straddling the pieces (rand15M's case, kv heads
// shared by two heads), heads of 80 in two groups each, and heads of 8 over one piece (rand_gqa's).
TEST(FcValueWriteOnTheVirtualEdgeTpu, PiecesBroadcastSideBySideGiveEachHeadItsKvHeadsVector) {
  struct Shape {
    int heads, kv_heads, head_size;
  };
  constexpr int kBase = 0x400, kQuads = 0x1000, kPositions = 64;
  std::mt19937 random(31);
  for (const Shape s : {Shape{4, 2, 48}, Shape{4, 2, 80}, Shape{8, 4, 8}}) {
    SCOPED_TRACE(std::to_string(s.heads) + " heads over " + std::to_string(s.kv_heads) + " of " +
                 std::to_string(s.head_size));
    const int kv_dim = s.kv_heads * s.head_size, pieces = fc_groups(kv_dim);
    const int head_groups = fc_groups(s.head_size), groups = s.heads * head_groups;
    ASSERT_LE(pieces, 4);
    ASSERT_LE(groups, 8);
    const ValueVectorsSideBySide side =
        value_vectors_side_by_side(s.heads, s.kv_heads, s.head_size, kBase);
    ASSERT_EQ(side.from_byte.size(), size_t(groups));
    ASSERT_LE(side.end, kQuads);  // the pieces and windows below the quads
    for (const int b : side.from_byte) ASSERT_LE(b + 64, side.end);

    const FcLayer l = cache_layer(random, 64 * groups, kPositions);
    FcPlacement at;
    std::vector<int> staging;
    uint32_t cache_tiles = 0;
    for (int g = 0; g < groups; ++g) {
      at.tiles.push_back(6 + g / 2);
      at.param_units.push_back(72 * (g % 2));
      staging.push_back(512 + 4 * (g % 2));
      cache_tiles |= tile_bit(6 + g / 2);
    }
    chip::VirtualEdgeTpu chip;
    chip::testing::run_executable(chip, fc_caching(l, at), {});

    FcValueWrite w = fc_value_write(l, at, staging, 0);
    w.narrow_at = kQuads;
    w.from_byte = side.from_byte;
    uint32_t piece_tiles = 0;
    std::vector<std::pair<int, int>> from;
    for (int i = 0; i < pieces; ++i) {
      piece_tiles |= tile_bit(2 + i);
      from.emplace_back(2 + i, 16 * i);
    }
    Emitter e;
    input_address(e, "x");
    host_pop(e, 256);
    host_to_narrow(e, piece_tiles, kInputFifo, 0, 256, 0);
    tile_fence(e, "units=0x3ff");
    tile_fence(e, "counters=0x1ffff units=0x3ff");
    emit_value_copies(e, w);
    int ordinal = 0;
    ffn_broadcast(e, cache_tiles, from, ordinal, kBase);
    emit_value_vectors_from_narrow(e, w);
    emit_value_landings(e, w);
    const std::vector<isa::EncodedField> marks = e.marks();
    container::Bitstream program = e.finish();
    ASSERT_EQ(marks.size(), size_t(2 * groups));

    std::vector<std::vector<uint8_t>> inputs;
    for (int pos = 0; pos < 10; ++pos) {
      SCOPED_TRACE("position " + std::to_string(pos));
      // v~ (stored + 128) in the input's first kv_dim bytes; the rest plays v's padding outputs.
      std::vector<uint8_t>& input = inputs.emplace_back(256);
      for (uint8_t& b : input) b = static_cast<uint8_t>(random());
      const std::vector<int64_t> fields = fc_value_write_fields(w, pos);
      for (size_t i = 0; i < marks.size(); ++i)
        isa::write_field(program.data, marks[i].offset_bit, marks[i].width, uint64_t(fields[i]));
      chip.receive(chip::DmaTag::kInstructions, program.data);
      ASSERT_EQ(chip.advance(), chip::RunState::kWaiting) << chip.fault();
      chip.receive(chip::DmaTag::kInput, input);
      ASSERT_EQ(chip.advance(), chip::RunState::kIdle) << chip.fault();
      for (int g = 0; g < groups; ++g) {
        const int h = g / head_groups, j = g % head_groups;
        const int kv = h / (s.heads / s.kv_heads);
        const auto& wide = chip.tile(6 + g / 2).wide;
        for (int t = 0; t <= pos; ++t) {
          const int row = w.cache_units[size_t(g)] + 4 * (t / 4);
          for (int c = 0; c < 64 && 64 * j + c < s.head_size; ++c)
            ASSERT_EQ(int(wide[size_t(64 * row + 4 * c + t % 4)]),
                      int(inputs[size_t(t)][size_t(s.head_size * kv + 64 * j + c)]))
                << "head " << h << ", group " << j << ", channel " << c << ", position " << t;
        }
      }
    }
  }
}

// Staging rows the write cannot keep: two groups' in one row, one over a group's bias row (a
// layer with a bias has 12 aux units, not 8), and a vector read past narrow memory's end.
TEST(FcValueWrite, StagingRowsAndVectorsOutsideTheirRoomAreRefused) {
  std::mt19937 random(31);
  FcLayer l = cache_layer(random, 128, 64);
  FcPlacement at;
  at.tiles = {kTile, kTile};
  at.param_units = {0, 512};
  EXPECT_NO_THROW(fc_value_write(l, at, {256, 260}, 0));
  EXPECT_THROW(fc_value_write(l, at, {256, 256}, 0), Error);  // one row for both groups
  EXPECT_THROW(fc_value_write(l, at, {516, 260}, 0), Error);  // in group 1's weights
  // With a bias, group 1's first aux row at its base 512 is neither weights nor 8 units before.
  l.bias.assign(size_t(l.n), 0);
  EXPECT_THROW(fc_value_write(l, at, {512, 260}, 0), Error);
  EXPECT_NO_THROW(fc_value_write(l, at, {508, 260}, 0));
  at.param_units = {0, 1024};
  FcValueWrite w = fc_value_write(l, at, {512, 516}, 0);
  w.from_byte = {0, 196608 - 60};  // the second vector's 64 bytes run past the end
  Emitter e;
  EXPECT_THROW(emit_value_vectors_from_narrow(e, w), Error);
}

TEST(FcValueWrite, SideBySideVectorsAreRefusedWhereTheyCannotBeWords) {
  EXPECT_THROW(value_vectors_side_by_side(4, 2, 50, 0x400), Error);  // head of 50 channels
  EXPECT_THROW(value_vectors_side_by_side(4, 2, 48, 0x402), Error);  // base off a word
  EXPECT_THROW(value_vectors_side_by_side(4, 3, 48, 0x400), Error);  // heads not over kv heads
}

}  // namespace
}  // namespace tinycoral::compiler
