// The op classes against Google's compiled programs (skipped without ../shared/testdata):
//  - every op instruction of the gen2020 MobileNet v1 programs and of gen2021 split_concat has a
//    known class;
//  - each conv, depthwise and FC op and the average pool of MobileNet v1 0.25 (both compiler
//    generations for the convs and depthwise ops) computes, on tile 0, the
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
#include <string_view>

#include "chip/ops/mac_engine.h"
#include "chip/tile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

struct LoadedProgram {
  container::EdgeTpuModel model;
  std::vector<isa::Instruction> instructions;  // the execution program
  std::vector<uint8_t> parameters;             // the parameter-caching executable's blob
};

// Whether the bytes [begin, end) occur in `blob`. (A string_view's search runs memchr and memcmp;
// std::search over vector iterators took 9 s of two tests in the unoptimized sanitized build.)
bool in_blob(const std::vector<uint8_t>& blob, const uint8_t* begin, const uint8_t* end) {
  const std::string_view whole(reinterpret_cast<const char*>(blob.data()), blob.size());
  return whole.find(std::string_view(reinterpret_cast<const char*>(begin),
                                     static_cast<size_t>(end - begin))) != std::string_view::npos;
}

LoadedProgram load_program(const std::filesystem::path& path) {
  LoadedProgram p{container::read_edgetpu_model_file(path), {}, {}};
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
    const LoadedProgram p = load_program(dir / name);
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
  const LoadedProgram p = load_program(program);
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
      if (in_blob(p.parameters, block.data(), block.data() + block.size())) ++blob_hits;
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

// Runs every CONV_2D op of `program` on tile 0 against its twin layer (found by its multiplier):
// the K index (tap, input word) of a step is the mixed-radix index of its reduced loops (position-
// outer convs order K as [tap][word], isa.md 3.4), its position and output group come from the
// engine's loop roles; inputs go where `in` reads them and weight rows where `par` reads them
// (as FIFO fills or resident rows), each placement checked for conflicts and each row found in
// Google's parameter blob.
void check_conv_layers(const std::filesystem::path& program, const std::filesystem::path& cpu) {
  const LoadedProgram p = load_program(program);
  const container::Model twin = container::read_tflite_file(cpu);
  const auto layers = twin_ops(twin, container::BuiltinOp::kConv2D);
  const auto& T = twin.subgraphs[0].tensors;
  for (size_t l = 0; l < layers.size(); ++l) {
    const auto& in_t = T[layers[l]->inputs[0]];
    const auto& w_t = T[layers[l]->inputs[1]];
    const auto& b_t = T[layers[l]->inputs[2]];
    const auto& out_t = T[layers[l]->outputs[0]];
    const auto& opt = std::get<container::Conv2DOptions>(layers[l]->options);
    const float mult = f32_mult(in_t.quantization.scale[0], w_t.quantization.scale[0],
                                out_t.quantization.scale[0]);
    const OpInstr* found = nullptr;
    std::vector<OpInstr> ops;
    for (const auto& ins : p.instructions)
      if (is_op(ins)) ops.push_back(decode_op(ins));
    for (const auto& op : ops)
      if (!found && op.mult == mult && (op.tile_mask & 1)) found = &op;
    ASSERT_NE(found, nullptr) << "conv layer " << l;
    const OpInstr& op = *found;
    SCOPED_TRACE(cat("conv layer ", l, " (op at word ", op.word_offset, ")"));
    const OpClass* cls = ops::classify(op);
    ASSERT_NE(cls, nullptr) << describe_op_class(op);
    const int H = in_t.shape[1], W = in_t.shape[2], C = in_t.shape[3];
    const int OH = out_t.shape[1], OW = out_t.shape[2], N = out_t.shape[3];
    const int KH = w_t.shape[1], KW = w_t.shape[2], s = opt.stride_h;
    const int CW = (C + 3) / 4, taps = KH * KW;
    const int OHt = tile0_share(OH), OWt = tile0_share(OW);
    const int pad_top = std::max((OH - 1) * s + KH - H, 0) / 2;
    const int pad_left = std::max((OW - 1) * s + KW - W, 0) / 2;
    const uint8_t* w = twin.buffers[w_t.buffer].data.data();
    std::vector<int32_t> bias(N);
    std::memcpy(bias.data(), twin.buffers[b_t.buffer].data.data(), 4 * N);
    const int in_zp = op.in_zp, w_zp = op.w_zp;
    EXPECT_EQ(in_zp, in_t.quantization.zero_point[0]);
    EXPECT_EQ(w_zp, w_t.quantization.zero_point[0]);
    const int group_channels = op.out_ch + 1;
    const bool position_outer = op.reduce_mask == 0b111 || (op.dp_mode == 2 && op.cfg0 == 0xA7);

    uint32_t seed = 999 + static_cast<uint32_t>(l);
    std::vector<uint8_t> x(static_cast<size_t>(H) * W * C);
    for (auto& v : x) v = static_cast<uint8_t>(lcg(seed));
    auto input = [&](int iy, int ix, int c) -> int {
      if (c >= C) return 0;  // the 4th byte of a 3-channel pixel (narrow copy writes 0)
      if (iy < 0 || ix < 0 || iy >= H || ix >= W) return in_zp;
      return x[(static_cast<size_t>(iy) * W + ix) * C + c];
    };
    auto weight = [&](int n, int t, int c) -> int {
      if (n >= N) return 0;
      if (c >= C) return w_zp;  // K padded with the weight zero point (isa.md 3.4)
      return w[((static_cast<size_t>(n) * KH + t / KW) * KW + t % KW) * C + c];
    };

    ops::EngineSpec spec;
    spec.has_position_loop = op.cfg0 != 0x63;  // gen2021's position-free encoding (conv.cpp)
    const ops::LoopRoles roles = ops::loop_roles(op, spec);
    const uint8_t reduced = op.reduce_mask;
    Tile tile;
    std::map<int64_t, uint32_t> placed;
    std::map<std::pair<int64_t, uint64_t>, std::array<uint8_t, kWideRowBytes>>
        rows;  // (unit, fill)
    int conflicts = 0, rows_in_blob = 0, rows_total = 0;
    TtuWalker in(op.in), par(op.par);
    std::array<uint32_t, 8> ctr{};
    uint64_t steps = 1;
    for (uint32_t n : op.loops) steps *= n + 1;
    auto mixed = [&](uint8_t mask) {
      uint64_t v = 0, scale = 1;
      for (int k = 0; k < 8; ++k)
        if (mask >> k & 1) v += ctr[k] * scale, scale *= op.loops[k] + 1;
      return v;
    };
    const uint8_t position_mask = static_cast<uint8_t>(~reduced & ~roles.group & ((1u << 8) - 1));
    uint64_t positions = 1;
    for (int k = 0; k < 8; ++k)
      if (position_mask >> k & 1) positions *= op.loops[k] + 1;
    ASSERT_EQ(positions, static_cast<uint64_t>(OHt) * OWt);
    for (uint64_t step = 0; step < steps; ++step) {
      const uint64_t kred = mixed(reduced), pos = mixed(position_mask), g = mixed(roles.group);
      const int t = position_outer ? static_cast<int>(kred / CW) : 0;
      const int word = position_outer ? static_cast<int>(kred % CW) : static_cast<int>(kred);
      ASSERT_LT(t, taps);
      const int oy = static_cast<int>(pos) / OWt, ox = static_cast<int>(pos) % OWt;
      uint8_t bytes[4];
      for (int b = 0; b < 4; ++b)
        bytes[b] = static_cast<uint8_t>(
            input(oy * s + t / KW - pad_top, ox * s + t % KW - pad_left, 4 * word + b));
      uint32_t packed;
      std::memcpy(&packed, bytes, 4);
      auto [it, fresh] = placed.emplace(in.address(), packed);
      if (!fresh && it->second != packed) ++conflicts;
      std::memcpy(&tile.narrow.at(in.address()), bytes, 4);
      std::array<uint8_t, kWideRowBytes> row{};
      for (int n = 0; n < group_channels; ++n)
        for (int b = 0; b < 4; ++b)
          row[4 * n + b] = static_cast<uint8_t>(
              weight(static_cast<int>(g) * group_channels + n, t, 4 * word + b));
      const uint64_t fill = ops::par_is_fifo(op) ? mixed(roles.fill) : 0;
      auto [rit, rfresh] = rows.emplace(std::make_pair(par.address(), fill), row);
      if (!rfresh && rit->second != row) ++conflicts;
      for (int k = 0; k < 8; ++k)
        if (ctr[k] < op.loops[k]) {
          ++ctr[k];
          for (int e = 0; e < k; ++e) ctr[e] = 0;
          break;
        }
      in.next();
      par.next();
    }
    EXPECT_EQ(conflicts, 0);
    // Rows into wide memory (resident) or as FIFO fills in fill order; each found in the blob.
    for (const auto& [key, row] : rows) {
      ++rows_total;
      const auto* begin = row.data();
      const auto* end = begin + 4 * std::min(group_channels, N);
      rows_in_blob += in_blob(p.parameters, begin, end);
      if (ops::par_is_fifo(op)) {
        auto& fills = tile.fifo_rows[static_cast<uint32_t>(key.first / 4)].fills;
        ASSERT_EQ(fills.size(), key.second) << "fills of a row arrive in order";
        fills.push_back(row);
      } else {
        std::memcpy(&tile.wide.at(key.first * kWideUnitBytes), row.data(), kWideRowBytes);
      }
    }
    EXPECT_EQ(rows_in_blob, rows_total) << "weight rows not found in Google's parameter blob";
    for (int n = 0; n < N; ++n)
      std::memcpy(tile.bias_store.data() + ops::kBiasStoreBase + 4 * n, &bias[n], 4);
    if (ops::par_is_fifo(op)) {
      ASSERT_NE(cls->par_fifo_fills, nullptr);
      EXPECT_EQ(cls->par_fifo_fills(op), rows.rbegin()->first.second + 1);
    }
    OpEnv env(tile, op);
    cls->run(op, env);

    // Emissions: groups outermost, positions inside (the K-chunked conv emits in its last chunk).
    TtuWalker out(op.out);
    int equal = 0, total = 0;
    uint64_t groups = 1;  // tile 0's output groups (the classifier is spread over 16 tiles)
    for (int k = 0; k < 8; ++k)
      if (roles.group >> k & 1) groups *= op.loops[k] + 1;
    for (int g = 0; g < static_cast<int>(groups); ++g)
      for (int pos = 0; pos < OHt * OWt; ++pos) {
        const int oy = pos / OWt, ox = pos % OWt;
        for (int wd = 0; wd < group_channels / 4; ++wd, out.next())
          for (int b = 0; b < 4; ++b) {
            const int n = g * group_channels + 4 * wd + b;
            if (n >= N) continue;
            int64_t acc = bias[n];
            for (int t = 0; t < taps; ++t)
              for (int c = 0; c < C; ++c)
                acc += (input(oy * s + t / KW - pad_top, ox * s + t % KW - pad_left, c) - in_zp) *
                       (weight(n, t, c) - w_zp);
            ++total;
            equal += tile.narrow[out.address() + b] == chip_output(acc, op);
          }
      }
    EXPECT_EQ(equal, total) << cls->name;
    EXPECT_GT(total, 0);
  }
}

TEST(OpsGooglePrograms, ConvOpsComputeTheTwinsLayersGen2020) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  check_conv_layers(dir / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                    dir / "gen2020/mobilenet_v1_0.25_128_quant.tflite");
}

