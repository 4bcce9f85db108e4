// Programs written to exhaust the virtual Edge TPU (issue 12): every unit instruction instance
// counts against the budget and their number is bounded, and a bitstream's size is, so a few
// hundred bytes can neither run forever nor grow memory without end.
#include <gtest/gtest.h>

#include "chip/program_builder.h"
#include "chip/virtual_edge_tpu.h"

namespace tinycoral::chip {
namespace {

using testing::ProgramBuilder;

// Forever: a fence dispatched to all 16 tiles, then a branch back to it (p0 is set first).
std::vector<uint8_t> fence_loop() {
  ProgramBuilder p;
  const size_t set_p0 = p.add(0x20);
  p.set(set_p0, "s_op", 0x29);
  const size_t fence = p.add(0x1a);
  p.set(fence, "tiles", 0xffff);
  p.set(fence, "units", 0x3ff);
  const size_t branch = p.add(0x22);
  p.set(branch, "offset", int64_t{p.word_of(fence)} - int64_t{p.word_of(branch)});
  return p.finish();
}

TEST(HostilePrograms, ALoopDispatchingToEveryTileStopsAtTheWorkItemLimit) {
  ChipOptions options;
  options.max_work_items = 16000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, fence_loop());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("more than 16000 unit instructions"), std::string::npos)
      << chip.fault();
  EXPECT_LE(chip.stats().instructions[static_cast<size_t>(UnitId::kTileSync)], 16000u);
}

TEST(HostilePrograms, WorkItemsCountAgainstTheInstructionBudget) {
  ChipOptions options;
  options.instruction_budget = 5000;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, fence_loop());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("instruction budget of 5000"), std::string::npos) << chip.fault();
  // Scalar instructions alone (two per pass) would have allowed 2500 passes, 40000 fences.
  EXPECT_LT(chip.stats().instructions[static_cast<size_t>(UnitId::kTileSync)], 5000u);
}

TEST(HostilePrograms, ABitstreamOverTheSizeLimitIsRefusedBeforeDecoding) {
  ChipOptions options;
  options.max_bitstream_bytes = 64;
  VirtualEdgeTpu chip(options);
  chip.receive(DmaTag::kInstructions, fence_loop());
  ASSERT_EQ(chip.advance(), RunState::kFaulted);
  EXPECT_NE(chip.fault().find("more than the limit of 64"), std::string::npos) << chip.fault();
}

}  // namespace
}  // namespace tinycoral::chip
