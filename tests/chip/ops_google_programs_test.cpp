// The op classes against Google's compiled programs (skipped without ../shared/testdata):
//  - every op instruction of the gen2020 MobileNet v1 programs and of gen2021 split_concat has a
//    known class;
//  - each depthwise op and the average pool of gen2020 MobileNet v1 0.25 computes, on tile 0, the
//    CPU twin's layer (its weights, bias, quantization) on pseudo-random inputs. The inputs are
//    placed where the instruction's own `in`/`par` walk reads them (a layout that needs two values
//    at one address fails the test), the expected output comes from a plain loop over the TFLite
//    layer definition with the chip's output stage, and the weight rows built from the twin are
//    found byte for byte in Google's parameter blob (docs/chip_ops.md has the evidence tables).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

struct Program {
  container::EdgeTpuModel model;
  std::vector<isa::Instruction> instructions;  // the execution program
  std::vector<uint8_t> parameters;             // the parameter-caching executable's blob
};

Program load_program(const std::filesystem::path& path) {
  Program p{container::read_edgetpu_model_file(path), {}, {}};
  for (const auto& op : p.model.edgetpu_ops)
    for (const auto& package : op.options.packages)
      for (const auto& exe : package.executables) {
        if (exe.type == container::ExecutableType::kParameterCaching) p.parameters = exe.parameters;
        if (exe.type != container::ExecutableType::kParameterCaching)
          for (const auto& bs : exe.bitstreams) {
            auto decoded = isa::decode(bs.data);
            p.instructions.insert(p.instructions.end(), decoded.begin(), decoded.end());
          }
      }
  return p;
}

bool is_op(const isa::Instruction& i) { return i.opcode() >= 1 && i.opcode() <= 3; }

TEST(OpsGooglePrograms, EveryOpHasAKnownClass) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  for (const char* name : {"gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                           "gen2020/mobilenet_v1_0.5_160_quant_edgetpu.tflite",
                           "gen2020/mobilenet_v1_1.0_224_quant_embedding_extractor_edgetpu.tflite",
                           "gen2021/split_concat_edgetpu.tflite"}) {
    const Program p = load_program(dir / name);
    int ops = 0;
    for (const auto& ins : p.instructions) {
      if (!is_op(ins)) continue;
      ++ops;
      const OpInstr op = decode_op(ins);
      EXPECT_NE(ops::classify(op), nullptr)
          << name << " word " << op.word_offset << ": " << describe_op_class(op);
    }
    EXPECT_GT(ops, 0) << name;
  }
}

// The twin's operators of one builtin kind, in execution order.
std::vector<const container::Operator*> twin_ops(const container::Model& m,
                                                 container::BuiltinOp kind) {
  std::vector<const container::Operator*> out;
  for (const auto& op : m.subgraphs[0].operators)
    if (m.code_of(op).builtin_code == static_cast<int32_t>(kind)) out.push_back(&op);
  return out;
}

// Tile 0's share of a dimension (isa.md 3.5: D/4 each, the remainder goes to row/column 0 first).
int tile0_share(int d) { return d / 4 + (d % 4 != 0 ? 1 : 0); }

uint32_t lcg(uint32_t& s) { return (s = s * 1664525u + 1013904223u) >> 24; }

float f32_mult(float sx, float sw, float sy) { return (sx * sw) * (1.0f / sy); }

uint8_t chip_output(int64_t acc, const OpInstr& op) {
  float y = static_cast<float>(static_cast<int32_t>(acc)) * op.mult;
  y = std::fmin(std::fmax(y, op.clamp_min), op.clamp_max);
  return static_cast<uint8_t>(std::clamp(std::nearbyint(y) + op.out_zp, 0.0f, 255.0f));
}

