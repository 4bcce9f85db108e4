// Checks that every SIMD level this CPU supports gives exactly the results of plain loops, for each
// qgemm.h kernel, over random shapes and values including the extremes (all 255 x -128, INT32_MIN
// accumulators, the largest shifts). A plain program with no dependencies beyond qgemm.cpp and its
// SIMD files, so that tests/host/cross_check.sh can cross-compile it and run it under qemu-user
// (aarch64 NEON with and without udot); the native build runs it as a test too.
// Prints one line per level; exits 1 at the first difference, naming the kernel and the case.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "host/qgemm.h"
#include "host/rounding.h"

using namespace tinycoral::host;

namespace {

std::mt19937 rng(12345);

int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

// Random bytes; in one case of four all at one extreme, to reach the largest sums.
template <typename T>
std::vector<T> random_bytes(size_t n, int lo, int hi) {
  std::vector<T> v(n);
  const int mode = uniform(0, 3);
  for (auto& x : v) x = static_cast<T>(mode == 0 ? hi : mode == 1 ? lo : uniform(lo, hi));
  return v;
}

[[noreturn]] void fail(const char* kernel, SimdLevel level, const std::string& what) {
  std::printf("FAIL: %s at %s differs from plain loops: %s\n", kernel, simd_level_name(level),
              what.c_str());
  std::exit(1);
}

int check_gemm(SimdLevel level) {
  int cases = 0;
  for (int rep = 0; rep < 60; ++rep, ++cases) {
    const int m = uniform(1, 9), n = uniform(1, 37), kp = kGemmKAlign * uniform(1, 4);
    const size_t lda = static_cast<size_t>(kp + uniform(0, 3) * 16),
                 ldc = static_cast<size_t>(n + uniform(0, 5));
    const auto a = random_bytes<uint8_t>(static_cast<size_t>(m) * lda, 0, 255);
    const auto b =
        random_bytes<int8_t>(static_cast<size_t>(n) * static_cast<size_t>(kp), -128, 127);
    std::vector<int32_t> got(static_cast<size_t>(m) * ldc, -7), want = got;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        int64_t s = 0;
        for (int k = 0; k < kp; ++k)
          s += int64_t{a[static_cast<size_t>(i) * lda + static_cast<size_t>(k)]} *
               b[static_cast<size_t>(j) * static_cast<size_t>(kp) + static_cast<size_t>(k)];
        want[static_cast<size_t>(i) * ldc + static_cast<size_t>(j)] = static_cast<int32_t>(s);
      }
    gemm_u8s8(a.data(), lda, b.data(), got.data(), ldc, m, n, kp, level);
    if (got != want)
      fail("gemm_u8s8", level,
           "m " + std::to_string(m) + " n " + std::to_string(n) + " kp " + std::to_string(kp));
    // The VNNI panel layout, where the level has it.
    const auto panels = pack_vnni_panels(b.data(), n, kp);
    const size_t pldc = static_cast<size_t>((n + 15) / 16 * 16);
    std::vector<int32_t> pgot(static_cast<size_t>(m) * pldc, -7);
    if (gemm_u8s8_panels(panels.data(), n, kp, a.data(), lda, m, pgot.data(), pldc, level))
      for (int i = 0; i < m; ++i)
        if (std::memcmp(&pgot[static_cast<size_t>(i) * pldc], &want[static_cast<size_t>(i) * ldc],
                        static_cast<size_t>(n) * sizeof(int32_t)) != 0)
          fail("gemm_u8s8_panels", level, "m " + std::to_string(m) + " n " + std::to_string(n));
  }
  return cases;
}

int check_copy_flip_sum(SimdLevel level) {
  int cases = 0;
  for (int rep = 0; rep < 40; ++rep, ++cases) {
    const size_t n = static_cast<size_t>(uniform(0, 300));
    const auto src = random_bytes<uint8_t>(n, 0, 255);
    const uint8_t flip = rep % 2 ? 0x80 : 0;
    std::vector<uint8_t> got(n), want(n);
    int32_t want_sum = 0;
    for (size_t i = 0; i < n; ++i) want_sum += want[i] = src[i] ^ flip;
    if (copy_flip_sum(got.data(), src.data(), n, flip, level) != want_sum || got != want)
      fail("copy_flip_sum", level, "n " + std::to_string(n));
  }
  return cases;
}

