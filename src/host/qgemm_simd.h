// The architecture-specific kernels behind qgemm.h's dispatch (qgemm.cpp); each has the contract of
// the qgemm.h function of the same name. Declared only on the architecture that has them.
#pragma once

#include <cstddef>
#include <cstdint>

#include "host/qgemm.h"

namespace tinycoral::host::simd {

#if defined(__x86_64__)
void gemm_avx2(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp);
void gemm_vnni(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp);
void panels_vnni(const int8_t* panels, int np, int kp, const uint8_t* a, size_t lda, int m,
                 int32_t* c, size_t ldc);
int32_t copy_flip_sum_avx2(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip);
void depthwise_tap_avx2(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n);
void depthwise_tap_avx2(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n);
void requantize_row_avx512(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                           const TfliteRequantTable& t, int n, uint8_t* out);
#endif

#if defined(__aarch64__)
bool cpu_has_dotprod();
void gemm_neon(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m, int n,
               int kp);
void gemm_neon_dot(const uint8_t* a, size_t lda, const int8_t* b, int32_t* c, size_t ldc, int m,
                   int n, int kp);
int32_t copy_flip_sum_neon(uint8_t* dst, const uint8_t* src, size_t n, uint8_t flip);
void depthwise_tap_neon(int32_t* acc, const uint8_t* x, const int32_t* w, int32_t zx, int n);
void depthwise_tap_neon(int32_t* acc, const int8_t* x, const int32_t* w, int32_t zx, int n);
void requantize_row_neon(const int32_t* acc, const int32_t* aw, int32_t xs, const int32_t* offset,
                         const TfliteRequantTable& t, int n, uint8_t* out);
#endif

}  // namespace tinycoral::host::simd
