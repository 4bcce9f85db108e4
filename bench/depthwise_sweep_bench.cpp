// The larger sweep behind tests/compiler/depthwise_simulation_test.cpp: N random layers of the
// gabor family (depthwise, with and without the 4x4 average pool) compiled by tinycoral, run on
// the virtual Edge TPU and compared with the CPU reference in `edgetpu` rounding. Prints every
// shape that is refused or differs and the totals; exits 1 if any byte differs.
//   depthwise_sweep_bench [N=300] [SEED=1] [MAX_H=256]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "support/depthwise_twin.h"

int main(int argc, char** argv) {
  using namespace tinycoral::compiler::testing;
  const int n = argc > 1 ? std::atoi(argv[1]) : 300;
  const unsigned seed = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 1u;
  const int max_h = argc > 3 ? std::atoi(argv[3]) : 256;
  std::mt19937 random(seed);
  int equal = 0, differ = 0, refused = 0;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (int i = 0; i < n; ++i) {
      const DepthwiseShape s = random_depthwise_shape(random, max_h);
      ChipCheck r;
      try {
        r = check_on_chip(s, random);
      } catch (const std::exception& e) {
        r.fault = e.what();
        r.differ[0] = r.differ[1] = 1;
      }
      if (!r.refused.empty()) {
        ++refused;
        std::printf("refused  %s: %s\n", describe(s).c_str(), r.refused.c_str());
      } else if (r.differ[0] || r.differ[1] || !r.fault.empty()) {
        ++differ;
        std::printf("DIFFERS  %s: %zu / %zu of %zu bytes %s\n", describe(s).c_str(), r.differ[0],
                    r.differ[1], r.bytes, r.fault.c_str());
      } else {
        ++equal;
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("%d layers: %d equal in every byte, %d differ, %d refused (%.1f s)\n", n, equal,
              differ, refused, seconds);
  return differ ? 1 : 0;
}
