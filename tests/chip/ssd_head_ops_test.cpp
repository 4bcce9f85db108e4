// Every op of the SSD pipeline's four segments has a class, and the op classes of the last segment
// (gen2021 segment 3 of 4, skipped without
// ../shared/testdata; docs/chip_ops.md 4.6), run on tile 0 with Google's own instructions:
//  - the rescales of the box and class heads into their concatenation's scale (dp 0 cfg0 0x25 and
//    dp 1 cfg0 0x65 with NLU off) give TFLite's requantization in the chip's rounding for every
//    input byte;
//  - convert_scores (dp 1 cfg0 0x65 with NLU mode 1) is LOGISTIC: the 0x19 before it loads the
//    LOGISTIC spline, and every byte is the spline's value (within one step of 256 sigmoid(x)).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "chip/ops/nlu.h"
#include "chip/program.h"
#include "chip/tile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "host/rounding.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

constexpr const char* kSegment3 =
    "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_3_of_4_edgetpu.tflite";

struct Segment3 {
  container::Model cpu;              // the host part: tensor quantizations
  std::unique_ptr<Program> program;  // the execution program, pre-decoded
};

Segment3 load_segment3(const std::filesystem::path& dir) {
  Segment3 s{container::read_tflite_file(dir / kSegment3), nullptr};
  const auto compiled = container::read_edgetpu_model_file(dir / kSegment3);
  for (const auto& exe : compiled.edgetpu_ops.at(0).options.packages.at(0).executables)
    if (exe.type == container::ExecutableType::kExecutionOnly)
      s.program = Program::decode(exe.bitstreams.at(0).data);
  if (!s.program) fail("segment 3 has no execution program");
  return s;
}

const container::Tensor& tensor_named(const container::Model& m, const std::string& name) {
  for (const auto& t : m.subgraphs[0].tensors)
    if (t.name == name) return t;
  fail("no tensor ", name);
}

// Every op of the program, with its word offset.
std::vector<OpInstr> ops_of(const Program& p) {
  std::vector<OpInstr> ops;
  for (const auto& item : p.items)
    if (const auto* op = std::get_if<OpInstr>(&item.decoded)) ops.push_back(*op);
  return ops;
}

// The 4x4 identity row the program builds at wide unit 0x207c (mesh fills at words 13-31 and the
// narrowToWide at 37) and reads through `par` (base 0x7c, sel 1).
void put_identity_row(Tile& tile) {
  for (int c = 0; c < 4; ++c) tile.wide[0x207c * kWideUnitBytes + 4 * c + c] = 1;
}

// Runs `op` on tile 0 with input bytes `value(i)` at every byte its `in` walk reads; returns the
// (input, output) byte pairs of every word its `out` walk writes (in and out walk in step).
std::vector<std::pair<uint8_t, uint8_t>> run_elementwise(const OpInstr& op, int first_value) {
  Tile tile;
  put_identity_row(tile);
  std::vector<uint8_t> inputs;
  TtuWalker in(op.in);
  int v = first_value;
  do {
    for (int b = 0; b < 4; ++b) {
      tile.narrow[in.address() + b] = static_cast<uint8_t>(v % 256);
      inputs.push_back(static_cast<uint8_t>(v++ % 256));
    }
  } while (in.next());
  OpEnv env(tile, op);
  const OpClass* cls = ops::classify(op);
  if (!cls) fail("no class for ", describe_op_class(op));
  cls->run(op, env);
  std::vector<std::pair<uint8_t, uint8_t>> pairs;
  TtuWalker out(op.out);
  size_t k = 0;
  do {
    for (int b = 0; b < 4; ++b, ++k)
      pairs.push_back({inputs.at(k), tile.narrow[out.address() + b]});
  } while (out.next());
  return pairs;
}

TEST(SsdHeadOps, EveryOpOfTheFourSegmentsHasAClass) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  for (int k = 0; k < 4; ++k) {
    const std::string name = "gen2021/pipeline/ssd_mobilenet_v1_coco_quant_postprocess_segment_" +
                             std::to_string(k) + "_of_4_edgetpu.tflite";
    const auto compiled = container::read_edgetpu_model_file(dir / name);
    int ops = 0;
    for (const auto& exe : compiled.edgetpu_ops.at(0).options.packages.at(0).executables)
      for (const auto& bitstream : exe.bitstreams)
        for (const OpInstr& op : ops_of(*Program::decode(bitstream.data))) {
          ++ops;
          EXPECT_NE(ops::classify(op), nullptr)
              << name << " word " << op.word_offset << ": " << describe_op_class(op);
        }
    EXPECT_GT(ops, 0) << name;
  }
}

