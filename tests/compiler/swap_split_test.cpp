// Correct by simulation and faster on the clock: a 3x3 depthwise stage whose bands go over the ring
// to the next pointwise stage (each tile's channel slice to its partner, PoseNet's 23 x 31 x 384
// pairs) computes its bands but the last row as one op and the last row as a second, and the
// first op's rows cross the ring while the second computes (swap_split in conv_row_split.cpp,
// docs/compiler.md "The swap under the depthwise"). The first chain is halo_first_test.cpp's; the
// second has the next stage's images over the depthwise layers' but off the rows the second op
// reads and writes (section "The swap with rows apart, and the shorter bands' wait").
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

// Per run of depthwise ops (loop0 8: 9 taps) followed by a pointwise op: the ops' positions in
// order, the ring producers to tiles (not FIFO weights) after the first of those ops up to the
// pointwise op, and how many of them finished before the last depthwise op did (one inference,
// traced).
struct Swap {
  std::vector<int64_t> positions;
  int producers = 0, early = 0;
};
std::vector<Swap> swaps(const testing::CompiledTwin& compiled, size_t input_bytes,
                        std::mt19937& random) {
  const testing::TracedInference run = testing::traced_inference(compiled, input_bytes, random);
  const testing::Finishes& finishes = run.finishes;
  std::vector<Swap> found;
  bool in_swap = false;
  uint64_t ops_end = 0;
  std::vector<uint64_t> sent;
  for (const chip::ProgramItem& item : run.program->items) {
    if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded)) {
      const bool depthwise = op->source->value("loop0") == 8;
      if (depthwise && !in_swap) {
        found.push_back({});
        in_swap = true;
        ops_end = 0;
        sent.clear();
      }
      if (depthwise) {
        found.back().positions.push_back(op->source->value("loop1") + 1);
        ops_end = std::max(ops_end, finishes.of(item.word_offset));
      } else if (in_swap) {
        in_swap = false;
        found.back().producers = static_cast<int>(sent.size());
        found.back().early = static_cast<int>(
            std::count_if(sent.begin(), sent.end(), [&](uint64_t f) { return f < ops_end; }));
      }
    }
    if (in_swap && testing::hands_rows_to_tiles(item))
      sent.push_back(finishes.of(item.word_offset));
  }
  return found;
}

// 23 x 31 x 64 -> 1x1 to 384, then three pairs of a 3x3 depthwise layer and a 1x1 to 384. The
// second and third depthwise layers run as ops of two rows of 31 positions on every band (the
// 2-row bands whole) and then an op of the last row on the 3-row bands, and the first hand-over's
// producers (16 or more: two rows of each band to the tile itself and its partner) finish before
// that last op ends, the last rows' after it. (The first depthwise layer keeps one op a band:
// the next stage's image lies over its input there. Before, every layer was so: its ops ended
// first, then every producer.) Every output byte equals the CPU reference on two inferences; the
// last-row op writing the row above its own makes the output differ.
TEST(SwapSplitOnTheVirtualEdgeTpu, FirstRowsCrossTheRingWhileTheLastRowComputes) {
  std::mt19937 random(20261207);
  const int h = 23, w = 31, cin = 64;
  const ConvSpec pw{384, 1, 1, true, true, true, Activation::kNone};
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kNone};
  dw.depthwise = true;
  const std::vector<ConvSpec> specs{pw, dw, pw, dw, pw, dw, pw};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());
  const std::vector<Swap> found = swaps(c.compiled, c.input_bytes, random);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[0].early, 0);
  for (size_t k = 1; k < found.size(); ++k) {
    const Swap& s = found[k];
    EXPECT_EQ(s.positions, (std::vector<int64_t>{2 * w, 2 * w, w}))
        << "two rows on every band, then the last row on the 3-row bands";
    EXPECT_GE(s.early, 16) << "the first rows crossed the ring while the last row computed";
    EXPECT_GE(s.producers - s.early, 14) << "the last rows after";
  }
  c.expect_two_inferences_equal(random);

  // The same program with a last-row op (31 positions of a depthwise layer) writing the row above
  // its own (31 pixels of 192 channels).
  std::vector<isa::Instruction> program =
      isa::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  const auto last = std::find_if(program.begin(), program.end(), [&](const isa::Instruction& in) {
    return in.opcode() == isa::kTensorOp && in.value("loop0") == 8 && in.value("loop1") + 1 == w;
  });
  ASSERT_NE(last, program.end());
  last->set("out.base", last->value("out.base") - w * 192);
  testing::expect_edited_program_differs(c.compiled, c.twin, program, c.input_bytes, random);
}

// MobileNet v1 1.0's front from its 112 x 112 x 32 map: a depthwise layer, 1x1 to 64, a
// stride-2 depthwise layer, 1x1 to 128, a depthwise layer and 1x1 to 128. The next stage's images
// overlap the two later depthwise layers' images on some tiles (they took no form while whole
// images had to lie apart), but not the rows their last rows read and write: the stride-2 layer
// runs as ops of three rows of 56 positions on every band (the 3-row bands whole) and then its
// last row on the 4-row bands (not two: the 3-row bands' ops would end after a first op of two
// rows and hold back the second), the 56 x 56 one as ops of five rows and of two, and some of
// each first hand-over's producers finish before the last op ends, some after. Every output byte
// equals the CPU reference on two inferences; the two-row op writing the rows above its own makes
// the output differ.
TEST(SwapSplitOnTheVirtualEdgeTpu, LastRowsApartFromTheNextImageOverTheInput) {
  std::mt19937 random(20261208);
  const int h = 112, w = 112, cin = 32, ow = 56;
  ConvSpec dw{0, 3, 1, true, true, true, Activation::kNone};
  dw.depthwise = true;
  ConvSpec dw2 = dw;
  dw2.stride = 2;
  auto pw = [](int cout) { return ConvSpec{cout, 1, 1, true, true, true, Activation::kNone}; };
  const std::vector<ConvSpec> specs{dw, pw(64), dw2, pw(128), dw, pw(128)};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());
  const std::vector<Swap> found = swaps(c.compiled, c.input_bytes, random);
  ASSERT_EQ(found.size(), 3u);
  EXPECT_EQ(found[1].positions, (std::vector<int64_t>{3 * ow, 3 * ow, ow}))
      << "three rows on every band, then the last row on the 4-row bands";
  EXPECT_EQ(found[2].positions, (std::vector<int64_t>{5 * ow, 2 * ow}))
      << "five rows on every band, then the last two";
  for (size_t k = 1; k < found.size(); ++k) {
    EXPECT_GE(found[k].early, 8) << "the first rows crossed the ring while the last rows computed";
    EXPECT_GE(found[k].producers - found[k].early, 8) << "the last rows after";
  }
  c.expect_two_inferences_equal(random);

  // The same program with the two-row op (112 positions of a depthwise layer) writing the rows
  // above its own.
  std::vector<isa::Instruction> program =
      isa::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  const auto last = std::find_if(program.begin(), program.end(), [&](const isa::Instruction& in) {
    return in.opcode() == isa::kTensorOp && in.value("loop0") == 8 &&
           in.value("loop1") + 1 == 2 * ow;
  });
  ASSERT_NE(last, program.end());
  last->set("out.base", last->value("out.base") - 2 * ow * 64);
  testing::expect_edited_program_differs(c.compiled, c.twin, program, c.input_bytes, random);
}

}  // namespace
}  // namespace tinycoral::compiler
