// Correct by simulation: the host's image as it is (rows not whole 8-byte units, repacked on the
// chip) streamed in pieces (stream_pieces in conv_input.cpp, docs/compiler.md "The host's image
// in pieces, popped as it is needed"): the units two row bands share go once over the ring to
// both tiles, and a pop per band lets the ring carry the first bands' units while later ones are
// still staged. The chain is PoseNet's first layers on a smaller map: the image, a 3x3 stride-2
// convolution to 24 channels, a 3x3 depthwise layer and a 24 -> 48 pointwise one.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <random>
#include <variant>
#include <vector>

#include "chip/program.h"
#include "chip/virtual_edge_tpu.h"
#include "common/error.h"
#include "isa/isa.h"
#include "support/compiled_conv_twin.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// The first op's start in the last program run (the inference), in the clock's cycles.
struct FirstOp : chip::TraceSink {
  uint32_t program = 0;
  uint64_t start = UINT64_MAX;
  void record(const chip::TraceRecord& r) override {
    if (r.program != program) {
      program = r.program;
      start = UINT64_MAX;
    }
    if (r.tile >= 0 && std::string_view(r.unit) == "op") start = std::min(start, r.start);
  }
};

// The image's 8-byte units each cross the ring once (one run per band sent 12,758 of its 8,758
// units here, PoseNet's 632 KB for 509 KB), some pieces go to two tiles at once, and the image is
// popped in several pieces (one pop before). So the first op starts before the image could have
// been staged whole and then sent (1.5 times the image's ring cycles; the one pop and the runs
// took 2.8 times: cycle 3,020). Every output byte equals the CPU reference on two inferences.
TEST(ImagePiecesOnTheVirtualEdgeTpu, EachUnitCrossesTheRingOnceAndTheOpsStartEarly) {
  std::mt19937 random(20261206);
  const int h = 193, w = 121, cin = 3;
  // (The last layer without an activation, so that its outputs spread.)
  auto pointwise = [](int cout, Activation act) {
    return ConvSpec{cout, 1, 1, true, true, true, act};
  };
  const std::vector<ConvSpec> specs{ConvSpec{24, 3, 2, true, true, true, Activation::kRelu6},
                                    twins::depthwise(3, 1, true, Activation::kRelu6),
                                    pointwise(48, Activation::kRelu6),
                                    pointwise(16, Activation::kNone)};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());
  const std::vector<isa::Instruction> program =
      isa::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  const int64_t units = (int64_t{h} * w * cin + 7) / 8;
  int64_t sent = 0, popped = 0;
  int pops = 0, shared = 0;
  for (const isa::Instruction& in : program) {
    if (in.opcode() == isa::kPop && in.value("stream") == 1) {
      ++pops;
      popped += in.value("count_m1") + 1;
    }
    if (in.opcode() == isa::kInfeed && in.value("stream") == 1 && in.value("smem") == 0) {
      sent += in.value("count_m1") + 1;
      shared += std::popcount(static_cast<uint64_t>(in.value("dest"))) > 1;
    }
  }
  EXPECT_EQ(sent, units) << "each unit once over the ring";
  EXPECT_GT(shared, 0) << "units two bands read go to both at once";
  EXPECT_GT(pops, 1);
  EXPECT_EQ(popped, units) << "the pops stage the image once";

  FirstOp first;
  chip::VirtualEdgeTpu chip(chip::ChipOptions{.trace = &first});
  c.compiled.cache_parameters(chip);
  const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(units) * 8, random);
  c.compiled.infer(chip, {{"x", std::vector<uint8_t>(x.begin(), x.begin() + h * w * cin)}});
  EXPECT_EQ(chip.fault(), "");
  const double ring_cycles = static_cast<double>(units) * 8 / 64;
  EXPECT_LT(static_cast<double>(first.start), 1.5 * ring_cycles)
      << "ring cycles of the image: " << ring_cycles;

  c.expect_two_inferences_equal(random);
}

// The host's image as it is (rows of whole units, not repacked) as one run per band tile, popped
// in pieces (image_pop_cuts, docs/compiler.md "The host's image popped in pieces for the runs"):
// v2's front on its 224 x 224 x 3 image, its first layer to 16 channels (to v2's 32 the image is
// widened to 4-byte pixels on the chip: widened_image_test.cpp). The image is popped once in more
// than one piece, every infeed reads inside its own pop, each tile takes its rows in one or two
// infeeds (two for a run that a pop's start cuts), and the first op starts before one pop and the
// infeeds after it could have ended (cycle 5,767 in v2 with one pop). Every output byte equals the
// CPU reference on two inferences.
TEST(ImagePiecesOnTheVirtualEdgeTpu, RunsPerBandPoppedInPiecesStartTheOpsEarly) {
  std::mt19937 random(20261207);
  const int h = 224, w = 224, cin = 3;
  const std::vector<ConvSpec> specs{ConvSpec{16, 3, 2, true, true, true, Activation::kRelu6},
                                    twins::depthwise(3, 1, true, Activation::kRelu6),
                                    ConvSpec{16, 1, 1, true, true, true, Activation::kNone}};
  SCOPED_TRACE(twins::describe(h, w, cin, specs));
  const testing::CompiledConvTwin c(h, w, cin, specs, random);
  ASSERT_TRUE(c.on_the_chip());
  const std::unique_ptr<chip::Program> program =
      chip::Program::decode(c.compiled.exes.execution->bitstreams.at(0).data);
  const int64_t units = int64_t{h} * w * cin / 8;
  int64_t popped = 0, pop_units = 0, sent = 0;
  int pops = 0, infeeds = 0;
  uint32_t receivers = 0;
  for (const chip::ProgramItem& item : program->items) {
    if (const auto* pop = std::get_if<chip::PopInstr>(&item.decoded); pop && pop->activations) {
      ++pops;
      pop_units = pop->units;
      popped += pop->units;
    }
    if (const auto* in = std::get_if<chip::InfeedInstr>(&item.decoded);
        in && in->activations && !in->from_scalar_memory) {
      ++infeeds;
      sent += in->units;
      receivers |= in->tiles;
      // (Offsets count within a pass of 16384 units; these pops are shorter.)
      EXPECT_LE(in->offset + in->units, pop_units) << "an infeed reads inside its pop";
    }
  }
  const int bands = std::popcount(receivers);
  SCOPED_TRACE(cat(pops, " pops, ", infeeds, " infeeds to ", bands, " tiles"));
  EXPECT_GT(pops, 1);
  EXPECT_EQ(popped, units) << "the pops stage the image once";
  EXPECT_GE(bands, 8);
  EXPECT_LE(infeeds, 2 * bands);
  EXPECT_GT(sent, units) << "halo rows go to both their bands";

  FirstOp first;
  chip::VirtualEdgeTpu chip(chip::ChipOptions{.trace = &first});
  c.compiled.cache_parameters(chip);
  const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(units) * 8, random);
  c.compiled.infer(chip, {{"x", x}});
  EXPECT_EQ(chip.fault(), "");
  // (One pop of the image, then the infeeds one after another: 64 bytes a cycle each.)
  const double one_pop = static_cast<double>(units + sent) * 8 / 64;
  EXPECT_LT(static_cast<double>(first.start), one_pop) << "one pop, then the infeeds: " << one_pop;

  c.expect_two_inferences_equal(random);
}

}  // namespace
}  // namespace tinycoral::compiler
