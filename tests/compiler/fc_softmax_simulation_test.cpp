// Attention's scores and their softmax in one program (fc_batch_codegen.h,
// generate_fc_batch_softmax) on the virtual Edge TPU: for random keys and queries, each head's
// exponentials' bytes and 1 / S equal the scalar-core softmax's float32 arithmetic over the
// requantized scores (docs/llm.md "Attention in the chip's arithmetic", step 4), for counts n of
// 1 to every position, multiples of 4 and not; one program serves every n. With a parameter
// write in front (the llm path's key write), the scores see the new weights in the same run.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "chip/sim_runner.h"
#include "compiler/fc_batch_codegen.h"
#include "compiler/fc_codegen.h"
#include "host/rounding.h"
#include "support/fc_scores_reference.h"

namespace tinycoral::compiler {
namespace {

TEST(FcSoftmaxOnTheVirtualEdgeTpu, ExponentialsAndSumsOfEveryHeadForEveryCount) {
  std::mt19937 random(47);
  constexpr int kHeads = 3, kPositions = 128, kHeadSize = 16, kK = 64;
  const int row_bytes = (kHeads - 1) * kHeadSize + kK;  // 96: head h reads bytes 16h..16h+63
  FcLayer l;
  l.n = kHeads * kPositions;
  l.k = kK;
  l.weights.resize(size_t(l.n) * size_t(kK));
  for (auto& w : l.weights) w = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
  l.in_zp = 128;  // the symmetric q~ (zero point 0) as the chip sees it
  l.in_scale = 0.01f;
  l.out_scale = 1.0f;
  std::vector<float> exp_mult;
  std::vector<int32_t> zp;
  for (int h = 0; h < kHeads; ++h) {
    exp_mult.push_back(0.02f + 0.03f * float(h));
    zp.push_back(100 + 20 * h);
  }
  for (int o = 0; o < l.n; ++o) l.mult.push_back(0.0004f + 0.0001f * float(o % 7));
  for (int g = 0; g < fc_groups(l.n); ++g) {
    const int32_t z = zp[size_t(g / (kPositions / 64))];
    l.group_out_zp.push_back(z);
    l.group_clamp_min.push_back(fc_clamp(0, z, 1.0f));
    l.group_clamp_max.push_back(fc_clamp(255, z, 1.0f));
  }
  l.out_zp = zp[0];
  l.clamp_min = l.group_clamp_min[0];
  l.clamp_max = l.group_clamp_max[0];
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = false;
  FcPlacement at;
  for (int g = 0; g < fc_groups(l.n); ++g) {
    at.tiles.push_back(15 - g);
    at.param_units.push_back(0);
    at.in_at.push_back(g / (kPositions / 64) * kHeadSize);
  }
  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, fc_caching(l, at), {});
  const container::Executable program =
      generate_fc_batch_softmax(l, at, row_bytes, exp_mult).execution;
  // Runs `program` with a random query and count n, checks e and 1 / S against l's weights.
  const auto check = [&](const container::Executable& program, int n) {
    SCOPED_TRACE("n = " + std::to_string(n));
    std::vector<uint8_t> x(size_t(row_bytes + kSoftmaxCountBytes), 0);
    for (int i = 0; i < row_bytes; ++i) x[size_t(i)] = static_cast<uint8_t>(random());
    for (int i = 0; i < 4; ++i) x[size_t(row_bytes + i)] = uint8_t(uint32_t(n) >> (8 * i));
    const auto out = chip::testing::run_executable(chip, program, {{"x", x}}).at("y");
    ASSERT_EQ(out.size(), size_t(kHeads * (kPositions + 4)));
    for (int h = 0; h < kHeads; ++h) {
      // The scores as the output stage gives them, then the softmax in float32.
      const std::vector<int32_t> score =
          testing::reference_scores(l, x, h, n, kPositions, kHeadSize);
      const int32_t m = *std::max_element(score.begin(), score.end());
      float sum = 0;
      for (int t = 0; t < n; ++t) {
        const float v = std::exp2(static_cast<float>(score[size_t(t)] - m) * exp_mult[size_t(h)]);
        sum += v;
        ASSERT_EQ(out[size_t(h * kPositions + t)], static_cast<uint8_t>(std::nearbyint(v * 255.0f)))
            << "head " << h << " position " << t;
      }
      float inv = 0;
      std::memcpy(&inv, out.data() + kHeads * kPositions + 4 * h, 4);
      EXPECT_EQ(std::bit_cast<uint32_t>(inv), std::bit_cast<uint32_t>(1.0f / sum)) << "head " << h;
      // Not a trivial case: several distinct scores.
      if (n >= 77) {
        EXPECT_GT(std::set<int32_t>(score.begin(), score.end()).size(), size_t(8));
      }
    }
  };
  for (int n : {1, 2, 3, 4, 5, 77, kPositions}) check(program, n);
  // The program that first writes new weights for positions 64..127 of every head (the llm
  // path's new key, in the same run): the scores see them.
  FcParameterWrite write;
  FcLayer& w = write.layer;
  w.n = kHeads * 64;
  w.k = kK;
  w.in_zp = l.in_zp;
  w.in_scale = l.in_scale;
  w.out_scale = l.out_scale;
  w.out_zp = l.out_zp;
  w.clamp_min = l.clamp_min;
  w.clamp_max = l.clamp_max;
  w.input_name = l.input_name;
  w.output_name = l.output_name;
  for (int h = 0; h < kHeads; ++h) {
    const int g = h * (kPositions / 64) + 1;
    for (int r = 64 * g; r < 64 * g + 64; ++r) {
      for (int j = 0; j < kK; ++j) {
        int8_t& weight = l.weights[size_t(r) * size_t(kK) + size_t(j)];
        weight = static_cast<int8_t>(static_cast<int>(random() % 255) - 127);
        w.weights.push_back(weight);
      }
      w.mult.push_back(l.mult[size_t(r)]);
    }
    w.group_out_zp.push_back(l.group_out_zp[size_t(g)]);
    w.group_clamp_min.push_back(l.group_clamp_min[size_t(g)]);
    w.group_clamp_max.push_back(l.group_clamp_max[size_t(g)]);
    write.at.tiles.push_back(at.tiles[size_t(g)]);
    write.at.param_units.push_back(at.param_units[size_t(g)]);
  }
  const container::Executable with_write =
      generate_fc_batch_softmax(l, at, row_bytes, exp_mult, &write).execution;
  EXPECT_EQ(with_write.type, container::ExecutableType::kStandAlone);
  check(with_write, kPositions);
  check(program, 100);  // the new weights stay resident
  EXPECT_EQ(chip.fault(), "");
}

// Where scalar memory cannot hold the scores, the count and the sums, the generator says so.
TEST(FcSoftmaxOnTheVirtualEdgeTpu, TooManyPositionsForScalarMemoryAreRefused) {
  EXPECT_EQ(fc_batch_softmax_unsupported(6, 256), "");
  EXPECT_NE(fc_batch_softmax_unsupported(8, 2048).find("16 KiB of scalar memory"),
            std::string::npos);
  EXPECT_NE(fc_batch_softmax_unsupported(2, 100).find("64-position"), std::string::npos);
}

}  // namespace
}  // namespace tinycoral::compiler
