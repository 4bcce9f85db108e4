// The virtual Edge TPU on small hand-built programs whose effect is known exactly: the scalar core
// (ALU, hardware loops, descriptors, events), the host-to-host data path through every DMA unit,
// and the errors a malformed program must stop with (budget, deadlock, unknown op class, bounds).
#include "chip/virtual_edge_tpu.h"

#include <gtest/gtest.h>

#include <numeric>

#include "chip/program_builder.h"
#include "chip/round_trip_program.h"

namespace tinycoral::chip {
namespace {

using testing::ProgramBuilder;
using testing::round_trip_program;

void interrupt(ProgramBuilder& p, uint32_t length_reg) {
  p.movi(30, 4);  // tag 4 = scalar-core interrupt 0
  p.movi(31, 0);
  p.descriptor(length_reg, 30, 31);
}

TEST(ScalarCore, HardwareLoopRunsItsBodyCountTimes) {
  ProgramBuilder p;
  p.movi(1, 0);
  const size_t loop = p.add(0x23);
  p.set(loop, "count", 5);
  p.set(loop, "body", 1);  // the next word
  p.addi(1, 1, 3);
  interrupt(p, 1);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  const auto event = chip.take_event();
  ASSERT_TRUE(event);
  EXPECT_EQ(event->tag, 4);
  EXPECT_EQ(event->length, 15u);  // 5 passes of += 3
  EXPECT_EQ(chip.stats().programs_completed, 1u);
}

TEST(ScalarCore, PredicatedBundleRunsOnlyWhenItsPredicateMatches) {
  ProgramBuilder p;
  p.movi(1, 7);
  const size_t cmp = p.add(0x20);  // p2 = (s1 <s 0) -> false
  p.set(cmp, "s_op", 0x2c);
  p.set(cmp, "s_x", 2);
  p.set(cmp, "s_y", 1);
  const size_t skipped = p.addi(1, 1, 100);  // [p2 == 1] s1 += 100: skipped
  p.set(skipped, "gate", 1);
  p.set(skipped, "pred_reg", 2);
  p.set(skipped, "pred_pol", 1);
  const size_t taken = p.addi(1, 1, 1);  // [p2 == 0] s1 += 1: runs
  p.set(taken, "gate", 1);
  p.set(taken, "pred_reg", 2);
  interrupt(p, 1);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  const auto event = chip.take_event();
  ASSERT_TRUE(event);
  EXPECT_EQ(event->length, 8u);
}

// The memory-slot copy loop of the SSD's last segment (words 7030-7035): a load with
// post-increment, then a store with post-increment (v_op 6, v_offset 0x28 = register 8 + the
// increment bit) moves scalar-memory words and leaves both address registers past the block.
TEST(ScalarCore, StoreWithPostIncrementCopiesABlock) {
  ProgramBuilder p;
  p.movi(1, 100);
  for (uint32_t k = 0; k < 3; ++k) {  // smem[100 + k] = 11 (k + 1)
    p.movi(2, 11 * (k + 1));
    p.add(0x20, {{"v_op", 4}, {"v_offset", 1}, {"vs_reg", 2}});
    p.addi(1, 1, 1);
  }
  p.movi(7, 100);
  p.movi(8, 200);
  const size_t loop = p.add(0x23);
  p.set(loop, "count", 3);
  p.set(loop, "body", 3);
  p.add(0x20, {{"enable_vector", 3}, {"vs_reg_v1", 6}, {"imm_size", 0x27}});  // s6 = smem[s7++]
  p.add(0x20);                                                                // nop
  p.add(0x20, {{"v_op", 6}, {"v_offset", 0x28}, {"vs_reg", 6}});              // smem[s8++] = s6
  p.movi(13, 202);
  p.add(0x20, {{"enable_vector", 2}, {"vs_reg_v1", 12}, {"imm_size", 13}});  // s12 = smem[s13]
  interrupt(p, 12);
  interrupt(p, 8);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  const auto copied = chip.take_event(), end = chip.take_event();
  ASSERT_TRUE(copied && end);
  EXPECT_EQ(copied->length, 33u);  // the third word arrived at 202
  EXPECT_EQ(end->length, 203u);    // the store register advanced once per pass
}

// The Keras LSTM's time-loop bookkeeping (words 746-807): a store to an immediate word address
// (v_op 2, address v_cmd:v_offset = 0xf:0xfe), a load from one (memory slot mode 1, imm_size
// 0xffe), and branches without condition bits, always taken, beside the p0-conditional form.
TEST(ScalarCore, ImmediateAddressLoadStoreAndUnconditionalBranch) {
  ProgramBuilder p;
  p.movi(2, 77);
  p.add(0x20,
        {{"v_op", 2}, {"v_cmd", 0xf}, {"v_offset", 0xfe}, {"vs_reg", 2}});     // smem[0xffe] = s2
  p.add(0x20, {{"enable_vector", 1}, {"vs_reg_v1", 4}, {"imm_size", 0xffe}});  // s4 = smem[0xffe]
  p.add(0x20, {{"s_op", 0x29}, {"s_x", 0}, {"s_y", 4}});  // p0 = (s4 == 0): false
  const size_t conditional = p.add(0x22);                 // while p0: not taken
  p.set(conditional, "k12", 1);
  p.set(conditional, "k16", 1);
  p.set(conditional, "offset", 2);
  p.addi(4, 4, 1000);                 // runs: 1077
  const size_t always = p.add(0x22);  // no condition bits: taken although p0 is false
  p.set(always, "offset", 2);
  p.addi(4, 4, 100000);  // skipped
  interrupt(p, 4);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  const auto event = chip.take_event();
  ASSERT_TRUE(event);
  EXPECT_EQ(event->length, 1077u);
}

TEST(DataPath, BytesTravelThroughEveryDmaUnitUnchanged) {
  std::vector<uint8_t> input(32);
  std::iota(input.begin(), input.end(), uint8_t{7});
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, round_trip_program(100));
  EXPECT_EQ(chip.advance(), RunState::kWaiting);  // the pop waits for the host
  chip.receive(DmaTag::kInput, input);
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  const auto output = chip.take_output();
  ASSERT_TRUE(output);
  EXPECT_EQ(*output, input);
  EXPECT_TRUE(chip.take_event());
  EXPECT_EQ(
      std::vector<uint8_t>(chip.tile(0).narrow.begin() + 400, chip.tile(0).narrow.begin() + 432),
      input);
  const ChipStats s = chip.stats();
  EXPECT_EQ(s.instructions[static_cast<size_t>(UnitId::kInfeed)], 1u);
  EXPECT_EQ(s.instructions[static_cast<size_t>(UnitId::kOutfeed)], 1u);
  EXPECT_EQ(s.host_out_bytes, 32u);
}

TEST(DataPath, TraceRecordsEveryExecutedInstructionWithTileAndUnit) {
  struct Collect : TraceSink {
    std::vector<TraceRecord> records;
    void record(const TraceRecord& r) override { records.push_back(r); }
  } sink;
  ChipOptions options;
  options.trace = &sink;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, round_trip_program(100));
  chip.receive(DmaTag::kInput, std::vector<uint8_t>(32, 1));
  ASSERT_EQ(chip.advance(), RunState::kIdle) << chip.fault();
  bool saw_w2n = false;
  for (const auto& r : sink.records)
    if (r.opcode == 0x14 && std::string(r.unit) != "scalar") {
      saw_w2n = true;
      EXPECT_EQ(r.tile, 0);
      EXPECT_STREQ(r.unit, "wideToNarrow");
    }
  EXPECT_TRUE(saw_w2n);
}

