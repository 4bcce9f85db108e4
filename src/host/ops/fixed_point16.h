// 16-bit fixed-point arithmetic as TFLite's integer LSTM uses it (gemmlowp's int16 FixedPoint):
// Q-format values with a compile-time number of integer bits, saturating rounding doubling high
// multiplies, wrapping adds, and the exp / logistic / tanh approximations whose exact bits the
// LSTM's gates depend on. Everything works on raw int16 values; `IB` is the integer bit count.
#pragma once

#include <cstdint>

#include "host/rounding.h"

namespace tinycoral::host::fx16 {

// int16 results of int arithmetic wrap (two's complement), as the C++ int16 conversions do.
constexpr int16_t wrap(int32_t v) { return static_cast<int16_t>(static_cast<uint16_t>(v)); }

constexpr int16_t mul(int16_t a, int16_t b) {  // saturating rounding doubling high multiply
  if (a == b && a == INT16_MIN) return INT16_MAX;
  const int32_t ab = int32_t{a} * int32_t{b};
  const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
  return static_cast<int16_t>((ab + nudge) / (1 << 15));
}

constexpr int16_t rounding_divide_by_pot(int16_t x, int exponent) {
  const int16_t mask = wrap((1 << exponent) - 1);
  const int16_t remainder = static_cast<int16_t>(x & mask);
  const int16_t threshold = wrap((mask >> 1) + (x < 0 ? 1 : 0));
  return wrap((x >> exponent) + (remainder > threshold ? 1 : 0));
}

// x * 2^E: saturating for E > 0, rounding for E < 0.
template <int E>
constexpr int16_t mul_by_pot(int16_t x) {
  if constexpr (E > 0) {
    constexpr int32_t threshold = (1 << (15 - E)) - 1;
    if (x > threshold) return INT16_MAX;
    if (x < -threshold) return INT16_MIN;
    return wrap(int32_t{x} * (1 << E));
  } else if constexpr (E < 0) {
    return rounding_divide_by_pot(x, -E);
  } else {
    return x;
  }
}

// Changes the integer bits of a value from Src to Dst (saturating / rounding).
template <int Dst, int Src>
constexpr int16_t rescale(int16_t x) {
  return mul_by_pot<Src - Dst>(x);
}

constexpr int16_t rounding_half_sum(int16_t a, int16_t b) {
  const int32_t sum = int32_t{a} + int32_t{b};
  return static_cast<int16_t>((sum + (sum >= 0 ? 1 : -1)) / 2);
}

constexpr int16_t saturating_add(int16_t a, int16_t b) {
  const int32_t sum = int32_t{a} + int32_t{b};
  return static_cast<int16_t>(sum > INT16_MAX ? INT16_MAX : (sum < INT16_MIN ? INT16_MIN : sum));
}

// A constant given as a Q0.31 int32, rounded to 16 bits (gemmlowp's constant initializer).
inline int16_t constant(int32_t q31) {
  return static_cast<int16_t>(host::rounding_divide_by_pot(q31, 16));
}

template <int IB>
constexpr int16_t one() {
  return IB == 0 ? INT16_MAX : static_cast<int16_t>(1 << (15 - IB));
}

// exp(a) for a in [-1/4, 0), Q0.15 in and out (Taylor expansion around -1/8).
inline int16_t exp_on_quarter_interval(int16_t a) {
  const int16_t c = constant(1895147668);         // exp(-1/8)
  const int16_t one_third = constant(715827883);  // 1/3
  const int16_t x = wrap(a + (1 << 12));          // a + 1/8
  const int16_t x2 = mul(x, x);
  const int16_t x3 = mul(x2, x);
  const int16_t x4 = mul(x2, x2);
  const int16_t x4_over_4 = mul_by_pot<-2>(x4);
  const int16_t poly = mul_by_pot<-1>(wrap(mul(wrap(x4_over_4 + x3), one_third) + x2));
  return saturating_add(c, mul(c, wrap(x + poly)));
}

// exp(a) for a <= 0 given with IB integer bits; result Q0.15.
template <int IB>
int16_t exp_on_negative_values(int16_t a) {
  constexpr int kFrac = 15 - IB;
  const int16_t quarter = static_cast<int16_t>(1 << (kFrac - 2));
  const int16_t mask = wrap(quarter - 1);
  const int16_t a_mod = wrap((a & mask) - quarter);
  int16_t result = exp_on_quarter_interval(rescale<0, IB>(a_mod));
  const int16_t remainder = wrap(a_mod - a);
  // Multiply in exp(-2^E) for every set bit of the remainder (a barrel shifter).
  constexpr int32_t kMultipliers[7] = {1672461947, 1302514674, 790015084, 290630308,
                                       39332535,   720401,     242};
  for (int e = -2; e <= 4; ++e) {
    if (IB > e) {
      const int shift = kFrac + e;
      if (remainder & wrap(1 << shift)) result = mul(result, constant(kMultipliers[e + 2]));
    }
  }
  if constexpr (IB > 5) {
    const int16_t clamp = constant(-(1 << (36 - IB)));  // -32
    if (a < clamp) result = 0;
  }
  if (a == 0) result = one<0>();
  return result;
}

// Newton-Raphson reciprocal of (1 + a) / 2 in Q2.13, three steps (48/17 - 32/17 d start).
inline int16_t reciprocal_half_denominator(int16_t half_den) {
  const int16_t c48_17 = constant(1515870810);
  const int16_t cneg32_17 = constant(-1010580540);
  int16_t x = wrap(c48_17 + mul(half_den, cneg32_17));
  for (int i = 0; i < 3; ++i) {
    const int16_t hdx = mul(half_den, x);
    const int16_t one_minus = wrap(one<2>() - hdx);
    x = wrap(x + rescale<2, 4>(mul(x, one_minus)));
  }
  return x;  // Q2.13
}

// 1 / (1 + a) for a in (0, 1), Q0.15.
inline int16_t one_over_one_plus_x(int16_t a) {
  const int16_t x = reciprocal_half_denominator(rounding_half_sum(a, one<0>()));
  return rescale<0, 1>(x);  // x / 2, read as Q1.14
}

// (1 - a) / (1 + a) for a in (0, 1), Q0.15.
inline int16_t one_minus_x_over_one_plus_x(int16_t a) {
  const int16_t x = reciprocal_half_denominator(rounding_half_sum(a, one<0>()));
  return rescale<0, 2>(wrap(x - one<2>()));
}

// logistic(a), a with IB integer bits, result Q0.15.
template <int IB>
int16_t logistic(int16_t a) {
  const int16_t abs_a = a > 0 ? a : wrap(-a);
  const int16_t positive = one_over_one_plus_x(exp_on_negative_values<IB>(wrap(-abs_a)));
  if (a == 0) return constant(1 << 30);  // 1/2
  return a > 0 ? positive : wrap(one<0>() - positive);
}

// tanh(a), a with IB integer bits, result Q0.15.
template <int IB>
int16_t tanh(int16_t a) {
  const int16_t n = a < 0 ? a : wrap(-a);
  const int16_t t = one_minus_x_over_one_plus_x(exp_on_negative_values<IB + 1>(n));
  if (a == 0) return 0;
  return a < 0 ? wrap(-t) : t;
}

// tanh with a run-time integer bit count 0..6 (TFLite's dispatch); false when out of range.
inline bool tanh_dynamic(int ib, const int16_t* in, int16_t* out, int n) {
  switch (ib) {
#define TINYCORAL_TANH_CASE(k)                           \
  case k:                                                \
    for (int i = 0; i < n; ++i) out[i] = tanh<k>(in[i]); \
    return true;
    TINYCORAL_TANH_CASE(0)
    TINYCORAL_TANH_CASE(1)
    TINYCORAL_TANH_CASE(2)
    TINYCORAL_TANH_CASE(3)
    TINYCORAL_TANH_CASE(4)
    TINYCORAL_TANH_CASE(5)
    TINYCORAL_TANH_CASE(6)
#undef TINYCORAL_TANH_CASE
    default:
      return false;
  }
}

}  // namespace tinycoral::host::fx16
