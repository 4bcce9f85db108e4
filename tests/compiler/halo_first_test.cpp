// Correct by simulation and faster on the clock: a pointwise stage that writes its bands in place
// into the next 3x3 depthwise stage's image computes the rows other tiles read (a band's first
// and last) as an op of its own, then the rest after a fence, so that the halo rows cross the
// ring while the rest computes (halo_first in conv_codegen.cpp, docs/compiler.md "Halo rows
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
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/two_inferences.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using twins::ConvSpec;

// The latest finish (clock cycles) of each instruction, by word offset, on any tile, in the last
// program run (the inference).
struct Finishes : chip::TraceSink {
  uint32_t program = 0;
  std::map<uint32_t, uint64_t> at;
  void record(const chip::TraceRecord& r) override {
    if (r.program != program) {
      program = r.program;
      at.clear();
    }
    if (r.tile >= 0) at[r.word_offset] = std::max(at[r.word_offset], r.finish);
  }
};

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
  const container::Model twin = twins::conv_twin(h, w, cin, specs, random);
  const testing::CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  const std::vector<uint8_t>& bitstream = compiled.exes.execution->bitstreams.at(0).data;

  Finishes finishes;
  {
    chip::ChipOptions options;
    options.trace = &finishes;
    chip::VirtualEdgeTpu chip(options);
    compiled.cache_parameters(chip);
    const std::vector<uint8_t> x = testing::random_bytes(static_cast<size_t>(h) * w * cin, random);
    compiled.infer(chip, {{"x", x}});
    ASSERT_EQ(chip.fault(), "");
  }

  // Walk the program: the 384 -> 384 pointwise ops (96 reduction words: loop0 95), then the ring
  // producers to tiles (not the FIFO weights) up to the depthwise op (9 taps: loop0 8).
  const std::unique_ptr<chip::Program> decoded = chip::Program::decode(bitstream);
  std::vector<isa::Instruction> program = isa::decode(bitstream);
  ASSERT_EQ(decoded->items.size(), program.size());
  int64_t before = -1;             // the previous op's loop0
  uint64_t ops_end = 0;            // the latest finish of the pointwise layer's ops
  uint64_t sent = 0;               // the latest finish of the producers after them
  int producers = 0;               // how many
  std::vector<int64_t> positions;  // the pointwise layer's ops' positions (loop1), in order
  std::vector<std::vector<int64_t>> layers;
  int halo_hand_overs = 0, overlapped = 0;
  size_t rest_op = program.size();  // a middle-row op's index in `program`
  for (size_t k = 0; k < decoded->items.size(); ++k) {
    const chip::ProgramItem& item = decoded->items[k];
    if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded)) {
      const int64_t loop0 = op->source->value("loop0");
      if (before == 95 && loop0 == 8 && producers == 28) {
        ++halo_hand_overs;
        overlapped += sent < ops_end;
        layers.push_back(positions);
      }
      if (loop0 == 95) {
        if (before != 95) {
          ops_end = 0;
          positions.clear();
        }
        ops_end = std::max(ops_end, finishes.at[item.word_offset]);
        positions.push_back(op->source->value("loop1") + 1);
        if (op->source->value("loop1") + 1 == w) rest_op = k;
      }
      before = loop0;
      producers = 0;
      sent = 0;
    }
    if (const auto* ring = std::get_if<chip::RingInstr>(&item.decoded);
        ring && item.opcode == isa::kRingProducer && (ring->dest & 0xffff) != 0 && !ring->to_c1) {
      ++producers;
      sent = std::max(sent, finishes.at[item.word_offset]);
    }
  }
  EXPECT_EQ(halo_hand_overs, 2);
  EXPECT_EQ(overlapped, 2) << "the halo rows crossed the ring while the middle rows computed";
  for (const std::vector<int64_t>& ops : layers)
    EXPECT_EQ(ops, (std::vector<int64_t>{2 * w, 2 * w, w}))
        << "two rows on every band, then the middle row on the 3-row bands";
  testing::expect_two_inferences_equal(compiled, twin, static_cast<size_t>(h) * w * cin, random);

  // The same program with a middle-row op writing the row above its own (one row of 33 pixels
  // of 192 channels).
  ASSERT_LT(rest_op, program.size());
  ASSERT_EQ(program[rest_op].opcode(), isa::kTensorOp);
  program[rest_op].set("out.base", program[rest_op].value("out.base") - 33 * 192);
  testing::expect_edited_program_differs(compiled, twin, program, static_cast<size_t>(h) * w * cin,
                                         random);
}

}  // namespace
}  // namespace tinycoral::compiler
