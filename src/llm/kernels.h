// The float32 and int8 inner loops of the llama2.c models, with an AVX2+FMA version picked at run
// time and a portable one. The float reductions add in the order gcc's -Ofast vectorization of
// run.c uses on an AVX-512 machine (16 lanes of fused multiply-adds, lanes folded 16 -> 8, a tail
// of 8 fused into the 8 lanes, folded 8 -> 4 -> 2 -> 1, then the last n % 8 terms one by one), so
// that our sums round like run.c's and near ties fall the same way. The portable version adds in
// the same order without fused multiply-adds.
#pragma once

#include <cstdint>
#include <functional>

namespace tinycoral::llm {

// sum_j a[j] * b[j]
float dot(const float* a, const float* b, int n);
// sum_j a[j]
float sum16(const float* a, int n);
// x[j] = expf(x[j] - shift); glibc's vector expf (libmvec, what gcc -Ofast calls in run.c's
// loops) on blocks of 8 where available, scalar expf for the rest
void exp_shifted(float* x, int n, float shift);
// y[j] += a * x[j] (fused where the CPU can)
void axpy(float a, const float* x, float* y, int n);
// y[j] += a * (float(q[j] - zero) * scale), each product and sum rounded on its own (never fused),
// so both versions give the same bits: int8 values dequantized and weighted into float sums (the
// fused layers' attention sum over the u cache)
void axpy_dequantized(float a, const int8_t* q, int32_t zero, float scale, float* y, int n);
// acc[j] += a * q[j] in int32 (exact while the sums fit; chip attention's weighted sum)
void axpy_int8(int32_t a, const int8_t* q, int32_t* acc, int n);
// out[i] = dot(w + i * n, x, n) for i in [begin, end)
void matvec_rows(const float* w, const float* x, float* out, int n, int begin, int end);
// out[i] = sum_j float(w[i][j]) * x[j] for i in [begin, end): int8 rows against float x (the
// classifier's bound for greedy decoding; any order)
void matvec_q8f_rows(const int8_t* w, const float* x, float* out, int n, int begin, int end);
// acc[i] = sum_j int32(w[i][j]) * int32(x[j]) for i in [begin, end): exact int32 sums of int8
void matvec_int8_rows(const int8_t* w, const int8_t* x, int32_t* acc, int n, int begin, int end);

bool kernels_use_avx2();
// Tests: force the portable kernels (false) or the best available (true).
void set_kernels_use_avx2(bool use);

}  // namespace tinycoral::llm
