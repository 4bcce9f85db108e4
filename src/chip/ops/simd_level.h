// The SIMD level the op kernels run at (mac_kernels, output_words): AVX2 when this CPU has it,
// checked once, else the portable code. Each kernel family offers both levels, for the tests that
// compare them, and its fastest through best_kernel.
#pragma once

namespace tinycoral::chip::ops {

inline bool cpu_has_avx2() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
#else
  return false;
#endif
}

// `avx2` when there is one for this CPU (nullptr otherwise), else `portable`.
template <typename Kernel>
Kernel best_kernel(Kernel avx2, Kernel portable) {
  return avx2 ? avx2 : portable;
}

}  // namespace tinycoral::chip::ops
