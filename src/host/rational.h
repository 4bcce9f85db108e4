// Best rational approximations, for the Edge TPU's integer ADD weights (isa.md 2.1.4): the ratio
// r = s2/s1 of two float32 scales, taken exactly, approximated by the closest fraction with a
// denominator <= 32767 (r <= 1: weights (den, num); r > 1: 1/r approximated, weights (num, den)).
#pragma once

#include <cstdint>
#include <utility>

namespace tinycoral::host {

// The fraction p/q closest to num/den with q <= max_den (ties prefer the continued-fraction
// convergent), as Python's Fraction.limit_denominator computes it. num, den > 0.
std::pair<int64_t, int64_t> limit_denominator(uint64_t num, uint64_t den, int64_t max_den);

// (w1, w2) with w2/w1 ~ s2/s1, both in [0, 32767]. s1, s2 > 0.
std::pair<int32_t, int32_t> edgetpu_add_weights(float s1, float s2);

}  // namespace tinycoral::host