TEST(SsdHeadOps, RescalesAreTheConcatenationsRequantization) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const Segment3 s = load_segment3(dir);
  const int boxes_zp = tensor_named(s.cpu, "Squeeze1").quantization.zero_point.at(0);
  int logistic_in_zp = -1, rescales = 0;
  for (const OpInstr& op : ops_of(*s.program))
    if (op.nlu_mode == 1) logistic_in_zp = op.in_zp;
  ASSERT_GE(logistic_in_zp, 0) << "no LOGISTIC op";
  for (const OpInstr& op : ops_of(*s.program)) {
    const bool dp0 = op.dp_mode == 0 && op.cfg0 == 0x25;
    const bool dp1 = op.dp_mode == 1 && op.cfg0 == 0x65 && op.cfg4 == 0;
    if (!(dp0 || dp1) || op.nlu_mode != 0) continue;
    SCOPED_TRACE(cat("op at word ", op.word_offset));
    ++rescales;
    // Box heads go into Squeeze1's scale, class heads into what LOGISTIC reads; the clamps keep
    // the result a byte.
    EXPECT_TRUE(op.out_zp == boxes_zp || op.out_zp == logistic_in_zp) << int{op.out_zp};
    EXPECT_EQ(op.clamp_min, -static_cast<float>(op.out_zp));
    EXPECT_EQ(op.clamp_max, 255.0f - static_cast<float>(op.out_zp));
    if (op.tile_mask & 1) {
      // Every byte value through Google's instruction against the host's edgetpu requantize.
      const host::edgetpu::Clamps clamps{op.clamp_min, op.clamp_max};
      int checked = 0;
      for (int start = 0; checked < 256; start += 97) {
        for (const auto& [x, y] : run_elementwise(op, start)) {
          const int32_t want = std::clamp(
              host::edgetpu::requantize(x - op.in_zp, op.mult, clamps, op.out_zp), 0, 255);
          ASSERT_EQ(y, want) << "input " << int{x};
          ++checked;
        }
      }
    }
  }
  // 16 dp 0 box/class rescales and the dp 1 forms of the 10x10 and 5x5 heads.
  EXPECT_GE(rescales, 20);
}

TEST(SsdHeadOps, ConvertScoresIsLogistic) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const Segment3 s = load_segment3(dir);
  const NluTable logistic = ops::logistic_table();
  const NluTable* loaded = nullptr;
  int logistic_ops = 0;
  for (const auto& item : s.program->items) {
    if (const auto* n = std::get_if<NluLoadInstr>(&item.decoded)) loaded = &n->table;
    const auto* op = std::get_if<OpInstr>(&item.decoded);
    if (!op || op->nlu_mode != 1) continue;
    SCOPED_TRACE(cat("op at word ", op->word_offset));
    ++logistic_ops;
    ASSERT_NE(loaded, nullptr);
    for (int k = 0; k < 40; ++k) EXPECT_EQ(loaded->coefficients[k], logistic.coefficients[k]);
    for (int k = 0; k < 7; ++k) EXPECT_EQ(loaded->breakpoints[k], logistic.breakpoints[k]);
    EXPECT_EQ(op->out_zp, 0);  // convert_scores: scale 1/256, zero point 0
    const auto& scores = tensor_named(s.cpu, "convert_scores").quantization;
    EXPECT_EQ(scores.zero_point.at(0), 0);
    EXPECT_EQ(scores.scale.at(0), 1.0f / 256.0f);
    if (!(op->tile_mask & 1)) continue;
    // The class op needs the spline in the tile: run it with the table the program loads.
    Tile tile;
    put_identity_row(tile);
    tile.nlu = *loaded;
    TtuWalker in(op->in);
    std::vector<uint8_t> inputs;
    int v = 0;
    do {
      for (int b = 0; b < 4; ++b, ++v) {
        tile.narrow[in.address() + b] = static_cast<uint8_t>(v * 37 % 256);
        inputs.push_back(static_cast<uint8_t>(v * 37 % 256));
      }
    } while (in.next());
    OpEnv env(tile, *op);
    ops::classify(*op)->run(*op, env);
    TtuWalker out(op->out);
    size_t k = 0;
    int seen = 0;
    do {
      for (int b = 0; b < 4; ++b, ++k) {
        const uint8_t x = inputs.at(k), y = tile.narrow[out.address() + b];
        const float xs = std::fmin(
            std::fmax(static_cast<float>(x - op->in_zp) * op->mult, op->clamp_min), op->clamp_max);
        const float spline = ops::evaluate_spline(*loaded, xs);
        ASSERT_EQ(y, std::clamp(std::nearbyint(spline), 0.0f, 255.0f)) << "input " << int{x};
        const double sigmoid = 256.0 / (1.0 + std::exp(-static_cast<double>(xs)));
        ASSERT_LE(std::abs(y - std::min(255.0, std::round(sigmoid))), 1.0) << "input " << int{x};
        ++seen;
      }
    } while (out.next());
    EXPECT_GE(seen, 256);
  }
  EXPECT_EQ(logistic_ops, 2);  // tile 0 and tiles 1-3
}

}  // namespace
}  // namespace tinycoral::chip