TEST(Errors, OutOfRangeNarrowAddressStopsWithAnErrorNamingTheInstruction) {
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, round_trip_program(0xfff0));
  chip.receive(DmaTag::kInput, std::vector<uint8_t>(32, 1));
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("outside"), std::string::npos) << chip.fault();
  EXPECT_NE(chip.fault().find("tile 0"), std::string::npos) << chip.fault();
}

TEST(Errors, LongHardwareLoopOfBundlesStopsAtTheInstructionBudget) {
  ProgramBuilder p;
  p.movi(1, 0);
  const size_t loop = p.add(0x23);
  p.set(loop, "count", 60000);
  p.set(loop, "body", 1);  // the next word, a bundle
  p.addi(1, 1, 1);
  interrupt(p, 1);
  ChipOptions options;
  options.instruction_budget = 1000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("instruction budget of 1000"), std::string::npos) << chip.fault();
  EXPECT_GT(chip.stats().instructions[static_cast<size_t>(UnitId::kScalar)], 1000u);
}

TEST(Errors, RunawayLoopStopsAtTheInstructionBudget) {
  ProgramBuilder p;
  const size_t set_p0 = p.add(0x20);  // p0 = (s0 == 0)
  p.set(set_p0, "s_op", 0x29);
  const size_t branch = p.add(0x22);  // branch to itself while p0
  p.set(branch, "offset", 0);
  ChipOptions options;
  options.instruction_budget = 100000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("instruction budget"), std::string::npos) << chip.fault();
}

TEST(Errors, ConsumerWithoutProducerIsReportedAsDeadlock) {
  ProgramBuilder p;
  const size_t cons = p.add(0x11);
  p.set(cons, "tiles", 1u << 3);
  p.set(cons, "addr", 8312);
  p.set(cons, "inc0", 1);
  const uint32_t word = p.word_of(cons);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  const std::string f = chip.fault();
  EXPECT_NE(f.find("deadlock"), std::string::npos) << f;
  EXPECT_NE(f.find("tile 3 ringConsumer0"), std::string::npos) << f;
  EXPECT_NE(f.find("at word " + std::to_string(word)), std::string::npos) << f;
  EXPECT_NE(f.find("ring packets"), std::string::npos) << f;
}

TEST(Errors, UnknownOpClassStopsWithItsFields) {
  ProgramBuilder p;
  const size_t op = p.add(0x01);
  p.set(op, "tiles", 1);
  p.set(op, "dp_mode", 7);  // no known class
  p.set(op, "cfg0", 0x1ff);
  const uint32_t word = p.word_of(op);
  VirtualEdgeTpu chip;
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  const std::string f = chip.fault();
  EXPECT_NE(f.find("unknown op class"), std::string::npos) << f;
  EXPECT_NE(f.find("dp_mode 7"), std::string::npos) << f;
  EXPECT_NE(f.find("cfg0 0x1ff"), std::string::npos) << f;
  EXPECT_NE(f.find("at word " + std::to_string(word)), std::string::npos) << f;
}

TEST(Errors, TruncatedBitstreamIsRefusedAndResetRecovers) {
  VirtualEdgeTpu chip;
  const std::vector<uint8_t> junk(20, 0xff);
  chip.receive(DmaTag::kInstructions, junk);
  EXPECT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("bitstream 0"), std::string::npos) << chip.fault();
  chip.reset();
  EXPECT_EQ(chip.fault(), "");
  EXPECT_EQ(chip.advance(), RunState::kIdle);
}

}  // namespace
}  // namespace tinycoral::chip
