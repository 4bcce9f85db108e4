// Correct by simulation: a padded image is filled with its zero point by mesh fills of at most
// 4096 words a walk level. A region of more words goes as rows of equal length on a second level
// (one instruction) where its word count divides so, else as rows of 4096 words and the rest (two),
// where before it took one instruction per 4096 words (docs/compiler.md "Mesh fills of two
// levels").
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using twins::ConvSpec;

// A mesh fill's tiles, first word and words (the product of its levels' counts).
struct Fill {
  int64_t tiles = 0, first = 0, words = 0;
};
std::vector<Fill> fills_of(const std::vector<isa::Instruction>& program) {
  std::vector<Fill> fills;
  for (const isa::Instruction& in : program) {
    if (in.opcode() != isa::kMeshNorth || in.value("fill_en") == 0) continue;
    int64_t words = 1;
    for (const char* cnt : {"i.cnt0", "i.cnt1", "i.cnt2", "i.cnt3"}) words *= in.value(cnt) + 1;
    fills.push_back({in.value("tiles"), in.value("i.addr") / 4, words});
  }
  return fills;
}

// 112 x 112 x 16 -> depthwise 3x3 -> 1x1 to 24, v2's second block: the depthwise layer's padded
// image in row bands of 16,416 bytes or more a tile (4,104 words). Some fill covers more than
// 4096 words, and no fill continues another on the same tiles (a region in 4096-word pieces).
// Every output byte equals the CPU reference on two inferences.
TEST(MeshFillsOnTheVirtualEdgeTpu, ARegionOfMoreThan4096WordsIsOneFill) {
  std::mt19937 random(20261206);
  const std::vector<ConvSpec> specs{twins::depthwise(3, 1), {24, 1, 1, true}};
  const int h = 112, w = 112, cin = 16;
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const std::vector<Fill> fills =
      fills_of(isa::decode(compiled.exes.execution->bitstreams.at(0).data));
  ASSERT_FALSE(fills.empty());
  int64_t most = 0;
  for (const Fill& f : fills) most = std::max(most, f.words);
  EXPECT_GT(most, 4096) << "every fill 4096 words or fewer, as before";
  for (size_t k = 1; k < fills.size(); ++k)
    EXPECT_FALSE(fills[k].tiles == fills[k - 1].tiles &&
                 fills[k].first == fills[k - 1].first + fills[k - 1].words)
        << "fill " << k << " continues the one before";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);
}

}  // namespace
}  // namespace tinycoral::compiler
