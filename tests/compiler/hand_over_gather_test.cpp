// Correct by simulation: all-gather hand-overs (hand_over's gathered schedule). A 3x3 conv to 1024
// channels is split by output groups over tiles, the depthwise layer after it too (the search
// picks 8 tiles of 128 channels), and the 1x1 conv after that reads every channel: each of its
// tiles takes a slice from each sender. In rounds (one transfer per receiver each) the program took
// 19 ring consumers, gathered 11: a receiver takes all senders' packets with one consumer (in the
// producers' order) and one wideToNarrow. Every output byte equals the CPU reference on two
// inferences.
#include <gtest/gtest.h>

#include <random>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// The chain both tests compile: 64 channels, a 3x3 conv to 1024 split by output groups, the
// depthwise layer after it (split too), and a 1x1 conv that reads every channel, on 3 x 3 x 16.
constexpr int kH = 3, kW = 3, kCin = 16;
std::vector<ConvSpec> gather_chain() {
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kRelu6};
  dw.depthwise = true;
  return {{64, 1, 1, true}, {1024, 3, 1, true}, dw, {72, 1, 1, true}};
}

TEST(AllGatherOnTheVirtualEdgeTpu, SlicesOfAllSendersGoInOneRound) {
  std::mt19937 random(1105);
  // 3 x 3 pixels of 128 bytes: 1,152 bytes per sender, 4 whole packets and a 128-byte rest (the
  // split into whole packets and the rest, each gathered).
  const std::vector<ConvSpec> specs = gather_chain();
  const int h = kH, w = kW, cin = kCin;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u) << "the layers were not split";

  int consumers = 0, to_tiles = 0;
  for (const isa::Instruction& in : isa::decode(compiled.exes.execution->bitstreams.at(0).data)) {
    consumers += in.opcode() == isa::kRingConsumer0;
    to_tiles += in.opcode() == isa::kRingProducer && (in.value("dest") & 0xffff) != 0;
  }
  // (19 consumers in rounds: the hand-over into the 1x1 conv alone one per sender and part. Its 8
  // senders send at least a producer each; the 3x3 conv and the depthwise layer share a split
  // stage, pair_stages, so their slices no longer travel between them: 11 producers, 16 before.)
  EXPECT_GE(to_tiles, 8);
  EXPECT_LT(consumers, 16) << to_tiles << " producers to tiles";

  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

// A gathered transfer ending inside a packet goes as whole packets whose halves overlap
// (conv_hand_over.cpp, overlapping): the same chain's 1,152-byte slices (4.5 packets) as 5 whole
// packets, words [0, 160) and [128, 288) of each, one producer per sender instead of one for the 4
// whole packets and one for the 128-byte rest. The senders' narrowToWides walk the two halves
// (a second level of 2 iterations stepping back); every output byte equals the CPU reference.
TEST(AllGatherOnTheVirtualEdgeTpu, SlicesEndingInsideAPacketGoAsOverlappingWholePackets) {
  std::mt19937 random(1205);
  const std::vector<ConvSpec> specs = gather_chain();
  const int h = kH, w = kW, cin = kCin;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);

  int overlapping = 0;
  for (const isa::Instruction& in : isa::decode(compiled.exes.execution->bitstreams.at(0).data))
    overlapping +=
        in.opcode() == isa::kNarrowToWide && in.value("n.cnt1") == 1 && in.value("n.inc1") < 0;
  EXPECT_GT(overlapping, 0) << "no transfer went as overlapping whole packets";

  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
