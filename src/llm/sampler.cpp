#include "llm/sampler.h"

#include <algorithm>
#include <cmath>

#include "llm/kernels.h"

namespace tinycoral::llm {

int argmax(std::span<const float> v) {
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int>(best);
}

void softmax(std::span<float> x) {
  float max = x[0];
  for (float v : x) max = v > max ? v : max;
  exp_shifted(x.data(), static_cast<int>(x.size()), max);
  // run.c at -Ofast multiplies by one reciprocal instead of dividing each value.
  const float inv = 1.0f / sum16(x.data(), static_cast<int>(x.size()));
  for (float& v : x) v *= inv;
}

Sampler::Sampler(float temperature, float topp, uint64_t seed)
    : temperature_(temperature < 0 ? 0.0f : temperature),
      topp_(topp < 0 || topp > 1 ? 0.9f : topp),
      rng_(seed) {}

int Sampler::sample(std::span<float> logits) {
  if (temperature_ == 0.0f) return argmax(logits);
  const float inv_temperature = 1.0f / temperature_;  // as run.c at -Ofast
  for (float& v : logits) v *= inv_temperature;
  softmax(logits);
  const float coin = rng_.next_f32();
  const int n = static_cast<int>(logits.size());
  if (topp_ <= 0 || topp_ >= 1) {
    float cdf = 0.0f;
    for (int i = 0; i < n; ++i) {
      const float lower = cdf;
      cdf += logits[static_cast<size_t>(i)];
      if (coin < cdf) {
        draw_ = {coin, lower, cdf, i - 1, i + 1 < n ? i + 1 : -1};
        return i;
      }
    }
    draw_ = {coin, cdf, cdf, n - 2, -1};
    return n - 1;  // rounding left the cdf below the coin
  }
  // Nucleus: tokens below (1 - p) / (n - 1) can never be in the set, so they are not sorted.
  const float cutoff = (1.0f - topp_) / static_cast<float>(n - 1);
  candidates_.clear();
  for (int i = 0; i < n; ++i)
    if (logits[static_cast<size_t>(i)] >= cutoff)
      candidates_.emplace_back(logits[static_cast<size_t>(i)], i);
  // Most likely first; equal probabilities keep index order (glibc's qsort is a stable merge sort).
  if (candidates_.empty()) return argmax(logits);  // only when n * topp <= 1
  std::stable_sort(candidates_.begin(), candidates_.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  float cumulative = 0.0f;
  size_t last = candidates_.size() - 1;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    cumulative += candidates_[i].first;
    if (cumulative > topp_) {
      last = i;
      break;
    }
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  auto token_at = [&](size_t i) { return i < candidates_.size() ? candidates_[i].second : -1; };
  for (size_t i = 0; i <= last; ++i) {
    const float lower = cdf;
    cdf += candidates_[i].first;
    if (r < cdf) {
      draw_ = {r, lower, cdf, i > 0 ? token_at(i - 1) : -1, i < last ? token_at(i + 1) : -1};
      return candidates_[i].second;
    }
  }
  draw_ = {r, cdf, cdf, last > 0 ? token_at(last - 1) : -1, -1};
  return candidates_[last].second;
}

}  // namespace tinycoral::llm
