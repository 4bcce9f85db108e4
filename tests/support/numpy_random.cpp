// numpy's legacy stream (numpy_random.h), checked against numpy 1.24 in
// tests/host/numpy_random_test.cpp.
#include "support/numpy_random.h"

#include <cmath>

#include "common/error.h"

namespace tinycoral::testing {

double NumpyRandomState::next_double() {
  const uint32_t a = static_cast<uint32_t>(mt_()) >> 5, b = static_cast<uint32_t>(mt_()) >> 6;
  return (a * 67108864.0 + b) / 9007199254740992.0;
}

double NumpyRandomState::gauss() {
  if (has_gauss_) {
    has_gauss_ = false;
    return gauss_;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * next_double() - 1.0;
    x2 = 2.0 * next_double() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  gauss_ = f * x1;
  has_gauss_ = true;
  return f * x2;
}

std::vector<double> NumpyRandomState::randn(size_t n) {
  std::vector<double> out(n);
  for (auto& v : out) v = gauss();
  return out;
}

std::vector<uint8_t> NumpyRandomState::randint_uint8(int low, int high, size_t n) {
  if (low < 0 || high > 256 || high <= low)
    fail("randint_uint8: bad range [", low, ", ", high, ")");
  const uint32_t range = static_cast<uint32_t>(high - low - 1);  // largest offset
  std::vector<uint8_t> out(n, static_cast<uint8_t>(low));
  if (range == 0) return out;
  uint32_t mask = range;  // the smallest all-ones mask covering the range
  for (int s = 1; s < 8; s <<= 1) mask |= mask >> s;
  // A 32-bit draw gives four bytes, lowest first; the leftover bytes die with the call.
  uint32_t buf = 0;
  int left = 0;
  auto next_byte = [&] {
    if (left == 0) {
      buf = static_cast<uint32_t>(mt_());
      left = 3;
    } else {
      buf >>= 8;
      --left;
    }
    return buf & 0xffu;
  };
  for (auto& v : out) {
    uint32_t x;
    if (range == 0xff) {
      x = next_byte();
    } else {
      do x = next_byte() & mask;
      while (x > range);
    }
    v = static_cast<uint8_t>(low + static_cast<int>(x));
  }
  return out;
}

}  // namespace tinycoral::testing
