// The scheduling rule of the virtual Edge TPU on small hand-built programs (docs/chip.md
// "Scheduling"): a read waits for a writer issued after it only when the instruction waits on a
// sync counter that counts that writer's writes; otherwise it takes the bytes in program order
// (what earlier fence regions left). Programs that wait on a counter nothing advances are
// deadlocks, and are reported as such.
#include <gtest/gtest.h>

#include <cstring>

#include "chip/program_builder.h"
#include "chip/virtual_edge_tpu.h"

namespace tinycoral::chip {
namespace {

using testing::ProgramBuilder;

constexpr uint32_t kOldPattern = 0x11223344, kNewPattern = 0x55667788;
constexpr uint32_t kRowUnit = 0x1000;  // a resident wide row (64-byte units)
constexpr uint32_t kMeshSouthIn = 5;   // tile counter MESH_SOUTH_IN (isa.md 2.12)
constexpr uint32_t kRingWrite = 16;    // tile counter RING_WRITE: a credit, counts no write
constexpr uint32_t kParameters = 1;    // PARAMETERS: counts wide (weight FIFO) writes only

// A mesh_n (0x17) inbound fill of narrow word 0 of tile 0 with `pattern`.
void fill_word0(ProgramBuilder& p, uint32_t pattern) {
  const size_t m = p.add(0x17);
  p.set(m, "tiles", 1);
  p.set(m, "i.inc0", 1);
  p.set(m, "fill_en", 1);
  p.set(m, "fill", pattern);
}

// A narrowToWide of narrow word 0 into the resident row at kRowUnit, waiting on `counter` (0 none).
size_t copy_word0(ProgramBuilder& p, uint32_t counter) {
  const size_t n = p.add(0x13);
  p.set(n, "tiles", 1);
  p.set(n, "n.inc0", 1);
  p.set(n, "w.addr", kRowUnit);
  p.set(n, "w.inc0", 1);
  if (counter != 0) {
    p.set(n, "sync.en0", 1);
    p.set(n, "sync.id", counter);
  }
  return n;
}

void fence(ProgramBuilder& p, uint32_t units, bool signal) {
  const size_t s = p.add(0x1a);
  p.set(s, "tiles", 1);
  p.set(s, "units", units);
  p.set(s, "signal", signal ? 1 : 0);
}

uint32_t row_word(const VirtualEdgeTpu& chip) {
  uint32_t v;
  std::memcpy(&v, chip.tile(0).wide.data() + size_t{kRowUnit} * 64, 4);
  return v;
}

// Region 1 writes the old pattern; region 2 copies the word, then a mesh fill issued after the copy
// overwrites it.
uint32_t copied_word(uint32_t counter) {
  ProgramBuilder p;
  fill_word0(p, kOldPattern);
  fence(p, 0x3ff, false);
  copy_word0(p, counter);
  fill_word0(p, kNewPattern);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  EXPECT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  return row_word(chip);
}

TEST(SchedulingRules, ReadWaitingOnNoCounterTakesWhatTheEarlierRegionLeft) {
  // bright_16x16 word 85 (sync RING_WRITE) reads the narrow words a wideToNarrow wrote before the
  // fence; nothing later in its region writes them, and the scalar core waits for it at a tokwait.
  EXPECT_EQ(copied_word(0), kOldPattern);
  EXPECT_EQ(copied_word(kRingWrite), kOldPattern);  // a credit counts no narrow write
  // looming word 290 waits on PARAMETERS (the credit of the wide FIFO it writes) and reads narrow
  // words that op 329, issued later, overwrites: the overwrite waits for the read.
  EXPECT_EQ(copied_word(kParameters), kOldPattern);
}

TEST(SchedulingRules, ReadWaitingOnACounterTakesTheLaterWritersBytes) {
  // The identity-row narrowToWide waits on MESH_SOUTH_IN, which the mesh_n inbound fills advance.
  EXPECT_EQ(copied_word(kMeshSouthIn), kNewPattern);
}

TEST(SchedulingRules, CounterNothingAdvancesBeforeATokenWaitIsADeadlock) {
  // The narrowToWide waits on MESH_SOUTH_IN, but no mesh move is issued before the scalar core
  // waits for the tile's token: on the chip it waits forever.
  ProgramBuilder p;
  const size_t copy = copy_word0(p, kMeshSouthIn);
  fence(p, 0x3c6, true);  // the drain before the token (units without op and the ring units)
  const size_t wait = p.add(0x24);
  p.set(wait, "tiles", 1);
  p.set(wait, "tokwait", 1);
  p.set(wait, "tmask", 1);
  fill_word0(p, kNewPattern);  // after the token wait: too late
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  const std::string f = chip.fault();
  EXPECT_NE(f.find("deadlock"), std::string::npos) << f;
  EXPECT_NE(f.find("tile 0 narrowToWide (n2w at word " + std::to_string(p.word_of(copy))),
            std::string::npos)
      << f;
  EXPECT_NE(f.find("issued later in its fence region"), std::string::npos) << f;
  EXPECT_NE(f.find("scalar core at word " + std::to_string(p.word_of(wait))), std::string::npos)
      << f;
}

}  // namespace
}  // namespace tinycoral::chip
