// Fan-out heads joined by elementwise operations (libredgetpu's looming_64x64_3x3: two 3x3 convs
// of one image, each squared by MUL(x, x), the squares ADDed, then an AVERAGE_POOL_2D and a
// RESHAPE): match_conv_chain recognises them as one heads layer with joins (ConvLayer::joins)
// and goes on with the chain. The test evaluates the recognised layers in the chip's arithmetic
// (acc, f32(acc) x mult, the clamps, round half to even, + the zero point) and compares every byte
// with the CPU twin in `edgetpu` rounding, on looming itself and on synthetic twins of the same
// form; then compiles each whole and runs it on the virtual Edge TPU: every byte equal too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "common/file.h"
#include "compiler/compile.h"
#include "compiler/conv_layer.h"
#include "compiler/partition.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "host/rounding.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/conv_parameters.h"
#include "support/conv_twin.h"
#include "support/testdata.h"
#include "support/twin_tensor.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using container::TensorType;

uint8_t saturate(int32_t v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

// An image [h][w][c] of uint8 values (the chip's domain).
struct Map {
  int h = 0, w = 0, c = 0;
  std::vector<uint8_t> v;
  uint8_t at(int y, int x, int ch) const {
    return v[(static_cast<size_t>(y) * w + x) * static_cast<size_t>(c) + static_cast<size_t>(ch)];
  }
};

// One layer (a convolution, a depthwise layer or a pool as the matcher fills it) over `x`:
// channels [c0, c0 + n) of its output with output zero point `zp` and clamps [lo, hi].
Map layer_channels(const ConvLayer& l, const Map& x, int c0, int n, int32_t zp, float lo,
                   float hi) {
  Map y{l.oh, l.ow, n, {}};
  const host::edgetpu::Clamps clamps{lo, hi};
  for (int oy = 0; oy < l.oh; ++oy)
    for (int ox = 0; ox < l.ow; ++ox)
      for (int k = 0; k < n; ++k) {
        const int oc = c0 + k;
        int32_t acc = l.bias.empty() ? 0 : l.bias.at(static_cast<size_t>(oc));
        for (int ky = 0; ky < l.kh; ++ky)
          for (int kx = 0; kx < l.kw; ++kx) {
            const int iy = oy * l.stride_h + ky - l.pad_top, ix = ox * l.stride_w + kx - l.pad_left;
            if (iy < 0 || iy >= l.h || ix < 0 || ix >= l.w) continue;  // the zero point: adds 0
            const size_t tap = static_cast<size_t>(ky) * l.kw + static_cast<size_t>(kx);
            if (l.depthwise) {
              const int32_t wv = l.weights.at(tap * static_cast<size_t>(l.cout) + oc) - l.weight_zp;
              acc += (x.at(iy, ix, oc) - l.in_zp) * wv;
            } else {
              for (int ic = 0; ic < l.cin; ++ic) {
                const int32_t wv =
                    l.weights.at((static_cast<size_t>(oc) * l.kh * l.kw + tap) * l.cin + ic) -
                    l.weight_zp_of(oc);
                acc += (x.at(iy, ix, ic) - l.in_zp) * wv;
              }
            }
          }
        y.v.push_back(saturate(
            host::edgetpu::requantize(acc, l.mult.at(static_cast<size_t>(oc)), clamps, zp)));
      }
  return y;
}

// The recognised chain evaluated in the chip's arithmetic: the heads (each its own output stage),
// their joins, then the layers after them.
std::vector<uint8_t> evaluate(const ConvChain& chain, const Map& image) {
  Map x = image;
  for (const ConvLayer& l : chain.layers) {
    if (l.heads.empty()) {
      x = layer_channels(l, x, 0, l.cout, l.out_zp, l.clamp_min, l.clamp_max);
      continue;
    }
    std::vector<Map> operands;
    for (const ConvLayer::Head& h : l.heads)
      operands.push_back(
          layer_channels(l, x, 64 * h.g0, h.cout, h.out_zp, h.clamp_min, h.clamp_max));
    for (const ConvLayer::Join& j : l.joins) {
      const Map& a = operands.at(static_cast<size_t>(j.a));
      const Map& b = operands.at(static_cast<size_t>(j.b));
      Map y{a.h, a.w, a.c, {}};
      for (size_t e = 0; e < a.v.size(); ++e) {
        const int32_t acc = j.mul ? (a.v[e] - j.a_zp) * (b.v[e] - j.b_zp)
                                  : j.w1 * a.v[e] + j.w2 * b.v[e] + j.offset;
        y.v.push_back(
            saturate(host::edgetpu::requantize(acc, j.mult, {j.clamp_min, j.clamp_max}, j.out_zp)));
      }
      operands.push_back(std::move(y));
    }
    x = operands.back();
  }
  return x.v;
}

// Recognises the twin's mapped part, checks its form (`heads` heads, `joins` joins, then
// `after` layers) and that the recognised layers compute the twin's bytes on `images` random
// images; then compiles the twin whole and runs it on the virtual Edge TPU through the runtime:
// every output byte equal to the twin's, its image padded on the host (a PAD before the custom
// op) only when `host_pad`. Returns the distinct output bytes seen.
size_t expect_joined_heads(const container::Model& twin, size_t heads, size_t joins, size_t after,
                           int images, std::mt19937& random, bool host_pad = false) {
  const std::vector<uint8_t> bytes = container::write_tflite(twin);
  const Graph graph = import_graph_bytes(bytes);
  const Partition p = partition(graph);
  ConvChain chain;
  EXPECT_EQ(match_conv_chain(graph, p.mapped_ops, chain), "");
  EXPECT_EQ(chain.layers.size(), 1 + after);
  if (chain.layers.size() != 1 + after) return 0;
  const ConvLayer& merged = chain.layers.front();
  EXPECT_EQ(merged.heads.size(), heads);
  EXPECT_EQ(merged.joins.size(), joins);
  const container::Tensor& in =
      twin.subgraphs[0].tensors.at(static_cast<size_t>(twin.subgraphs[0].inputs.at(0)));
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  host::Interpreter cpu(twin, options);
  const CompileResult r = compile_model(bytes);
  EXPECT_EQ(r.edgetpu_subgraphs, 1);
  if (r.edgetpu_subgraphs != 1) {
    for (const auto& row : r.rows) ADD_FAILURE() << row.op << ": " << row.status;
    return 0;
  }
  const container::Model compiled = container::read_tflite(r.tflite);
  size_t pads = 0;
  for (const auto& op : compiled.subgraphs.at(0).operators)
    pads += compiled.operator_codes.at(op.opcode_index).builtin_code ==
            static_cast<int32_t>(container::BuiltinOp::kPad);
  EXPECT_EQ(pads, host_pad ? 1u : 0u);
  host::InterpreterOptions tpu_options;
  runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(container::read_tflite(r.tflite), tpu_options);
  std::set<uint8_t> seen;
  for (int n = 0; n < images; ++n) {
    Map image{in.shape[1], in.shape[2], in.shape[3], {}};
    image.v.resize(static_cast<size_t>(image.h) * image.w * image.c);
    for (auto& b : image.v) b = static_cast<uint8_t>(random());
    cpu.set_input(0, image.v);
    cpu.invoke();
    const auto out = cpu.output_bytes(0);
    const std::vector<uint8_t> want(out.begin(), out.end());
    const std::vector<uint8_t> got = evaluate(chain, image);
    EXPECT_EQ(got, want) << "image " << n;
    tpu.set_input(0, image.v);
    tpu.invoke();
    const auto chip = tpu.output_bytes(0);
    EXPECT_EQ(std::vector<uint8_t>(chip.begin(), chip.end()), want)
        << "image " << n << " on the chip";
    seen.insert(want.begin(), want.end());
  }
  return seen.size();
}

struct TwinSpec {
  int h = 16, w = 16, cin = 1;
  int heads = 2, cout = 1, k = 3;
  bool same = false;
  bool squares = true;  // each head squared by MUL(x, x) before the ADDs; else the heads ADDed
  int pool = 4;         // AVERAGE_POOL_2D pool x pool, stride pool, VALID
};

// uint8 image -> QUANTIZE -> int8 -> `heads` CONV_2D of it -> MUL(x, x) each -> ADD of them in
// turn -> AVERAGE_POOL_2D -> RESHAPE [1, N] -> QUANTIZE -> uint8: looming's form, with random
// weights, biases and quantizations that spread the squares and their sums over most bytes.
container::Model joined_twin(const TwinSpec& s, std::mt19937& random) {
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const TensorType t8 = TensorType::kInt8;
  container::Model m;
  m.description = "joined heads twin";
  m.operator_codes = {{114, "", 1}, {3, "", 3}, {18, "", 2}, {0, "", 2}, {1, "", 2}, {22, "", 1}};
  m.buffers = {{}};
  container::Subgraph g;
  auto tensor = [&](container::Tensor t) {
    g.tensors.push_back(std::move(t));
    return static_cast<int>(g.tensors.size()) - 1;
  };
  auto op = [&](uint32_t code, std::vector<int32_t> ins, int out, uint8_t type,
                container::BuiltinOptions o) {
    container::Operator x;
    x.opcode_index = code;
    x.inputs = std::move(ins);
    x.outputs = {out};
    x.builtin_options_type = type;
    x.options = std::move(o);
    g.operators.push_back(std::move(x));
  };
  const float sx = 0.01f + 0.05f * unit(random);
  const int zx = static_cast<int>(random() % 160) + 48;
  const int image =
      tensor(testing::twin_tensor("image", TensorType::kUInt8, {1, s.h, s.w, s.cin}, {sx}, {zx}));
  const int x = tensor(testing::twin_tensor("x", t8, {1, s.h, s.w, s.cin}, {sx}, {zx - 128}));
  op(0, {image}, x, 0, {});
  const int oh = s.same ? s.h : s.h - s.k + 1, ow = s.same ? s.w : s.w - s.k + 1;
  const std::vector<int32_t> map = {1, oh, ow, s.cout};
  std::vector<int> terms;
  std::vector<float> term_scales;
  for (int hd = 0; hd < s.heads; ++hd) {
    const twins::ConvParameters p = twins::random_conv_parameters(
        twins::random_weight_scales(static_cast<size_t>(s.cout), random),
        static_cast<size_t>(s.cout) * s.k * s.k * s.cin, s.cout, 2000, random);
    const int wt =
        twins::add_conv_parameters(m, g, p, std::to_string(hd), {s.cout, s.k, s.k, s.cin}, sx);
    // The conv's sums spread over about 1.5 standard deviations of the output's range.
    const float sy = 1.5f * std::sqrt(static_cast<float>(s.k * s.k * s.cin)) * 74 * 74 * sx *
                     0.0009f / 127 * (0.7f + 0.6f * unit(random));
    const int zy = static_cast<int>(random() % 60) + 98;
    const int y = tensor(testing::twin_tensor(cat("head", hd), t8, map, {sy}, {zy - 128}));
    container::Conv2DOptions co;
    co.padding = s.same ? container::Padding::kSame : container::Padding::kValid;
    op(1, {x, wt, wt + 1}, y, 1, co);
    if (!s.squares) {
      terms.push_back(y);
      term_scales.push_back(sy);
      continue;
    }
    // Squares of |x| up to about 100 steps (most heads' values): most of them inside the range.
    const float sq = (100 * sy) * (100 * sy) / 255 * (1.0f + 1.0f * unit(random));
    const int q = tensor(testing::twin_tensor(cat("square", hd), t8, map, {sq}, {-128}));
    op(2, {y, y}, q, 21, container::ActivationOptions{});
    terms.push_back(q);
    term_scales.push_back(sq);
  }
  int sum = terms.front();
  float sum_scale = term_scales.front();
  for (size_t k = 1; k < terms.size(); ++k) {
    const float ss = (sum_scale + term_scales[k]) * (0.5f + 0.3f * unit(random));
    const int zs = s.squares ? -128 : static_cast<int>(random() % 60) - 30;
    const int t = tensor(testing::twin_tensor(cat("sum", k), t8, map, {ss}, {zs}));
    op(3, {sum, terms[k]}, t, 11, container::ActivationOptions{});
    sum = t;
    sum_scale = ss;
  }
  const int ph = oh / s.pool, pw = ow / s.pool;
  const float sp = sum_scale * (0.5f + 0.3f * unit(random));
  const int zp = s.squares ? -128 : static_cast<int>(random() % 40) - 20;
  const int pooled = tensor(testing::twin_tensor("pooled", t8, {1, ph, pw, s.cout}, {sp}, {zp}));
  container::Pool2DOptions po;
  po.padding = container::Padding::kValid;
  po.stride_h = po.stride_w = po.filter_h = po.filter_w = s.pool;
  op(4, {sum}, pooled, 5, po);
  const int n = ph * pw * s.cout;
  container::Buffer shape_buf;
  shape_buf.data = twins::le32({1, n});
  m.buffers.push_back(shape_buf);
  const int shape = tensor(testing::twin_tensor("shape", TensorType::kInt32, {2}, {}, {},
                                                static_cast<uint32_t>(m.buffers.size() - 1)));
  const int flat = tensor(testing::twin_tensor("flat", t8, {1, n}, {sp}, {zp}));
  container::ReshapeOptions ro;
  ro.new_shape = {1, n};
  op(5, {pooled, shape}, flat, 17, ro);
  const int out = tensor(testing::twin_tensor("out", TensorType::kUInt8, {1, n}, {sp}, {zp + 128}));
  op(0, {flat}, out, 0, {});
  g.inputs = {image};
  g.outputs = {out};
  m.subgraphs.push_back(std::move(g));
  return m;
}

TEST(JoinedHeads, LoomingIsRecognisedAndItsLayersComputeTheTwin) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const container::Model twin =
      container::read_tflite_file(data / "libredgetpu/looming_64x64_3x3.tflite");
  const Graph graph = import_graph(twin);
  ConvChain chain;
  ASSERT_EQ(match_conv_chain(graph, partition(graph).mapped_ops, chain), "");
  ASSERT_EQ(chain.layers.size(), 2u);
  const ConvLayer& heads = chain.layers[0];
  ASSERT_EQ(heads.heads.size(), 2u);
  EXPECT_EQ(heads.heads[0].output_name, "looming_detector_1/sobel_x_1/convolution1");
  EXPECT_EQ(heads.heads[1].output_name, "looming_detector_1/sobel_y_1/convolution");
  ASSERT_EQ(heads.joins.size(), 3u);  // x^2, y^2, x^2 + y^2
  EXPECT_TRUE(heads.joins[0].mul && heads.joins[0].a == 0 && heads.joins[0].b == 0);
  EXPECT_TRUE(heads.joins[1].mul && heads.joins[1].a == 1 && heads.joins[1].b == 1);
  EXPECT_TRUE(!heads.joins[2].mul && heads.joins[2].a == 2 && heads.joins[2].b == 3);
  const ConvLayer& pool = chain.layers[1];
  EXPECT_EQ(pool.kh, 21);  // (SAME convs: 64 x 64 squares, 21 x 21 windows)
  EXPECT_EQ(pool.h, 64);
  EXPECT_EQ(pool.oh * pool.ow, 9);
  EXPECT_EQ(chain.output_name, "StatefulPartitionedCall_1:0");
  std::mt19937 random(3);
  // (Looming's output takes few values: squares of a Sobel filter of noise, averaged.)
  EXPECT_GT(expect_joined_heads(twin, 2, 3, 1, 6, random), 2u);
}