// Runs every depthwise op of `program` on tile 0 against its CPU twin layer. The op of a layer is
// found by its requantization multiplier (unique per layer) and 4-channel output groups, so the
// same check covers both compiler generations' encodings.
void check_depthwise_layers(const std::filesystem::path& program,
                            const std::filesystem::path& cpu) {
  const Program p = load_program(program);
  const container::Model twin = container::read_tflite_file(cpu);
  const auto layers = twin_ops(twin, container::BuiltinOp::kDepthwiseConv2D);
  const auto& TT = twin.subgraphs[0].tensors;
  std::vector<OpInstr> dw, producer;  // each depthwise op and the op before it (its input's writer)
  for (const auto* layer : layers) {
    const float mult = f32_mult(TT[layer->inputs[0]].quantization.scale[0],
                                TT[layer->inputs[1]].quantization.scale[0],
                                TT[layer->outputs[0]].quantization.scale[0]);
    OpInstr previous;
    bool found = false;
    for (const auto& ins : p.instructions) {
      if (!is_op(ins)) continue;
      OpInstr op = decode_op(ins);
      if (!found && op.mult == mult && op.out_ch == 3 && op.tile_mask & 1) {
        dw.push_back(op);
        producer.push_back(previous);
        found = true;
      }
      previous = op;
    }
    ASSERT_TRUE(found) << "no op with the multiplier of depthwise layer " << dw.size();
  }
  const auto& T = TT;
  for (size_t l = 0; l < dw.size(); ++l) {
    const OpInstr& op = dw[l];
    SCOPED_TRACE(cat("depthwise layer ", l, " (op at word ", op.word_offset, ")"));
    const auto& in_t = T[layers[l]->inputs[0]];
    const auto& w_t = T[layers[l]->inputs[1]];
    const auto& b_t = T[layers[l]->inputs[2]];
    const auto& out_t = T[layers[l]->outputs[0]];
    const auto& opt = std::get<container::DepthwiseConv2DOptions>(layers[l]->options);
    const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
    const int OH = out_t.shape[1], OW = out_t.shape[2], K = w_t.shape[1];
    const int s = opt.stride_h;
    const uint8_t* w = twin.buffers[w_t.buffer].data.data();
    std::vector<int32_t> bias(C);
    std::memcpy(bias.data(), twin.buffers[b_t.buffer].data.data(), 4 * C);
    // The instruction carries the twin's quantization.
    EXPECT_EQ(op.in_zp, in_t.quantization.zero_point[0]);
    EXPECT_EQ(op.w_zp, w_t.quantization.zero_point[0]);
    EXPECT_EQ(op.out_zp, out_t.quantization.zero_point[0]);
    EXPECT_EQ(op.mult, f32_mult(in_t.quantization.scale[0], w_t.quantization.scale[0],
                                out_t.quantization.scale[0]));
    const int OHt = tile0_share(OH), OWt = tile0_share(OW), CW = C / 4, taps = K * K;
    uint64_t steps = 1;
    for (uint32_t n : op.loops) steps *= n + 1;
    ASSERT_EQ(steps, static_cast<uint64_t>(taps) * OHt * OWt * CW);
    const OpClass* cls = ops::classify(op);
    ASSERT_NE(cls, nullptr) << describe_op_class(op);
    const int pad_top = std::max((OH - 1) * s + K - H, 0) / 2;
    const int pad_left = std::max((OW - 1) * s + K - W, 0) / 2;

    uint32_t seed = 12345 + l;
    std::vector<uint8_t> x(static_cast<size_t>(H) * W * C);
    for (auto& v : x) v = static_cast<uint8_t>(lcg(seed));
    auto input = [&](int iy, int ix, int c) -> int {
      if (iy < 0 || ix < 0 || iy >= H || ix >= W) return in_t.quantization.zero_point[0];
      return x[(static_cast<size_t>(iy) * W + ix) * C + c];
    };

    // Place the input where the instruction's `in` walk reads it; record the FIFO row of each tap.
    Tile tile;
    std::map<int64_t, uint32_t> placed;  // address -> word
    int conflicts = 0;
    std::vector<int64_t> tap_unit(taps, -1);
    TtuWalker in(op.in), par(op.par);
    for (int cw = 0; cw < CW; ++cw)
      for (int pos = 0; pos < OHt * OWt; ++pos)
        for (int t = 0; t < taps; ++t) {
          const int iy = (pos / OWt) * s + t / K - pad_top, ix = (pos % OWt) * s + t % K - pad_left;
          uint8_t word[4];
          for (int b = 0; b < 4; ++b) word[b] = static_cast<uint8_t>(input(iy, ix, 4 * cw + b));
          uint32_t packed;
          std::memcpy(&packed, word, 4);
          auto [it, fresh] = placed.emplace(in.address(), packed);
          if (!fresh && it->second != packed) ++conflicts;
          ASSERT_GE(in.address(), 0);
          ASSERT_LE(in.address() + 4, static_cast<int64_t>(kNarrowBytes));
          std::memcpy(&tile.narrow[in.address()], word, 4);
          // SAME padding / halo: the tap that reads input (0, 0) for output (0, 0) reads exactly
          // where the producing op wrote its first output word.
          if (cw == 0 && pos == 0 && t == pad_top * K + pad_left) {
            EXPECT_EQ(in.address(), producer[l].out.base);
          }
          if (tap_unit[t] < 0) tap_unit[t] = par.address();
          EXPECT_EQ(tap_unit[t], par.address());  // a tap always reads the same FIFO row
          in.next();
          par.next();
        }
    EXPECT_EQ(conflicts, 0) << "two input words need the same narrow address";

    // FIFO fills (one per channel word): diagonal rows with the weight zero point off the diagonal,
    // preceded in the parameter blob by the 4 biases of the word.
    int blob_hits = 0;
    for (int cw = 0; cw < CW; ++cw) {
      std::vector<uint8_t> block(16 * (1 + taps));
      std::memcpy(block.data(), &bias[4 * cw], 16);
      for (int t = 0; t < taps; ++t) {
        std::array<uint8_t, kWideRowBytes> row{};
        for (int c = 0; c < 4; ++c)
          for (int b = 0; b < 4; ++b) row[4 * c + b] = b == c ? w[t * C + 4 * cw + c] : op.w_zp;
        tile.fifo_rows[static_cast<uint32_t>(tap_unit[t] / 4)].fills.push_back(row);
        std::memcpy(&block[16 * (1 + t)], row.data(), 16);
      }
      for (int c = 0; c < 4; ++c)
        std::memcpy(tile.bias_store.data() + ops::kBiasStoreBase + 4 * (4 * cw + c),
                    &bias[4 * cw + c], 4);
      if (std::search(p.parameters.begin(), p.parameters.end(), block.begin(), block.end()) !=
          p.parameters.end())
        ++blob_hits;
    }
    EXPECT_EQ(blob_hits, CW) << "weight rows not found in Google's parameter blob";

    ASSERT_EQ(cls->par_fifo_fills(op), static_cast<uint32_t>(CW)) << cls->name;
    OpEnv env(tile, op);
    cls->run(op, env);

    TtuWalker out(op.out);
    int equal = 0, total = 0;
    for (int cw = 0; cw < CW; ++cw)
      for (int pos = 0; pos < OHt * OWt; ++pos) {
        const int oy = pos / OWt, ox = pos % OWt;
        for (int b = 0; b < 4; ++b) {
          const int c = 4 * cw + b;
          int64_t acc = bias[c];
          for (int t = 0; t < taps; ++t)
            acc += (input(oy * s + t / K - pad_top, ox * s + t % K - pad_left, c) - op.in_zp) *
                   (w[t * C + c] - op.w_zp);
          ++total;
          equal += tile.narrow[out.address() + b] == chip_output(acc, op);
        }
        out.next();
      }
    EXPECT_EQ(equal, total);
  }
}

