// The batch output stage: every level equals requantize() applied word by word (accumulator +
// bias + offset wrapped to 32 bits), over random sums, biases, offsets, strides, words per run,
// max-combined runs with untouched columns, odd word counts (the AVX2 level's single tail), and
// per-channel multipliers (one per column, per_channel.h).
#include "chip/ops/output_words.h"

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace tinycoral::chip::ops {
namespace {

TEST(OutputWords, EveryLevelEqualsRequantizePerWord) {
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> any(INT32_MIN, INT32_MAX), small(-5000, 5000);
  std::uniform_real_distribution<float> mult(-0.05f, 0.05f), clamp(-300.0f, 300.0f);
  std::vector<OutputWordsKernel> kernels{output_words_portable(), output_words_kernel()};
  if (auto avx2 = output_words_avx2()) kernels.push_back(avx2);
  int checked = 0;
  for (int trial = 0; trial < 400; ++trial) {
    OutputStage stage{mult(rng), clamp(rng), clamp(rng), static_cast<uint8_t>(rng() % 256)};
    if (trial % 9 == 0) stage.clamp_max = std::numeric_limits<float>::infinity();
    const uint32_t words = 1 + rng() % 16, runs = 1 + rng() % 7;
    const uint32_t stride = 4 * words + 4 * (rng() % 3);
    OutputWords o;
    o.words = words;
    o.stride = stride;
    o.offset = trial % 4 == 0 ? any(rng) : small(rng);
    o.is_max = trial % 5 == 0;
    o.empty = o.is_max ? INT32_MIN : 0;
    std::vector<int32_t> sums(runs * stride);
    for (auto& v : sums)
      v = o.is_max && rng() % 3 == 0 ? o.empty : trial % 3 ? small(rng) : any(rng);
    std::vector<uint8_t> biases(16 * words);
    for (auto& b : biases) b = static_cast<uint8_t>(rng());
    o.sums = sums.data();
    o.biases = trial % 2 ? biases.data() : nullptr;
    std::vector<float> mults(4 * words);
    for (auto& m : mults) m = mult(rng);
    if (trial % 3 == 1) o.mults = reinterpret_cast<const uint8_t*>(mults.data());
    const uint64_t total = uint64_t{runs} * words;
    std::vector<int64_t> at(total);
    for (uint64_t i = 0; i < total; ++i)
      at[i] = static_cast<int64_t>(4 * (total - 1 - i));  // reversed
    std::vector<uint8_t> expected(4 * total);
    for (uint64_t i = 0; i < total; ++i) {
      const uint64_t r = i / words, w = i % words;
      for (int b = 0; b < 4; ++b) {
        int32_t v = sums[r * stride + 4 * w + b];
        if (o.is_max && v == o.empty) v = 0;
        uint32_t sum = static_cast<uint32_t>(v) + static_cast<uint32_t>(o.offset);
        if (o.biases) {
          int32_t bias;
          std::memcpy(&bias, biases.data() + 16 * w + 4 * b, 4);
          sum += static_cast<uint32_t>(bias);
        }
        OutputStage column = stage;
        if (o.mults) column.mult = mults[4 * w + b];
        expected[at[i] + b] = requantize(static_cast<int32_t>(sum), column);
      }
    }
    for (OutputWordsKernel kernel : kernels) {
      std::vector<uint8_t> got(4 * total, 0xEE);
      kernel(o, stage, got.data(), at.data(), total);
      ASSERT_EQ(got, expected) << "trial " << trial << " words " << words << " runs " << runs;
      ++checked;
    }
  }
  EXPECT_GE(checked, 800);
}

}  // namespace
}  // namespace tinycoral::chip::ops
