// The scalar core's softmax alone (compiler::emit_scalar_softmax) on the virtual Edge TPU: score
// bytes stored in scalar memory by the program, every count n from a single position to a full
// row and n not a multiple of 4; each head's exponentials' bytes and 1 / S equal the float32
// arithmetic of the int8 path (llm::scalar_core_softmax: the largest byte, then
// exp2(f32(b - m) exp_mult) summed in position order). Bytes past n in the last word of e are 0
// (the value cache's weighted sum reads them) and the words after it keep their scores, which are
// larger than every score before n, so reading one of them would change m.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"
#include "compiler/scalar_softmax.h"

namespace tinycoral::testing {
namespace {

void store_word(compiler::Emitter& e, uint32_t bits, int at) {
  e.add("bundle", cat("s_op=0x2f s_x=12 s_y=0 imm=", compiler::hex(bits)));
  e.add("bundle", cat("v_op=0x2 v_offset=", at & 0xff, " v_cmd=", at >> 8, " vs_reg=12"));
}

// Stores the scores (head after head) and n, runs the softmax (if `softmax`) and pushes the
// scores' words and the sums.
container::Executable softmax_program(const compiler::ScalarSoftmax& s,
                                      const std::vector<uint8_t>& scores, int n, bool softmax) {
  const int words = s.heads * s.positions / 4 + s.heads, bytes = 4 * words;
  compiler::Emitter e;
  compiler::program_start(e);
  for (int w = 0; w < s.heads * s.positions / 4; ++w) {
    uint32_t v = 0;
    std::memcpy(&v, scores.data() + 4 * w, 4);
    store_word(e, v, s.scores_word + w);
  }
  for (int h = 0; h < s.heads; ++h) store_word(e, 0, s.inv_word + h);
  store_word(e, uint32_t(n), s.count_word);
  if (softmax) compiler::emit_scalar_softmax(e, s);
  e.reloc_movi(10, container::BufferKind::kOutput, container::Half::kUpper32, "y");
  e.reloc_movi(11, container::BufferKind::kOutput, container::Half::kLower32, "y");
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  compiler::descriptor(e, 5, 4, 6, bytes, 3);
  compiler::emit_push_words(e, s.scores_word, words);
  compiler::tile_fence(e, "units=0x3ff signal=1 f109=3");
  compiler::wait_tokens(e);
  compiler::interrupt(e, 5, 4, 6);
  container::Executable eo = compiler::execution_executable(e.finish());
  container::Layer out = compiler::boundary_layer("y", bytes, 0, 1.0f, true, false);
  out.shape = {{0, 0}, {0, bytes - 1}};
  eo.output_layers.push_back(std::move(out));
  eo.dma_hints.fully_deterministic = true;
  eo.dma_hints.hints = {compiler::instruction_hint(),
                        compiler::dma_hint(container::BufferKind::kOutput,
                                           container::Direction::kOutfeed, "y", bytes),
                        compiler::interrupt_hint()};
  return eo;
}

uint64_t scalar_bundles(const chip::VirtualEdgeTpu& chip) {
  return chip.stats().instructions[size_t(chip::UnitId::kScalar)];
}

TEST(ScalarSoftmaxOnTheVirtualEdgeTpu, EveryByteAndSumForEveryCount) {
  constexpr int kHeads = 2, kPositions = 256;
  std::mt19937 random(11);
  compiler::ScalarSoftmax s;
  s.heads = kHeads;
  s.positions = kPositions;
  s.scores_word = 3;
  s.exp_mult = {0.031f, 0.0917f};
  s.inv_word = s.scores_word + kHeads * kPositions / 4;
  s.count_word = s.inv_word + kHeads;
  for (const int n : {1, 2, 3, 4, 5, 6, 7, 8, 64, 77, 128, 255, 256}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    // Scores below n in 0..250 (0 and the largest among them, a tie of the largest), 251..255
    // past n.
    std::vector<uint8_t> scores(size_t(kHeads * kPositions));
    for (int h = 0; h < kHeads; ++h)
      for (int t = 0; t < kPositions; ++t)
        scores[size_t(h * kPositions + t)] =
            t < n ? uint8_t(random() % 251) : uint8_t(251 + random() % 5);
    scores[size_t(kPositions + (n - 1))] = 0;
    if (n > 2) scores[size_t(n / 2)] = scores[size_t(n - 1)] = 250;
    chip::VirtualEdgeTpu chip;
    const auto out = chip::testing::run_executable(chip, softmax_program(s, scores, n, true), {});
    const std::vector<uint8_t>& y = out.at("y");
    ASSERT_EQ(y.size(), size_t(kHeads * (kPositions + 4)));
    for (int h = 0; h < kHeads; ++h) {
      const uint8_t* b = scores.data() + h * kPositions;
      int m = 0;
      for (int t = 0; t < n; ++t) m = std::max(m, int(b[t]));
      float sum = 0;
      for (int t = 0; t < n; ++t) {
        const float x = std::exp2(float(int(b[t]) - m) * s.exp_mult[size_t(h)]);
        sum += x;
        ASSERT_EQ(y[size_t(h * kPositions + t)], uint8_t(std::nearbyint(x * 255.0f)))
            << "head " << h << " position " << t;
      }
      for (int t = n; t < kPositions; ++t)
        ASSERT_EQ(y[size_t(h * kPositions + t)], t < (n + 3) / 4 * 4 ? 0 : b[t])
            << "head " << h << " position " << t << " past n";
      float inv = 0;
      std::memcpy(&inv, y.data() + kHeads * kPositions + 4 * h, 4);
      EXPECT_EQ(std::bit_cast<uint32_t>(inv), std::bit_cast<uint32_t>(1.0f / sum)) << "head " << h;
    }
    EXPECT_EQ(chip.fault(), "");
  }
}

// The bundles the scalar core executes for one head's softmax (the program with it less the same
// program without it), printed for docs/llm.md's table; a word an iteration keeps them under 16
// per position.
TEST(ScalarSoftmaxOnTheVirtualEdgeTpu, BundlesPerHead) {
  for (const int n : {64, 128, 256}) {
    compiler::ScalarSoftmax s;
    s.heads = 1;
    s.positions = 256;
    s.exp_mult = {0.05f};
    s.inv_word = 64;
    s.count_word = 65;
    const std::vector<uint8_t> scores(256, 7);
    uint64_t bundles[2];
    for (const bool with : {false, true}) {
      chip::VirtualEdgeTpu chip;
      chip::testing::run_executable(chip, softmax_program(s, scores, n, with), {});
      bundles[with] = scalar_bundles(chip);
    }
    const uint64_t cost = bundles[1] - bundles[0];
    std::cout << "softmax of " << n << " positions: " << cost << " bundles\n";
    EXPECT_LT(cost, uint64_t(16 * n));
    EXPECT_GT(cost, uint64_t(8 * n));
  }
}

}  // namespace
}  // namespace tinycoral::testing