TEST(OpsGooglePrograms, DepthwiseOpsComputeTheTwinsLayersGen2020) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  check_depthwise_layers(dir / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                         dir / "gen2020/mobilenet_v1_0.25_128_quant.tflite");
}

TEST(OpsGooglePrograms, DepthwiseOpsComputeTheTwinsLayersGen2021) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  check_depthwise_layers(dir / "gen2021/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                         dir / "gen2021/mobilenet_v1_0.25_128_quant.tflite");
}

TEST(OpsGooglePrograms, AveragePoolComputesTheTwinsLayer) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const Program p = load_program(dir / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite");
  const container::Model twin =
      container::read_tflite_file(dir / "gen2020/mobilenet_v1_0.25_128_quant.tflite");
  const auto layers = twin_ops(twin, container::BuiltinOp::kAveragePool2D);
  ASSERT_EQ(layers.size(), 1u);
  const OpInstr* pool = nullptr;
  std::vector<OpInstr> ops;
  for (const auto& ins : p.instructions)
    if (is_op(ins)) ops.push_back(decode_op(ins));
  for (const auto& op : ops)
    if (const OpClass* cls = ops::classify(op); cls && std::string(cls->name) == "AVERAGE_POOL_2D")
      pool = &op;
  ASSERT_NE(pool, nullptr);
  const OpInstr& op = *pool;
  const auto& T = twin.subgraphs[0].tensors;
  const auto& in_t = T[layers[0]->inputs[0]];
  const auto& opt = std::get<container::Pool2DOptions>(layers[0]->options);
  const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
  ASSERT_EQ(H, opt.filter_h);  // the global pool before the classifier: one output position
  ASSERT_EQ(W, opt.filter_w);
  EXPECT_EQ(op.mult, 1.0f / static_cast<float>(H * W));  // the window size, as float32
  const int groups = C / 64;
  ASSERT_EQ(op.loops[0] + 1, static_cast<uint32_t>(W));
  ASSERT_EQ(op.loops[1] + 1, static_cast<uint32_t>(H));
  ASSERT_EQ(op.loops[4] + 1, static_cast<uint32_t>(groups));

  uint32_t seed = 777;
  std::vector<uint8_t> x(static_cast<size_t>(H) * W * C);
  for (auto& v : x) v = static_cast<uint8_t>(lcg(seed));
  // Window lanes where the instruction's `par` walk reads them: lane = one position, column c =
  // channel 64g + c.
  Tile tile;
  TtuWalker par(op.par);
  std::map<int64_t, int> lane_pos;
  int conflicts = 0;
  for (int g = 0; g < groups; ++g)
    for (int ky = 0; ky < H; ++ky)
      for (int kx = 0; kx < W; ++kx) {
        const int key = (g * H + ky) * W + kx;
        auto [it, fresh] = lane_pos.emplace(par.address(), key);
        if (!fresh && it->second != key) ++conflicts;
        const int64_t row = par.address() & ~int64_t{3};
        for (int c = 0; c < 64; ++c)
          tile.wide[row * kWideUnitBytes + 4 * c + (par.address() & 3)] =
              x[(static_cast<size_t>(ky) * W + kx) * C + 64 * g + c];
        par.next();
      }
  EXPECT_EQ(conflicts, 0);
  OpEnv env(tile, op);
  ops::classify(op)->run(op, env);
  TtuWalker out(op.out);
  int equal = 0, tflite_differs = 0;
  for (int c = 0; c < C; c += 4, out.next())
    for (int b = 0; b < 4; ++b) {
      int sum = 0;
      for (int i = 0; i < H * W; ++i) sum += x[static_cast<size_t>(i) * C + c + b];
      equal += tile.narrow[out.address() + b] == chip_output(sum, op);
      tflite_differs += (sum + H * W / 2) / (H * W) != tile.narrow[out.address() + b];  // ties away
    }
  EXPECT_EQ(equal, C);
  // The chip rounds ties to even where TFLite rounds them up: a few channels differ by one.
  RecordProperty("tflite_rounding_differences", tflite_differs);
}

}  // namespace
}  // namespace tinycoral::chip
