// run.c's sampler, so that a seed writes the same story: greedy argmax at temperature 0, otherwise
// softmax(logits / temperature) and one coin from the xorshift* generator per token, drawn from
// the whole distribution (top-p <= 0 or >= 1) or from the smallest set of most likely tokens whose
// probabilities sum past top-p.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tinycoral::llm {

// xorshift* (Vigna), 64-bit state, the top 32 bits of the product; run.c's random_u32/random_f32.
class XorShiftRng {
 public:
  explicit XorShiftRng(uint64_t seed) : state_(seed) {}
  uint32_t next_u32() {
    state_ ^= state_ >> 12;
    state_ ^= state_ << 25;
    state_ ^= state_ >> 27;
    return static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  }
  float next_f32() { return static_cast<float>(next_u32() >> 8) / 16777216.0f; }  // [0, 1)

 private:
  uint64_t state_;
};

class Sampler {
 public:
  // run.c's parameter rules: temperature < 0 is 0; top-p outside [0, 1] is 0.9.
  Sampler(float temperature, float topp, uint64_t seed);
  // The next token; `logits` is overwritten with probabilities when temperature > 0.
  int sample(std::span<float> logits);

  // The last random draw: the coin, scaled as the sampler compares it, and the cumulative bounds
  // [lower, upper) of the token it picked, with the tokens just below and above in that order (-1
  // at an end). A coin within an ulp or two of a bound is a near tie of float sums.
  struct Draw {
    float coin = 0, lower = 0, upper = 0;
    int below = -1, above = -1;
  };
  const Draw& last_draw() const { return draw_; }

  float temperature() const { return temperature_; }
  float topp() const { return topp_; }

 private:
  float temperature_, topp_;
  XorShiftRng rng_;
  Draw draw_;
  // Nucleus candidates as sort keys: (probability descending, index ascending) in one integer.
  std::vector<uint64_t> candidates_, scratch_;
  std::vector<uint32_t> counts_;
};

int argmax(std::span<const float> v);
// In place, max-subtracted, float32 throughout.
void softmax(std::span<float> x);

}  // namespace tinycoral::llm