TEST(OpsGooglePrograms, ConvOpsComputeTheTwinsLayersGen2021) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  check_conv_layers(dir / "gen2021/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
                    dir / "gen2021/mobilenet_v1_0.25_128_quant.tflite");
}

TEST(OpsGooglePrograms, AveragePoolComputesTheTwinsLayer) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const LoadedProgram p = load_program(dir / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite");
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

namespace tinycoral::chip {
namespace {

// gen2021 split_concat moves bytes only: its op encodings (docs/chip_ops.md 4.2) must pass every
// byte value through unchanged when fed the selection rows of Google's own parameter blob.
TEST(OpsGooglePrograms, SplitConcatOpsMoveBytesExactly) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const LoadedProgram p = load_program(dir / "gen2021/split_concat_edgetpu.tflite");
  ASSERT_EQ(p.parameters.size(), 192u);
  auto op_at = [&](uint32_t word) {
    for (const auto& ins : p.instructions)
      if (is_op(ins) && ins.word_offset == word) return decode_op(ins);
    ADD_FAILURE() << "no op at word " << word;
    return OpInstr{};
  };
  auto fill_row = [&](size_t blob_offset) {
    std::array<uint8_t, kWideRowBytes> row{};
    std::memcpy(row.data(), &p.parameters[blob_offset], 16);
    return row;
  };
  for (int round = 0; round < 16; ++round) {  // 16 rounds x 16 bytes cover all 256 values
    Tile tile;
    for (int i = 0; i < 64; ++i)
      tile.narrow[i] = static_cast<uint8_t>(16 * round + i % 16 + 7 * (i / 16));
    for (int c = 0; c < 4; ++c) tile.wide[8304 * 64 + 4 * c + c] = 1;  // the identity row it loads

    // Channel extraction (word 626): block 0 = zero bias, column 0 selects byte 1.
    const OpInstr extract = op_at(626);
    const OpClass* cls = ops::classify(extract);
    ASSERT_NE(cls, nullptr) << describe_op_class(extract);
    tile.fifo_rows[8308 / 4].fills.push_back(fill_row(16));
    {
      OpEnv env(tile, extract);
      cls->run(extract, env);
    }
    for (int wd = 0; wd < 4; ++wd)
      EXPECT_EQ(tile.narrow[64 + 4 * wd], tile.narrow[48 + 4 * wd + 1]);

    // Word copy through the identity row (word 593).
    const OpInstr copy = op_at(593);
    ASSERT_NE(ops::classify(copy), nullptr) << describe_op_class(copy);
    std::vector<uint8_t> before(tile.narrow.begin(), tile.narrow.begin() + 48);
    {
      OpEnv env(tile, copy);
      ops::classify(copy)->run(copy, env);
    }
    TtuWalker in(copy.in), out(copy.out);
    for (int s = 0; s < 4; ++s, in.next(), out.next())
      for (int b = 0; b < 4; ++b)
        EXPECT_EQ(tile.narrow[out.address() + b], before[in.address() + b]);

    // Concatenation (word 1157): block 2 = bias row, then rows (1,0,0,0) in column 0 and (0,1,0,0)
    // in column 1, over 2 input words per position.
    const OpInstr concat = op_at(1157);
    ASSERT_NE(ops::classify(concat), nullptr) << describe_op_class(concat);
    for (int i = 0; i < 64; ++i)
      tile.narrow[48 + i] = static_cast<uint8_t>(16 * round + (i * 5) % 16);
    tile.fifo_rows[8304 / 4].fills.push_back(fill_row(144));
    tile.fifo_rows[8308 / 4].fills.push_back(fill_row(160));
    {
      OpEnv env(tile, concat);
      // Row 8308's first fill went to the extraction op; this op reads its own (second) fill.
      tile.fifo_rows[8308 / 4].fills.pop_front();
      ops::classify(concat)->run(concat, env);
    }
    for (int pos = 0; pos < 4; ++pos) {
      EXPECT_EQ(tile.narrow[4 * pos + 0], tile.narrow[48 + 8 * pos + 0]) << pos;
      EXPECT_EQ(tile.narrow[4 * pos + 1], tile.narrow[48 + 8 * pos + 4 + 1]) << pos;
    }
  }
}

}  // namespace
}  // namespace tinycoral::chip
