#include "llm/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "llm/kernels.h"

namespace tinycoral::llm {

namespace {
// A probability is positive and finite, so its bits order like its value; inverted, ascending keys
// put the most likely first, and the index below breaks ties in index order.
uint64_t candidate_key(float p, int index) {
  return uint64_t{0x7fffffffu - std::bit_cast<uint32_t>(p)} << 32 | static_cast<uint32_t>(index);
}
float key_probability(uint64_t key) {
  return std::bit_cast<float>(0x7fffffffu - static_cast<uint32_t>(key >> 32));
}
int key_token(uint64_t key) { return static_cast<int>(static_cast<uint32_t>(key)); }
}  // namespace

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
      candidates_.push_back(candidate_key(logits[static_cast<size_t>(i)], i));
  if (candidates_.empty()) return argmax(logits);  // only when n * topp <= 1
  // run.c sorts every candidate, most likely first (glibc's qsort is a stable merge sort: equal
  // probabilities keep index order), then adds them up until the sum passes p. The keys give that
  // very order, and only the prefix the sum reaches has to be sorted: select the next chunk
  // (nth_element), sort it, add it, double the chunk. A peaked distribution sorts a few dozen
  // tokens instead of thousands; the sums are the same additions in the same order.
  float cumulative = 0.0f;
  size_t last = candidates_.size() - 1;
  bool found = false;
  for (size_t done = 0, chunk = 64; !found && done < candidates_.size(); chunk *= 2) {
    const auto from = candidates_.begin() + static_cast<std::ptrdiff_t>(done);
    const size_t end = std::min(candidates_.size(), done + chunk);
    const auto to = candidates_.begin() + static_cast<std::ptrdiff_t>(end);
    if (to != candidates_.end()) std::nth_element(from, to, candidates_.end());
    std::sort(from, to);
    for (size_t i = done; i < end; ++i) {
      cumulative += key_probability(candidates_[i]);
      if (cumulative > topp_) {
        last = i;
        found = true;
        break;
      }
    }
    done = end;
  }
  const float r = coin * cumulative;
  float cdf = 0.0f;
  auto token_at = [&](size_t i) { return key_token(candidates_[i]); };
  for (size_t i = 0; i <= last; ++i) {
    const float lower = cdf;
    cdf += key_probability(candidates_[i]);
    if (r < cdf) {
      draw_ = {r, lower, cdf, i > 0 ? token_at(i - 1) : -1, i < last ? token_at(i + 1) : -1};
      return key_token(candidates_[i]);
    }
  }
  draw_ = {r, cdf, cdf, last > 0 ? token_at(last - 1) : -1, -1};
  return key_token(candidates_[last]);
}

}  // namespace tinycoral::llm
