#include "llm/sampler.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>

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

// Sorts keys ascending by least-significant-digit radix passes over the bits that differ: the
// probability part relative to its smallest value, packed above the index (an order-preserving
// map). O(n) where a comparison sort of a flat distribution's ~32,000 candidates is the sampler's
// largest cost.
void radix_sort(std::vector<uint64_t>& keys, size_t from, std::vector<uint64_t>& scratch,
                std::vector<uint32_t>& counts) {
  const size_t n = keys.size() - from;
  if (n < 256) {
    std::sort(keys.begin() + static_cast<std::ptrdiff_t>(from), keys.end());
    return;
  }
  uint32_t lo = 0xffffffffu, hi = 0, max_index = 0;
  for (size_t i = from; i < keys.size(); ++i) {
    const uint32_t p = static_cast<uint32_t>(keys[i] >> 32);
    lo = std::min(lo, p);
    hi = std::max(hi, p);
    max_index = std::max(max_index, static_cast<uint32_t>(keys[i]));
  }
  const int index_bits = std::bit_width(max_index);
  const int bits = index_bits + std::bit_width(hi - lo);
  constexpr int kDigit = 11;
  scratch.resize(n);
  counts.assign(size_t{1} << kDigit, 0);
  uint64_t* a = keys.data() + from;
  for (size_t i = 0; i < n; ++i)
    a[i] = (uint64_t{static_cast<uint32_t>(a[i] >> 32) - lo} << index_bits) | (a[i] & 0xffffffffu);
  uint64_t* src = a;
  uint64_t* dst = scratch.data();
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t i = 0; i < n; ++i) ++counts[(src[i] >> shift) & ((1u << kDigit) - 1)];
    uint32_t sum = 0;
    for (uint32_t& c : counts) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) dst[counts[(src[i] >> shift) & ((1u << kDigit) - 1)]++] = src[i];
    std::swap(src, dst);
  }
  const uint64_t index_mask = (uint64_t{1} << index_bits) - 1;
  for (size_t i = 0; i < n; ++i)
    a[i] =
        (uint64_t{static_cast<uint32_t>(src[i] >> index_bits) + lo} << 32) | (src[i] & index_mask);
}
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
  float most = 0;
  for (int i = 0; i < n; ++i) {
    const float p = logits[static_cast<size_t>(i)];
    if (p >= cutoff) {
      candidates_.push_back(candidate_key(p, i));
      most = std::max(most, p);
    }
  }
  if (candidates_.empty()) return argmax(logits);  // only when n * topp <= 1
  // run.c sorts every candidate, most likely first (glibc's qsort is a stable merge sort: equal
  // probabilities keep index order), then adds them up until the sum passes p. The keys give that
  // very order. A peaked distribution (a trained model) needs a few dozen tokens: select the 64
  // most likely (nth_element) and sort only them. If their sum does not pass p, radix-sort the
  // rest, all of which follow them (at once when 64 times the largest cannot pass p). The sums
  // are the same additions in the same order.
  float cumulative = 0.0f;
  size_t last = candidates_.size() - 1;
  const size_t head = 64 * most <= topp_ ? 0 : std::min<size_t>(candidates_.size(), 64);
  const auto head_end = candidates_.begin() + static_cast<std::ptrdiff_t>(head);
  if (head > 0 && head_end != candidates_.end())
    std::nth_element(candidates_.begin(), head_end, candidates_.end());
  std::sort(candidates_.begin(), head_end);
  bool sorted_all = head == candidates_.size();
  for (size_t i = 0; i < candidates_.size(); ++i) {
    if (i == head && !sorted_all) {
      radix_sort(candidates_, head, scratch_, counts_);
      sorted_all = true;
    }
    cumulative += key_probability(candidates_[i]);
    if (cumulative > topp_) {
      last = i;
      break;
    }
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
