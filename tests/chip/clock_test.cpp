// The virtual Edge TPU's clock (src/chip/clock.h) on small hand-built programs, with the cycles
// worked out by hand from the model's stated costs: one cycle per scalar instruction, an NLU load
// takes ClockCosts::nlu_load cycles, a unit runs its queue one instruction after the other, tiles
// run side by side, and a scalar fence waits for the tiles it names.
#include "chip/clock.h"

#include <gtest/gtest.h>

#include "chip/program_builder.h"
#include "chip/virtual_edge_tpu.h"

namespace tinycoral::chip {
namespace {

using testing::ProgramBuilder;

constexpr uint64_t kNlu = ClockCosts{}.nlu_load;

// Runs a program to its end and returns the modeled cycles.
uint64_t cycles_of(ProgramBuilder& p) {
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  EXPECT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  EXPECT_EQ(chip.stats().programs_completed, 1u) << chip.fault();
  return chip.stats().clock.cycles;
}

void nlu_load(ProgramBuilder& p, uint32_t tiles) {
  const size_t i = p.add(0x19);
  p.set(i, "tiles", tiles);
}

TEST(Clock, ScalarCoreTakesOneCyclePerInstruction) {
  // 0x3e, five bundles, halt: 7 instructions (the halt ends the program).
  ProgramBuilder p;
  for (int k = 0; k < 5; ++k) p.movi(1, k);
  EXPECT_EQ(cycles_of(p), 7u);
}

TEST(Clock, OneUnitRunsItsInstructionsOneAfterTheOther) {
  // Issued at cycles 1 and 2 to the same tile's NLU: the second starts when the first ends.
  ProgramBuilder p;
  nlu_load(p, 1);
  nlu_load(p, 1);
  EXPECT_EQ(cycles_of(p), 1 + 2 * kNlu);
}

TEST(Clock, TilesRunSideBySide) {
  // One instruction on two tiles, then one more on tile 1: tile 0 ends at 1 + kNlu, tile 1 at
  // 1 + 2 kNlu (its unit is busy when the second one is issued at cycle 2).
  ProgramBuilder p;
  nlu_load(p, 0b11);
  EXPECT_EQ(cycles_of(p), 1 + kNlu);
  ProgramBuilder q;
  nlu_load(q, 0b01);
  nlu_load(q, 0b10);
  EXPECT_EQ(cycles_of(q), 2 + kNlu);  // different tiles: the second starts when issued
  ProgramBuilder r;
  nlu_load(r, 0b11);
  nlu_load(r, 0b10);
  EXPECT_EQ(cycles_of(r), 1 + 2 * kNlu);
}

TEST(Clock, ScalarFenceWaitsForTheTilesItNames) {
  // NLU load issued at cycle 1 ends at 1 + kNlu; the fence (issued at cycle 2) lets the scalar
  // core go on at 1 + kNlu, the fence itself takes that cycle, then 3 bundles and the halt.
  ProgramBuilder p;
  nlu_load(p, 1);
  const size_t fence = p.add(0x24);
  p.set(fence, "tokwait", 1);
  p.set(fence, "tmask", 1);
  p.set(fence, "tiles", 0xffff);
  for (int k = 0; k < 3; ++k) p.movi(1, k);
  EXPECT_EQ(cycles_of(p), 1 + kNlu + 1 + 3 + 1);
  // A fence on another tile does not wait: the scalar core ends first, the tile later.
  ProgramBuilder q;
  nlu_load(q, 1);
  const size_t other = q.add(0x24);
  q.set(other, "tokwait", 1);
  q.set(other, "tmask", 2);
  q.set(other, "tiles", 0xffff);
  for (int k = 0; k < 3; ++k) q.movi(1, k);
  EXPECT_EQ(cycles_of(q), 1 + kNlu);
}

TEST(Clock, RingConsumerStreamsAlongsideItsProducer) {
  // 40 rows from tile 0 to tile 1. The consumer is issued at cycle 1, the producer at 2: the
  // producer runs 2..170 (8 + 40 x 256 / 64 cycles); its first row arrives at 2 + 8 + 4 = 14, its
  // last at 170. The consumer (the same cost) starts at 14 and ends at 14 + 168 = 182, not after
  // the producer ended (170 + 168). The fence after the producer ends at 171.
  ProgramBuilder p;
  const size_t cons = p.add(0x11);
  p.set(cons, "tiles", 1u << 1);
  p.set(cons, "addr", 8312);
  p.set(cons, "inc0", 1);
  p.set(cons, "cnt0", 39);
  p.set(cons, "mode", 3);
  const size_t prod = p.add(0x10);
  p.set(prod, "tiles", 1);
  p.set(prod, "addr", 8000);
  p.set(prod, "inc0", 1);
  p.set(prod, "cnt0", 39);
  p.set(prod, "dest", 1u << 1);
  const size_t fence = p.add(0x1a);  // closes tile 0's region: the producer reads resident rows
  p.set(fence, "tiles", 1);
  p.set(fence, "units", 0x3ff);
  const ClockCosts c;
  const uint64_t cost = c.transfer_start + 40 * 256 / c.ring_bytes_per_cycle;
  const uint64_t first = 2 + c.transfer_start + 256 / c.ring_bytes_per_cycle;
  EXPECT_EQ(cycles_of(p), first + cost);
}

// A parameter broadcast (the compiler's turns from an owner tile, docs/compiler.md "Turns from an
// owner tile over the ring"): rows from tile 9 to M tiles' consumers, each consumer streaming
// alongside the one producer, so the time is that of one transfer whatever M (the model has no
// shared ring bandwidth): 2 + 8 + 4 for the first row, then the consumer's 8 + 4 N.
uint64_t broadcast_cycles(int rows, uint32_t dest) {
  ProgramBuilder p;
  const size_t cons = p.add(0x11);
  p.set(cons, "tiles", dest);
  p.set(cons, "inc0", 1);
  p.set(cons, "cnt0", static_cast<uint64_t>(rows - 1));
  const size_t prod = p.add(0x10);
  p.set(prod, "tiles", 1u << 9);
  p.set(prod, "inc0", 1);
  p.set(prod, "cnt0", static_cast<uint64_t>(rows - 1));
  p.set(prod, "pcfg", 4);
  p.set(prod, "dest", dest);
  const size_t fence = p.add(0x1a);
  p.set(fence, "tiles", 1u << 9);
  p.set(fence, "units", 0x3ff);
  return cycles_of(p);
}

TEST(Clock, ABroadcastToManyTilesTakesAsLongAsToOne) {
  const ClockCosts c;
  for (const int rows : {1, 40, 1807}) {
    const uint64_t first = 2 + c.transfer_start + 256 / c.ring_bytes_per_cycle;
    const uint64_t cost = c.transfer_start + uint64_t(rows) * 256 / c.ring_bytes_per_cycle;
    EXPECT_EQ(broadcast_cycles(rows, 1u << 1), first + cost) << rows << " rows";
    EXPECT_EQ(broadcast_cycles(rows, 0xfdff), first + cost) << rows << " rows to 15 tiles";
  }
}

TEST(Clock, ProgramsAddUpAndEachIsReportedOnItsOwn) {
  VirtualEdgeTpu chip;
  for (int n : {2, 5}) {
    ProgramBuilder p;
    for (int k = 0; k < n; ++k) p.movi(1, k);
    chip.receive(DmaTag::kInstructions, p.finish());
    ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  }
  EXPECT_EQ(chip.stats().clock.last_program_cycles, 7u);
  EXPECT_EQ(chip.stats().clock.cycles, 4u + 7u);
}

TEST(Clock, WorkCostsFollowTheStatedRates) {
  const ClockCosts c;
  WorkAmount op;
  op.op_steps = 100 * c.steps_per_cycle;
  op.macs = uint64_t{c.macs_per_cycle} * 300;  // the weight bytes are the bound: 300 cycles
  EXPECT_EQ(work_cycles(c, ClockUnit::kMac, op), c.op_start + 300);
  op.macs = 16 * op.op_steps;  // depthwise diagonals (16 bytes a step): the step rate is the bound
  EXPECT_EQ(work_cycles(c, ClockUnit::kMac, op), c.op_start + 100);
  // A full 256-byte row costs more than a cycle, a 16-byte diagonal less: the point of the rates.
  EXPECT_GT(256u, c.macs_per_cycle);
  EXPECT_LT(16u, c.macs_per_cycle);
  WorkAmount ring;
  ring.bytes = 10 * 256;
  EXPECT_EQ(work_cycles(c, ClockUnit::kRing, ring), c.transfer_start + 40);
  WorkAmount mesh;
  mesh.mesh_words = 33;
  EXPECT_EQ(work_cycles(c, ClockUnit::kMesh, mesh), c.transfer_start + 33);
}

TEST(Clock, StreamReaderStartsAtItsFirstPacketAndEndsAfterItsLast) {
  ChipClock clock;
  const ClockCosts& c = clock.costs();
  // 10 packets sent evenly from cycle 100 to 200; a reader takes 4, then 6.
  clock.ring(3, 0).push(10, 100, 200);
  clock.add_work();
  clock.add_work();
  WorkAmount four;
  four.bytes = 4 * 256;  // 8 + 16 cycles
  auto [start, finish] =
      clock.run(0, 0, 3 * 16 + 3, ClockUnit::kRing, four, clock.ring(3, 0).take(4), 3);
  EXPECT_EQ(start, 100u);
  EXPECT_EQ(finish, 140u + c.transfer_start);  // the 4th packet arrives at 100 + 100 * 4 / 10
  WorkAmount six;
  six.bytes = 6 * 256;
  std::tie(start, finish) =
      clock.run(1, 0, 3 * 16 + 3, ClockUnit::kRing, six, clock.ring(3, 0).take(6), 3);
  EXPECT_EQ(start, 140u + c.transfer_start);  // its unit was busy until then
  // Its own cost would end at 148 + 32 = 180, but the last packet arrives only at 200.
  EXPECT_EQ(finish, 200u + c.transfer_start);
  EXPECT_EQ(clock.latest(3), finish);
  EXPECT_EQ(clock.latest(2), 0u);
}

TEST(Clock, FifoConsumerLetsItsOpDrainTheStreamAsItArrives) {
  // A consumer fills tile 2's weight FIFO from cycle 10 to 1010. What waits for it may start at its
  // first row (cycle 30); the FIFO op after it (its own cost 100 cycles) cannot end before the
  // stream's last row: at 1010 + transfer_start, not 1010 + 100.
  ChipClock clock;
  const ClockCosts& c = clock.costs();
  clock.add_work();
  clock.add_work();
  WorkAmount stream;
  stream.bytes = (1000 - c.transfer_start) * uint64_t{c.ring_bytes_per_cycle};
  const auto [start, finish] = clock.run(0, 10, 2 * 16 + 4, ClockUnit::kRing, stream, {0, 0}, 2);
  ASSERT_EQ(start, 10u);
  ASSERT_EQ(finish, 1010u);
  clock.feed_fifo(0, 2, 30);
  EXPECT_EQ(clock.finish_of(0), 30u);
  EXPECT_EQ(clock.latest(2), 1010u);  // fences still wait for the whole stream
  WorkAmount op;
  op.op_steps = (100 - c.op_start) * c.steps_per_cycle;
  const uint64_t end = clock.take_fifo_end(2);
  EXPECT_EQ(end, 1010u);
  EXPECT_EQ(clock.take_fifo_end(2), 0u);  // taken by one op only
  const auto [op_start, op_finish] =
      clock.run(1, clock.finish_of(0), 2 * 16, ClockUnit::kMac, op, {0, end}, 2);
  EXPECT_EQ(op_start, 30u);
  EXPECT_EQ(op_finish, 1010u + c.transfer_start);
}

}  // namespace
}  // namespace tinycoral::chip
