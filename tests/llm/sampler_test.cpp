// The nucleus sampler sorts only the prefix its sum reaches; it must pick exactly what run.c's
// full sort (a stable sort, most likely first) picks, ties included, on flat, peaked and tied
// distributions.
#include "llm/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace tinycoral::llm {
namespace {

// run.c's top-p on probabilities: sort every candidate, add until the sum passes p, scale the coin.
int reference_topp(std::vector<float> probs, float topp, float coin) {
  const int n = static_cast<int>(probs.size());
  const float cutoff = (1.0f - topp) / static_cast<float>(n - 1);
  std::vector<std::pair<float, int>> c;
  for (int i = 0; i < n; ++i)
    if (probs[size_t(i)] >= cutoff) c.emplace_back(probs[size_t(i)], i);
  std::stable_sort(c.begin(), c.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  float cumulative = 0;
  size_t last = c.size() - 1;
  for (size_t i = 0; i < c.size(); ++i) {
    cumulative += c[i].first;
    if (cumulative > topp) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0;
  for (size_t i = 0; i <= last; ++i) {
    cdf += c[i].first;
    if (r < cdf) return c[i].second;
  }
  return c[last].second;
}

TEST(Llama2cSampler, PartialNucleusSortPicksWhatTheFullSortPicks) {
  std::mt19937 random(3);
  std::normal_distribution<float> g(0, 1);
  int draws = 0, distinct = 0;
  for (const float spread : {0.3f, 1.0f, 4.0f, 12.0f}) {  // flat .. peaked
    for (const int levels : {0, 3, 40}) {                 // 0: continuous, else tied values
      for (const float topp : {0.1f, 0.5f, 0.9f, 0.99f}) {
        std::vector<float> logits(3000);
        for (float& v : logits) {
          v = g(random) * spread;
          if (levels) v = std::round(v * levels / (4 * spread)) * 4 * spread / levels;
        }
        Sampler sampler(1.0f, topp, 77);
        XorShiftRng coins(77);
        std::vector<int> seen;
        for (int k = 0; k < 10; ++k) {
          std::vector<float> ours = logits, probs = logits;
          const int got = sampler.sample(ours);
          softmax(probs);
          EXPECT_EQ(got, reference_topp(probs, topp, coins.next_f32()))
              << "spread " << spread << " levels " << levels << " p " << topp << " draw " << k;
          seen.push_back(got);
          ++draws;
        }
        std::sort(seen.begin(), seen.end());
        distinct += static_cast<int>(std::unique(seen.begin(), seen.end()) - seen.begin());
      }
    }
  }
  EXPECT_EQ(draws, 480);
  EXPECT_GT(distinct, 150);  // the draws really differ: not one token again and again
}

}  // namespace
}  // namespace tinycoral::llm
