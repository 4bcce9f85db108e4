// Programs written to exhaust the virtual Edge TPU (issue 12): every unit instruction instance
// counts against the budget and their number is bounded, and a bitstream's size is, so a few
// hundred bytes can neither run forever nor grow memory without end.
#include <gtest/gtest.h>

#include "chip/program_builder.h"
#include "chip/virtual_edge_tpu.h"

namespace tinycoral::chip {
namespace {

TEST(HostilePrograms, ALoopDispatchingToEveryTileStopsAtTheWorkItemLimit) {
  ChipOptions options;
  options.max_work_items = 16000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, testing::fence_loop_forever());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("more than 16000 unit instructions"), std::string::npos)
      << chip.fault();
  EXPECT_LE(chip.stats().instructions[static_cast<size_t>(UnitId::kTileSync)], 16000u);
}

TEST(HostilePrograms, WorkItemsCountAgainstTheInstructionBudget) {
  ChipOptions options;
  options.instruction_budget = 5000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, testing::fence_loop_forever());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("instruction budget of 5000"), std::string::npos) << chip.fault();
  // Scalar instructions alone (two per pass) would have allowed 2500 passes, 40000 fences.
  EXPECT_LT(chip.stats().instructions[static_cast<size_t>(UnitId::kTileSync)], 5000u);
}

TEST(HostilePrograms, ABitstreamOverTheSizeLimitIsRefusedBeforeDecoding) {
  ChipOptions options;
  options.max_bitstream_bytes = 64;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, testing::fence_loop_forever());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("more than the limit of 64"), std::string::npos) << chip.fault();
}

// Every DMA descriptor the scalar core issues waits as an event until the host takes it: a loop
// issuing them without end stops at the bound instead of growing memory.
TEST(HostilePrograms, DescriptorsTheHostNeverTakesStopAtTheEventLimit) {
  testing::ProgramBuilder p;
  p.movi(30, 1);  // tag 1: "send me these bytes", at address 0, length 0
  p.movi(31, 0);
  const size_t loop = p.add(0x23);
  p.set(loop, "count", 3000);
  p.set(loop, "body", 5);  // the descriptor's four words and its issue
  p.descriptor(31, 30, 31);
  ChipOptions options;
  options.max_pending_events = 2000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, p.finish());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("more than 2000 DMA descriptors the host has not taken"),
            std::string::npos)
      << chip.fault();
}

}  // namespace
}  // namespace tinycoral::chip