TEST(JoinedHeads, SyntheticTwinsComputeTheirCpuReference) {
  std::mt19937 random(11);
  const std::vector<TwinSpec> specs = {
      {16, 16, 1, 2, 1, 3, false, true, 4},
      {20, 12, 1, 2, 1, 5, true, true, 4},
      {12, 12, 4, 2, 8, 3, true, true, 3},
      {18, 18, 3, 3, 2, 3, false, true, 8},
      {8, 16, 2, 2, 4, 1, true, true, 2},
      {16, 16, 1, 2, 1, 3, true, false, 4},
      {10, 10, 8, 3, 16, 3, true, false, 5},
      {64, 64, 1, 2, 1, 3, false, true, 16},
      // (looming_64x64_3x3's layers at 128 x 128: 42 x 42 windows of the SAME squares, a pool
      // whose 2 windows a position were not whole words: it took the image padded on the host.)
      {128, 128, 1, 2, 1, 3, true, true, 42},
      {64, 64, 1, 2, 1, 3, true, true, 6},
      // (Rows of 80 pixels of 4 words: each MUL run a piece of a row.)
      {8, 80, 4, 2, 16, 3, true, true, 4}};
  for (const TwinSpec& s : specs) {
    SCOPED_TRACE(cat(s.h, "x", s.w, "x", s.cin, ", ", s.heads, " heads of ", s.cout, " k", s.k,
                     s.same ? " SAME" : " VALID", s.squares ? " squared" : " added", ", pool ",
                     s.pool));
    // (1-3 channels go as they are, the heads' ops writing blocks of B pixels, unless the last
    // block is partial: then in 4-byte pixels padded on the host; rows that are not whole words,
    // 18 x 3, are repacked on the chip, no PAD.)
    int block = 1;
    while (block * s.cin % 4 != 0) ++block;
    const int ow = s.same ? s.w : s.w - s.k + 1;
    const size_t distinct = expect_joined_heads(joined_twin(s, random), s.heads,
                                                s.squares ? 2 * s.heads - 1 : s.heads - 1, 1, 3,
                                                random, s.cin % 4 != 0 && ow % block != 0);
    EXPECT_GT(distinct, 3u);
  }
}

