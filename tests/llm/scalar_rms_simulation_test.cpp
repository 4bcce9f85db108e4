// RMSNorm's scale as the scalar-core routine (compiler/scalar_rms.h) on the virtual Edge TPU: for
// random bytes, lengths, zero points and scales, the r the program pushes is the int8 path's
// chip_rms_scale (llm/int8_rms.h) bit for bit (docs/llm.md "RMSNorm's scale from the chip's
// bytes").
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "chip/sim_runner.h"
#include "common/error.h"
#include "compiler/emitter.h"
#include "compiler/program_parts.h"
#include "compiler/scalar_rms.h"
#include "compiler/scalar_softmax.h"
#include "llm/int8_rms.h"

namespace tinycoral::testing {
namespace {

// A program that writes x's bytes (the chip's uint8, int8 + 128) into scalar memory from word
// `x_word` on (one immediate move and store per word: the test's stand-in for the ring's pieces),
// runs the routine and pushes r to the host.
container::Executable rms_program(const std::vector<int8_t>& x, int x_word, int32_t zero_point,
                                  float mean_mult, int r_word) {
  compiler::Emitter e;
  compiler::program_start(e);
  for (size_t w = 0; w < (x.size() + 3) / 4; ++w) {
    uint32_t word = 0;
    for (size_t b = 0; b < 4 && 4 * w + b < x.size(); ++b)
      word |= uint32_t(uint8_t(int32_t{x[4 * w + b]} + 128)) << (8 * b);
    const int at = x_word + int(w);
    e.add("bundle", cat("s_op=0x2f s_x=12 s_y=0 imm=", compiler::hex(word)));
    e.add("bundle", cat("v_op=0x2 v_offset=", at & 0xff, " v_cmd=", at >> 8, " vs_reg=12"));
  }
  compiler::emit_scalar_rms(e, {x_word, int(x.size()), zero_point + 128, mean_mult, r_word});
  e.reloc_movi(10, container::BufferKind::kOutput, container::Half::kUpper32, "r");
  e.reloc_movi(11, container::BufferKind::kOutput, container::Half::kLower32, "r");
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  compiler::descriptor(e, 5, 4, 6, 4, 3);
  compiler::emit_push_words(e, r_word, 1);
  compiler::tile_fence(e, "units=0x3ff signal=1 f109=3");
  compiler::wait_tokens(e);
  compiler::interrupt(e, 5, 4, 6);
  container::Executable eo = compiler::execution_executable(e.finish());
  container::Layer out = compiler::boundary_layer("r", 4, 0, 1.0f, true, false);
  out.shape = {{0, 0}, {0, 3}};
  eo.output_layers.push_back(std::move(out));
  eo.dma_hints.fully_deterministic = true;
  eo.dma_hints.hints = {
      compiler::instruction_hint(),
      compiler::dma_hint(container::BufferKind::kOutput, container::Direction::kOutfeed, "r", 4),
      compiler::interrupt_hint()};
  return eo;
}

float run_rms(chip::VirtualEdgeTpu& chip, const std::vector<int8_t>& x, int x_word,
              int32_t zero_point, float mean_mult, int r_word) {
  const auto out =
      chip::testing::run_executable(chip, rms_program(x, x_word, zero_point, mean_mult, r_word), {})
          .at("r");
  float r = 0;
  std::memcpy(&r, out.data(), 4);
  return r;
}

TEST(ScalarRmsOnTheVirtualEdgeTpu, PushesTheInt8PathsRBitForBit) {
  std::mt19937 rng(23);
  std::uniform_int_distribution<int> byte(-128, 127);
  std::uniform_real_distribution<float> log_scale(-10.0f, 3.0f);
  chip::VirtualEdgeTpu chip;
  // dim of the test checkpoints (64, 288), lengths that leave 1, 2 or 3 bytes in the last word,
  // one word, a lone byte, and a long row.
  const int lengths[] = {288, 64, 1, 2, 3, 4, 5, 6, 7, 81, 250, 1027};
  int trial = 0, distinct = 0;
  float last = 0;
  for (const int n : lengths) {
    for (int k = 0; k < 4; ++k, ++trial) {
      SCOPED_TRACE("n " + std::to_string(n) + ", case " + std::to_string(k));
      const int32_t z = k == 0 ? 0 : byte(rng);
      // Bytes near the zero point (small sums: the 1e-5 matters), anywhere, and all at -128 (the
      // largest sums, past float32's exact integers).
      std::uniform_int_distribution<int> near(-3, 3);
      std::vector<int8_t> x(static_cast<size_t>(n));
      for (int8_t& b : x)
        b = int8_t(k == 1 ? std::clamp(z + near(rng), -128, 127) : k == 3 ? -128 : byte(rng));
      const float scale = std::exp2(log_scale(rng));
      const float c = llm::rms_mean_multiplier(scale, n);
      const int x_word = 3 * trial % 64, r_word = 2048 + trial;
      const float want = llm::chip_rms_scale(x.data(), n, scale, z);
      const float got = run_rms(chip, x, x_word, z, c, r_word);
      ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want));
      distinct += got != last;
      last = got;
    }
  }
  EXPECT_GT(distinct, trial / 2);  // not one value over and over
  EXPECT_EQ(chip.fault(), "");
  // The zero point is read: one off changes r.
  std::vector<int8_t> x(288);
  for (int8_t& b : x) b = int8_t(byte(rng));
  const float c = llm::rms_mean_multiplier(0.05f, 288);
  EXPECT_NE(run_rms(chip, x, 0, 5, c, 100), llm::chip_rms_scale(x.data(), 288, 0.05f, 4));
  EXPECT_EQ(run_rms(chip, x, 0, 4, c, 100), llm::chip_rms_scale(x.data(), 288, 0.05f, 4));
}

// x or r past scalar memory's 4096 words, no bytes, more than an int32 sum holds, a zero point
// outside the chip's uint8 and a multiplier that is not a positive number are refused.
TEST(ScalarRmsOnTheVirtualEdgeTpu, RefusesWhatItCannotCompute) {
  compiler::Emitter e;
  EXPECT_THROW(compiler::emit_scalar_rms(e, {4000, 1000, 128, 1.0f, 0}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 64, 128, 1.0f, 4096}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 0, 128, 1.0f, 0}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 33001, 128, 1.0f, 0}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 64, 256, 1.0f, 0}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 64, 128, 0.0f, 0}), Error);
  EXPECT_THROW(compiler::emit_scalar_rms(e, {0, 64, 128, std::nanf(""), 0}), Error);
  EXPECT_NO_THROW(compiler::emit_scalar_rms(e, {0, 64, 128, 1.0f, 4095}));
}

}  // namespace
}  // namespace tinycoral::testing
