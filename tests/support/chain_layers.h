// Random int8 matmuls as the chip path's generator layers, for the tests of the chain programs
// (compiler::generate_ffn_chain and the programs built on it): what ffn_chain_test.cpp and
// the joined programs' tests share.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "compiler/fc_codegen.h"
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

// The scores' layer of the joined programs' tests (compiler::generate_ffn_chain_softmax): `heads`
// heads of `positions` key rows each (64 a group), rows of `k` int8 bytes, drawn from `random` in
// the first `key_bytes`, zeros after; row o's multiplier mult(o); head h's groups at zero point
// z0 + 20 h (clamps of the whole uint8 range) on tiles[g], parameter unit units[g], reading the
// query from byte h * head_size; exp_mult(h) per head. Int8 input, as the llm path's rows.
struct ScoresLayerShape {
  int heads = 0, positions = 0, k = 0, head_size = 0, key_bytes = 0, z0 = 0;
  std::function<float(int)> mult, exp_mult;
  std::vector<int> tiles, units;
};
struct ScoresLayer {
  compiler::FcLayer layer;
  compiler::FcPlacement at;
  std::vector<float> exp_mult;
};
inline ScoresLayer scores_layer(const ScoresLayerShape& shape, std::mt19937& random) {
  ScoresLayer r;
  compiler::FcLayer& s = r.layer;
  s.n = shape.heads * shape.positions;
  s.k = shape.k;
  for (int i = 0; i < s.n * s.k; ++i)
    s.weights.push_back(i % s.k < shape.key_bytes
                            ? static_cast<int8_t>(static_cast<int>(random() % 255) - 127)
                            : int8_t{0});
  s.in_zp = 128;
  s.in_scale = 0.01f;
  s.out_scale = 1.0f;
  for (int o = 0; o < s.n; ++o) s.mult.push_back(shape.mult(o));
  const int groups_per_head = shape.positions / 64;
  for (int g = 0; g < compiler::fc_groups(s.n); ++g) {
    const int h = g / groups_per_head, z = shape.z0 + 20 * h;
    if (g % groups_per_head == 0) r.exp_mult.push_back(shape.exp_mult(h));
    s.group_out_zp.push_back(z);
    s.group_clamp_min.push_back(compiler::fc_clamp(0, z, 1.0f));
    s.group_clamp_max.push_back(compiler::fc_clamp(255, z, 1.0f));
    r.at.tiles.push_back(shape.tiles.at(size_t(g)));
    r.at.param_units.push_back(shape.units.at(size_t(g)));
    r.at.in_at.push_back(h * shape.head_size);
  }
  s.out_zp = s.group_out_zp[0];
  s.clamp_min = s.group_clamp_min[0];
  s.clamp_max = s.group_clamp_max[0];
  s.input_name = "x";
  s.output_name = "e";
  s.signed_input = true;
  return r;
}

}  // namespace tinycoral::testing
