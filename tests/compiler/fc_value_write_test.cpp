// The value write's stage alone (fc_value_write.h) with its vectors taken from narrow memory, as a
// chain's tail will take them from an earlier op's output pieces: one hand-built program, generated
// for position 0 and patched per position, on the virtual Edge TPU. After each run every byte of
// the two groups' rows in the lanes of positions up to the new one is the host's layout
// (fc_weight_rows of the layer with each position's vector as its column).
#include "compiler/fc_value_write.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "chip/virtual_edge_tpu.h"
#include "compiler/emitter.h"
#include "compiler/fc_codegen.h"
#include "compiler/program_parts.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {
namespace {

constexpr int kTile = 6;
constexpr int kInputFifo = 0x1e00;

TEST(FcValueWriteOnTheVirtualEdgeTpu, VectorsFromNarrowMemoryLandInTheHostsRows) {
  std::mt19937 random(29);
  // Two 64-output groups over 64 positions, both on one tile; random bytes everywhere first.
  FcLayer l;
  l.n = 128;
  l.k = 64;
  l.weights.resize(size_t(l.n) * size_t(l.k));
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 256) - 128);
  l.mult.assign(size_t(l.n), 0.001f);
  l.in_zp = 0;
  l.in_scale = 1.0f;
  l.out_zp = 128;
  l.out_scale = 1.0f;
  l.input_name = "x";
  l.output_name = "y";
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

}  // namespace
}  // namespace tinycoral::compiler
