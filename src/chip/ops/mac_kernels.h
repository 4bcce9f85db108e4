// The engine's hottest step, one input word times one 256-byte weight row, at two SIMD levels with
// identical results (the accumulators wrap at 32 bits like the chip's, isa.md 2.1.4 step 1, so
// int32 lanes with wrapping adds give exactly the bits of a wider sum).
#pragma once

#include <cstdint>

namespace tinycoral::chip::ops {

// The portable step for columns [begin, end): per-column sums in int32 (each of the 4 products is
// at most 255 * 255 in magnitude), accumulated through uint32 so that they wrap (signed overflow
// would be undefined). Inline: the engine calls it directly for narrow rows (depthwise: 4 columns),
// where a SIMD call costs more than it saves.
inline void word_times_row_columns(int32_t* acc, const uint8_t* x, const uint8_t* row,
                                   uint32_t begin, uint32_t end, int32_t in_zp, int32_t w_zp) {
  const int32_t x0 = x[0] - in_zp, x1 = x[1] - in_zp, x2 = x[2] - in_zp, x3 = x[3] - in_zp;
  for (uint32_t c = begin; c < end; ++c) {
    const uint8_t* w = row + 4 * c;
    const int32_t sum =
        x0 * (w[0] - w_zp) + x1 * (w[1] - w_zp) + x2 * (w[2] - w_zp) + x3 * (w[3] - w_zp);
    acc[c] = static_cast<int32_t>(static_cast<uint32_t>(acc[c]) + static_cast<uint32_t>(sum));
  }
}

// acc[c] += sum_b (x[b] - in_zp) * (row[4c + b] - w_zp) for c < columns (<= 64), wrapping mod 2^32.
// Columns at and beyond `columns` are left untouched.
using WordTimesRowKernel = void (*)(int32_t* acc, const uint8_t* x, const uint8_t* row,
                                    uint32_t columns, int32_t in_zp, int32_t w_zp);

// The fastest kernel this CPU runs (AVX2 when present, else portable C++); chosen once.
WordTimesRowKernel word_times_row_kernel();
// Each level, for tests that compare them (nullptr when the CPU lacks it).
WordTimesRowKernel word_times_row_portable();
WordTimesRowKernel word_times_row_avx2();

}  // namespace tinycoral::chip::ops