template <typename T>
int check_depthwise_tap(SimdLevel level) {
  int cases = 0;
  for (int rep = 0; rep < 40; ++rep, ++cases) {
    const int n = uniform(1, 70);
    const bool u8 = std::is_same_v<T, uint8_t>;
    const auto x = random_bytes<T>(static_cast<size_t>(n), u8 ? 0 : -128, u8 ? 255 : 127);
    const int32_t zx = u8 ? uniform(0, 255) : uniform(-128, 127);
    std::vector<int32_t> w(static_cast<size_t>(n)), acc(static_cast<size_t>(n));
    for (auto& v : w) v = uniform(-255, 255);
    for (auto& v : acc) v = uniform(-1000000, 1000000);
    auto want = acc;
    for (size_t c = 0; c < want.size(); ++c) want[c] += (int32_t{x[c]} - zx) * w[c];
    depthwise_tap(acc.data(), x.data(), w.data(), zx, n, level);
    if (acc != want) fail("depthwise_tap", level, "n " + std::to_string(n));
  }
  return cases;
}

int check_requantize(SimdLevel level) {
  int cases = 0;
  for (int rep = 0; rep < 60; ++rep, ++cases) {
    const int n = uniform(1, 40);
    const auto sn = static_cast<size_t>(n);
    TfliteRequantTable t;
    for (int c = 0; c < n; ++c) {
      // Multipliers as quantize_multiplier makes them (0 or 2^30 .. 2^31 - 1); small shifts with
      // the multiplier 0.5 and small accumulators reach the exact ties.
      const int shift = uniform(0, 1) ? uniform(-3, 2) : uniform(-20, 6);
      const int pick = uniform(0, 4);
      t.mult.push_back(pick == 0   ? INT32_MAX
                       : pick == 1 ? 1 << 30
                       : pick == 2 ? 0
                                   : uniform(1 << 30, INT32_MAX));
      t.left.push_back(shift > 0 ? shift : 0);
      t.right.push_back(shift > 0 ? 0 : -shift);
    }
    const bool i8 = rep % 2;
    t.zero_point = i8 ? uniform(-128, 127) : uniform(0, 255);
    t.lo = i8 ? -128 : 0;
    t.hi = i8 ? 127 : 255;
    std::vector<int32_t> acc(sn), aw(sn), offset(sn);
    for (size_t c = 0; c < sn; ++c) {
      const int pick = uniform(0, 9);
      acc[c] = pick == 0   ? INT32_MIN
               : pick == 1 ? INT32_MAX
               : pick < 5  ? uniform(-64, 64)
                           : uniform(-70000, 70000);
      aw[c] = uniform(-255, 255);
      offset[c] = uniform(-100000, 100000);
    }
    const int32_t xs = uniform(0, 100000);
    const bool with_terms = rep % 3 == 0;
    std::vector<uint8_t> got(sn), want(sn);
    for (size_t c = 0; c < sn; ++c) {
      uint32_t x = static_cast<uint32_t>(acc[c]);
      if (with_terms)
        x = x - static_cast<uint32_t>(aw[c]) * static_cast<uint32_t>(xs) +
            static_cast<uint32_t>(offset[c]);
      const QuantizedMultiplier q{t.mult[c], t.left[c] > 0 ? t.left[c] : -t.right[c]};
      // Modulo 2^32, as the kernels add (signed overflow would be undefined).
      int32_t v = static_cast<int32_t>(
          static_cast<uint32_t>(multiply_by_quantized_multiplier(static_cast<int32_t>(x), q)) +
          static_cast<uint32_t>(t.zero_point));
      v = v < t.lo ? t.lo : v > t.hi ? t.hi : v;
      want[c] = static_cast<uint8_t>(v);
    }
    tflite_requantize_row(acc.data(), with_terms ? aw.data() : nullptr, xs,
                          with_terms ? offset.data() : nullptr, t, n, got.data(), level);
    if (got != want) fail("tflite_requantize_row", level, "n " + std::to_string(n));
  }
  return cases;
}

}  // namespace

int main() {
  for (SimdLevel level : supported_simd_levels()) {
    const int cases = check_gemm(level) + check_copy_flip_sum(level) +
                      check_depthwise_tap<uint8_t>(level) + check_depthwise_tap<int8_t>(level) +
                      check_requantize(level);
    std::printf("%s: %d cases equal to plain loops\n", simd_level_name(level), cases);
  }
  std::printf("detected: %s\n", simd_level_name(detected_simd_level()));
  return 0;
}
