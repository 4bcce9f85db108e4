// Where Google's compiled MobileNets keep their depthwise parameters (skipped without
// ../shared/testdata; docs/compiler.md "How Google stores depthwise parameters"):
//  - each depthwise layer is one dense block of the parameter blob: per 4-channel word 16 bytes
//    of int32 bias, then one 16-byte diagonal entry per tap (column c holds the tap's weight of
//    channel c at byte c, the weight zero point elsewhere), 16 (1 + taps) bytes per word;
//  - the execution program sends each block, once per inference, from the wide rows of the one
//    tile that caches it to the scalar core (a ring producer with destination bit 16, reading
//    ceil(block / 256) rows), and from scalar memory to the computing tiles as 16-byte entries
//    (an infeed of exactly the block's bytes), so a layer needs ceil(16 (1 + taps) C/4 / 256)
//    resident rows on one tile instead of taps C/4 rows of 256 bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "chip/program.h"
#include "common/error.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

struct Sends {
  std::vector<uint64_t> producer_rows;  // ring producers to the scalar core reading several rows
  std::vector<uint64_t> infeed_bytes;   // scalar-memory infeeds of 16-byte entries
};

struct Google {
  std::vector<uint8_t> blob;  // the parameter-caching executable's parameters
  Sends sends;
};

Google read_google(const std::filesystem::path& path) {
  const container::EdgeTpuModel model = container::read_edgetpu_model_file(path);
  Google g;
  for (const auto& op : model.edgetpu_ops)
    for (const auto& package : op.options.packages)
      for (const auto& exe : package.executables) {
        if (exe.type == container::ExecutableType::kParameterCaching) {
          g.blob = exe.parameters;
          continue;
        }
        for (const auto& bs : exe.bitstreams) {
          const auto program = Program::decode(bs.data);
          for (const ProgramItem& item : program->items) {
            if (const auto* r = std::get_if<RingInstr>(&item.decoded);
                r && item.opcode == isa::kRingProducer && (r->dest >> 16 & 1) && r->ttu.steps() > 1)
              g.sends.producer_rows.push_back(r->ttu.steps());
            if (const auto* in = std::get_if<InfeedInstr>(&item.decoded);
                in && in->from_scalar_memory && in->packet_bytes == 16)
              g.sends.infeed_bytes.push_back(uint64_t{in->units} * 4);
          }
        }
      }
  return g;
}

// The dense block of one depthwise layer of the CPU twin (per-tensor weights).
std::vector<uint8_t> dense_block(const container::Model& twin, const container::Operator& op) {
  const auto& T = twin.subgraphs[0].tensors;
  const auto& w_t = T[op.inputs[1]];
  const auto& b_t = T[op.inputs[2]];
  const int C = w_t.shape[3], taps = w_t.shape[1] * w_t.shape[2];
  const uint8_t w_zp = static_cast<uint8_t>(w_t.quantization.zero_point[0]);
  const uint8_t* w = twin.buffers[w_t.buffer].data.data();
  const uint8_t* bias = twin.buffers[b_t.buffer].data.data();
  std::vector<uint8_t> block;
  for (int cw = 0; cw < C / 4; ++cw) {
    block.insert(block.end(), bias + 16 * cw, bias + 16 * (cw + 1));
    for (int t = 0; t < taps; ++t)
      for (int c = 0; c < 4; ++c)
        for (int b = 0; b < 4; ++b) block.push_back(b == c ? w[t * C + 4 * cw + c] : w_zp);
  }
  return block;
}

void check_layout(const std::filesystem::path& program, const std::filesystem::path& cpu,
                  uint64_t expected_rows, uint64_t expected_diagonal_rows) {
  const Google g = read_google(program);
  const container::Model twin = container::read_tflite_file(cpu);
  std::vector<const container::Operator*> layers;
  for (const auto& op : twin.subgraphs[0].operators)
    if (twin.code_of(op).builtin_code ==
        static_cast<int32_t>(container::BuiltinOp::kDepthwiseConv2D))
      layers.push_back(&op);
  ASSERT_FALSE(layers.empty());
  ASSERT_EQ(g.sends.producer_rows.size(), layers.size());
  ASSERT_EQ(g.sends.infeed_bytes.size(), layers.size());
  uint64_t rows = 0, diagonal_rows = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    SCOPED_TRACE(cat("depthwise layer ", l));
    const std::vector<uint8_t> block = dense_block(twin, *layers[l]);
    EXPECT_NE(std::search(g.blob.begin(), g.blob.end(), block.begin(), block.end()), g.blob.end())
        << "the layer's dense block is not in Google's parameter blob";
    EXPECT_EQ(g.sends.producer_rows[l], (block.size() + 255) / 256);
    EXPECT_EQ(g.sends.infeed_bytes[l], block.size());
    rows += g.sends.producer_rows[l];
    const auto& w_t = twin.subgraphs[0].tensors[layers[l]->inputs[1]];
    diagonal_rows += uint64_t(w_t.shape[1]) * w_t.shape[2] * (w_t.shape[3] / 4);
  }
  EXPECT_EQ(rows, expected_rows);
  EXPECT_EQ(diagonal_rows, expected_diagonal_rows);
}

TEST(GoogleDepthwiseLayout, MobileNetV2KeepsDenseBlocksAndSendsThemThroughScalarMemory) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  // 17 layers, 7,136 channels: 1,116 rows (279 KiB) against 16,056 diagonal rows of 256 bytes.
  check_layout(dir / "gen2020/mobilenet_v2_1.0_224_quant_edgetpu.tflite",
               dir / "gen2020/mobilenet_v2_1.0_224_quant.tflite", 1116, 16056);
}

TEST(GoogleDepthwiseLayout, MobileNetV1QuarterKeepsDenseBlocksAndSendsThemThroughScalarMemory) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  check_layout(dir / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite",
               dir / "gen2020/mobilenet_v1_0.25_128_quant.tflite", 195, 2790);
}

}  // namespace
}  // namespace tinycoral::chip
