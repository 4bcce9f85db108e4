// The integer reference of a scores program's output stage (fc_batch_codegen.h): head h's scores
// at positions t < n, row h * positions + t of `l`, reading the query bytes from h * head_size,
// requantized with its group's clamps and zero point, as bytes 0..255. Shared by the scores' and
// the joined attention program's simulation tests.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "compiler/fc_layer.h"
#include "host/rounding.h"

namespace tinycoral::compiler::testing {

inline std::vector<int32_t> reference_scores(const FcLayer& l, const std::vector<uint8_t>& x, int h,
                                             int n, int positions, int head_size) {
  std::vector<int32_t> score;
  for (int t = 0; t < n; ++t) {
    const int r = h * positions + t, g = r / 64;
    int32_t acc = 0;
    for (int j = 0; j < l.k; ++j)
      acc += (int32_t{x[size_t(h * head_size + j)]} - l.in_zp) *
             l.weights[size_t(r) * size_t(l.k) + size_t(j)];
    const host::edgetpu::Clamps clamps{l.group_clamp_min[size_t(g)], l.group_clamp_max[size_t(g)]};
    score.push_back(std::clamp(
        host::edgetpu::requantize(acc, l.mult[size_t(r)], clamps, l.group_out_zp[size_t(g)]), 0,
        255));
  }
  return score;
}

}  // namespace tinycoral::compiler::testing
