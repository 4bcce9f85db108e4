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

}  // namespace
}  // namespace tinycoral::chip