// MUL(y, x) of two heads (their zero points differ, b streamed from the other head's slot): the
// second square of the twin made the product of both heads.
TEST(JoinedHeads, AProductOfTwoHeadsEqualsTheTwin) {
  std::mt19937 random(17);
  for (const TwinSpec& s : {TwinSpec{16, 16, 1, 2, 1, 3, true, true, 4},
                            TwinSpec{12, 12, 4, 2, 8, 3, false, true, 2}}) {
    SCOPED_TRACE(cat(s.h, "x", s.w, "x", s.cin, ", heads of ", s.cout));
    container::Model twin = joined_twin(s, random);
    std::vector<container::Operator>& ops = twin.subgraphs[0].operators;
    std::vector<int> heads, muls;
    for (size_t k = 0; k < ops.size(); ++k) {
      const int32_t code = twin.operator_codes.at(ops[k].opcode_index).builtin_code;
      if (code == 3) heads.push_back(ops[k].outputs.at(0));  // CONV_2D
      if (code == 18) muls.push_back(static_cast<int>(k));   // MUL
    }
    ASSERT_EQ(heads.size(), 2u);
    ASSERT_EQ(muls.size(), 2u);
    ops.at(static_cast<size_t>(muls[1])).inputs = {heads[1], heads[0]};
    EXPECT_GT(expect_joined_heads(twin, 2, 3, 1, 3, random), 3u);
  }
}

