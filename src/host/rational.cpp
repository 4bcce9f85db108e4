// Best rational approximations (rational.h).
#include "host/rational.h"

#include <cmath>

#include "common/error.h"

namespace tinycoral::host {

namespace {
__extension__ typedef __int128 Int128;

Int128 abs128(Int128 v) { return v < 0 ? -v : v; }
}  // namespace

std::pair<int64_t, int64_t> limit_denominator(uint64_t num, uint64_t den, int64_t max_den) {
  // Reduce first so an exactly representable fraction comes back as itself.
  uint64_t g = num, h = den;
  while (h != 0) {
    const uint64_t t = g % h;
    g = h;
    h = t;
  }
  num /= g;
  den /= g;
  if (den <= static_cast<uint64_t>(max_den))
    return {static_cast<int64_t>(num), static_cast<int64_t>(den)};
  Int128 p0 = 0, q0 = 1, p1 = 1, q1 = 0;
  Int128 n = num, d = den;
  for (int guard = 0; guard < 200 && d != 0; ++guard) {
    const Int128 a = n / d;
    const Int128 q2 = q0 + a * q1;
    if (q2 > max_den) break;
    const Int128 p2 = p0 + a * p1;
    p0 = p1;
    q0 = q1;
    p1 = p2;
    q1 = q2;
    const Int128 r = n - a * d;
    n = d;
    d = r;
  }
  const Int128 k = (max_den - q0) / q1;
  const Int128 bp = p0 + k * p1, bq = q0 + k * q1;  // bound 1
  // |p1/q1 - num/den| <= |bp/bq - num/den|  <=>  |p1*den - num*q1| * bq <= |bp*den - num*bq| * q1
  const Int128 e2 = abs128(p1 * static_cast<Int128>(den) - static_cast<Int128>(num) * q1) * bq;
  const Int128 e1 = abs128(bp * static_cast<Int128>(den) - static_cast<Int128>(num) * bq) * q1;
  if (e2 <= e1) return {static_cast<int64_t>(p1), static_cast<int64_t>(q1)};
  return {static_cast<int64_t>(bp), static_cast<int64_t>(bq)};
}

std::pair<int32_t, int32_t> edgetpu_add_weights(float s1, float s2) {
  constexpr int64_t kLimit = 32767;
  if (!(s1 > 0) || !(s2 > 0) || !std::isfinite(s1) || !std::isfinite(s2))
    fail("ADD scales must be positive and finite");
  // s = m * 2^e exactly with a 24-bit integer m.
  int e1 = 0, e2 = 0;
  const auto m1 = static_cast<uint64_t>(std::ldexp(std::frexp(s1, &e1), 24));
  const auto m2 = static_cast<uint64_t>(std::ldexp(std::frexp(s2, &e2), 24));
  const int shift = e2 - e1;  // r = s2/s1 = m2 * 2^shift / m1
  const bool r_le_1 = (shift < 0) || (shift == 0 && m2 <= m1);
  // Approximate the ratio that is <= 1: small / big.
  uint64_t num = r_le_1 ? m2 : m1, den = r_le_1 ? m1 : m2;
  const int s = shift < 0 ? -shift : shift;
  if (s > 38) return r_le_1 ? std::pair<int32_t, int32_t>{1, 0} : std::pair<int32_t, int32_t>{0, 1};
  den <<= s;
  const auto [p, q] = limit_denominator(num, den, kLimit);
  if (r_le_1) return {static_cast<int32_t>(q), static_cast<int32_t>(p)};
  return {static_cast<int32_t>(p), static_cast<int32_t>(q)};
}

}  // namespace tinycoral::host
