// Random int8 matmuls as the chip path's generator layers, for the tests of the chain programs
// (compiler::generate_ffn_chain and the programs built on it): what ffn_chain_test.cpp and
// the joined programs' tests share.
#pragma once

#include <map>
#include <memory>
#include <random>
#include <vector>

#include "compiler/fc_layer.h"
#include "llm/int8_model.h"
#include "runtime/edgetpu.h"
#include "runtime/program.h"

namespace tinycoral::testing {

// A rows x cols matmul of weights uniform in +-0.1, quantized for the given ranges.
inline llm::QuantizedMatmul random_matmul(int rows, int cols, llm::Calibration::Range in,
                                          llm::Calibration::Range out, std::mt19937& random) {
  std::uniform_real_distribution<float> w(-0.1f, 0.1f);
  std::vector<float> m(size_t(rows) * size_t(cols));
  for (float& v : m) v = w(random);
  return llm::quantize_matmul(llm::MatrixRef{m.data(), rows, cols}, in, out);
}

// Matmuls as one generator layer, group after group (`order`: which matmul's group comes next),
// each group with its matmul's output stage, in the chip's uint8 zero points; int8 boundaries.
inline compiler::FcLayer layer_of(const std::vector<const llm::QuantizedMatmul*>& order) {
  compiler::FcLayer l;
  l.k = order.front()->cols;
  l.in_zp = order.front()->in.zero_point + 128;
  l.in_scale = order.front()->in.scale;
  std::map<const llm::QuantizedMatmul*, int> next_row;
  for (const llm::QuantizedMatmul* q : order) {
    const int row0 = next_row[q];
    next_row[q] += 64;
    for (int r = 0; r < 64; ++r) {
      l.weights.insert(l.weights.end(), q->w.begin() + (row0 + r) * q->cols,
                       q->w.begin() + (row0 + r + 1) * q->cols);
      l.mult.push_back(q->multiplier[size_t(row0 + r)]);
    }
    l.group_out_zp.push_back(q->out.zero_point + 128);
    l.group_clamp_min.push_back(q->clamp_lo);
    l.group_clamp_max.push_back(q->clamp_hi);
  }
  l.n = static_cast<int>(l.mult.size());
  l.out_zp = l.group_out_zp.front();
  l.out_scale = order.front()->out.scale;
  l.clamp_min = l.group_clamp_min.front();
  l.clamp_max = l.group_clamp_max.front();
  l.input_name = "x";
  l.output_name = "y";
  l.signed_input = l.signed_output = true;
  return l;
}

// Runs `p` on `in` and returns all its outputs, one after the other.
inline std::vector<uint8_t> all_outputs_of(runtime::EdgeTpu& tpu,
                                           const std::shared_ptr<runtime::Program>& p,
                                           const std::vector<uint8_t>& in) {
  p->set_input(0, in);
  tpu.run(nullptr, p);
  std::vector<uint8_t> all;
  for (size_t i = 0; i < p->num_outputs(); ++i) {
    std::vector<uint8_t> o(p->output_bytes(i));
    p->get_output(i, o);
    all.insert(all.end(), o.begin(), o.end());
  }
  return all;
}

}  // namespace tinycoral::testing