TEST(JoinedHeads, JoinsOfOtherTensorsOrHeadsReadElsewhereAreRefused) {
  std::mt19937 random(5);
  TwinSpec s;
  s.same = true;
  {  // A head that is also a graph output: the program keeps it on the chip.
    container::Model twin = joined_twin(s, random);
    twin.subgraphs[0].outputs.push_back(twin.subgraphs[0].operators.at(1).outputs.at(0));
    const Graph graph = import_graph_bytes(container::write_tflite(twin));
    ConvChain chain;
    EXPECT_EQ(match_conv_chain(graph, partition(graph).mapped_ops, chain),
              "a joined fan-out head that is also a graph output");
  }
  {  // A MUL of a head and the image the heads read.
    container::Model twin = joined_twin(s, random);
    container::Operator& mul = twin.subgraphs[0].operators.at(2);
    ASSERT_EQ(twin.operator_codes.at(mul.opcode_index).builtin_code, 18);
    mul.inputs[1] = twin.subgraphs[0].operators.at(1).inputs.at(0);
    const Graph graph = import_graph_bytes(container::write_tflite(twin));
    ConvChain chain;
    EXPECT_EQ(match_conv_chain(graph, partition(graph).mapped_ops, chain),
              "MUL after fan-out heads that reads other tensors than the heads'");
  }
}

}  // namespace
}  // namespace tinycoral::compiler
