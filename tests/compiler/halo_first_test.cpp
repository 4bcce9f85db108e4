// Correct by simulation and faster on the clock: a pointwise stage that writes its bands in place
// into the next 3x3 depthwise stage's image computes the rows other tiles read (a band's first
// and last) as an op of its own, then the rest after a fence, so that the halo rows cross the
// ring while the rest computes (halo_first in conv_row_split.cpp, docs/compiler.md "Halo rows
// first"). The chain is PoseNet's 23 x 31 x 384 pairs, as in halo_hand_over_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <variant>
#include <vector>

#include "chip/program.h"
#include "chip/virtual_edge_tpu.h"
#include "isa/isa.h"
#include "support/compiled_conv_twin.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/traced_inference.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// The hand-overs of `producers` ring producers to tiles (not FIFO weights) between the ops of a
// layer with loop0 `from` and the next op, with loop0 `to`: how many there are, and in how many
// the last producer finished before the last of those ops did (one inference, traced). `layers`:
// the from-layer's ops' positions (loop1 + 1), in order, for each such hand-over.
struct Overlaps {
  int hand_overs = 0, overlapped = 0;
  std::vector<std::vector<int64_t>> layers;
};
Overlaps overlaps(const testing::CompiledTwin& compiled, size_t input_bytes, int64_t from,
                  int64_t to, int producers, std::mt19937& random) {
  const testing::TracedInference run = testing::traced_inference(compiled, input_bytes, random);
  const testing::Finishes& finishes = run.finishes;
  Overlaps found;
  int64_t before = -1;   // the previous op's loop0
  uint64_t ops_end = 0;  // the latest finish of the from-layer's ops
  uint64_t sent = 0;     // the latest finish of the producers after them
  int sending = 0;       // how many
  std::vector<int64_t> positions;
  for (const chip::ProgramItem& item : run.program->items) {
    if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded)) {
      const int64_t loop0 = op->source->value("loop0");
      if (before == from && loop0 == to && sending == producers) {
        ++found.hand_overs;
        found.overlapped += sent < ops_end;
        found.layers.push_back(positions);
      }
      if (loop0 == from) {
        if (before != from) {
          ops_end = 0;
          positions.clear();
        }
        ops_end = std::max(ops_end, finishes.of(item.word_offset));
        positions.push_back(op->source->value("loop1") + 1);
      }
      before = loop0;
      sending = 0;
      sent = 0;
    }
    if (testing::hands_rows_to_tiles(item)) {
      ++sending;
      sent = std::max(sent, finishes.of(item.word_offset));
    }
  }
  return found;
}

// 23 x 31 x 64 -> 1x1 to 384, then three pairs of a 3x3 depthwise layer and a 1x1 to 384. Into
// the second and third depthwise layers (28 halo rows each), the 384 -> 384 layer before runs as
// ops of two rows of 31 positions on every band (the 2-row band whole) and then ops of the middle
// row on the 3-row bands, and the hand-over's last halo row has crossed the ring before that
// last op ends (before, every tile's one op ended first, then a fence, then the 28 producers).
// Every output byte equals the CPU reference on two inferences; the rest op writing the row
// above its own leaves the middle rows at the zero point and the output differs.
TEST(HaloFirstOnTheVirtualEdgeTpu, HaloRowsCrossTheRingWhileTheRestComputes) {
  std::mt19937 random(20261207);
  const int h = 23, w = 31, cin = 64;
  const ConvSpec pw{384, 1, 1, true, true, true, Activation::kNone};
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kNone};
  dw.depthwise = true;
  const std::vector<ConvSpec> specs{pw, dw, pw, dw, pw, dw, pw};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());
  const Overlaps found = overlaps(c.compiled, c.input_bytes, 95, 8, 28, random);
  EXPECT_EQ(found.hand_overs, 2);
  EXPECT_EQ(found.overlapped, 2) << "the halo rows crossed the ring while the middle rows computed";
  for (const std::vector<int64_t>& ops : found.layers)
    EXPECT_EQ(ops, (std::vector<int64_t>{2 * w, 2 * w, w}))
        << "two rows on every band, then the middle row on the 3-row bands";
  c.expect_two_inferences_equal(random);

  // The same program with a middle-row op (31 positions of a 384 -> 384 layer) writing the row
  // above its own (one row of 33 pixels of 192 channels).
  std::vector<isa::Instruction> program =
      isa::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  const auto rest = std::find_if(program.begin(), program.end(), [&](const isa::Instruction& in) {
    return in.opcode() == isa::kTensorOp && in.value("loop0") == 95 && in.value("loop1") + 1 == w;
  });
  ASSERT_NE(rest, program.end());
  rest->set("out.base", rest->value("out.base") - 33 * 192);
  testing::expect_edited_program_differs(c.compiled, c.twin, program, c.input_bytes, random);
}

// PoseNet's front layers 4-12 on the 89 x 121 map (as front_halo_hand_over_test.cpp): the
// 96 -> 192 pointwise stage writes its 3-row bands in place into the next stage of two layers (a
// 3x3 depthwise layer and a 192 -> 192 pointwise one), whose second image is then filled while
// the first op runs, not after it: the 28 halo rows cross the ring before the stage's last op
// ends. Every output byte equals the CPU reference on two inferences.
TEST(HaloFirstOnTheVirtualEdgeTpu, IntoAStageOfTwoLayers) {
  std::mt19937 random(20261207);
  const int h = 89, w = 121, cin = 48;
  auto pointwise = [](int cout) {
    return ConvSpec{cout, 1, 1, true, true, true, Activation::kNone};
  };
  const ConvSpec dw = twins::depthwise(3, 1), dw2 = twins::depthwise(3, 2);
  const std::vector<ConvSpec> specs{pointwise(96),  dw,  pointwise(96), dw2, pointwise(192), dw,
                                    pointwise(192), dw2, pointwise(384)};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random,
                                    testing::inner_zero_point(specs.size(), -100));
  ASSERT_TRUE(c.on_the_chip());
  // From a layer of 96 input channels (loop0 23) into a depthwise layer (loop0 8).
  const Overlaps found = overlaps(c.compiled, c.input_bytes, 23, 8, 28, random);
  EXPECT_EQ(found.hand_overs, 1);
  EXPECT_EQ(found.overlapped, 1) << "the halo rows crossed the ring while the middle rows computed";
  c.expect_two_inferences_equal(random);
}

}  // namespace
}  // namespace tinycoral::compiler
