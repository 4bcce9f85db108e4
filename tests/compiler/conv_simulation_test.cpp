// Correct by simulation: CONV_2D layers and chains of them with random shapes (H, W, Cin, Cout, k,
// stride, padding) and quantizations, built as CPU twins (QUANTIZE -> int8 CONV_2D ... ->
// QUANTIZE), compiled by our compiler, run on the virtual Edge TPU and compared with the CPU
// reference in `edgetpu` rounding: every output byte equal, on a first and a second inference.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <set>
#include <tuple>
#include <utility>

#include "chip/program.h"
#include "chip/sim_runner.h"
#include "common/error.h"
#include "compiler/compile.h"
#include "container/tflite_writer.h"
#include "isa/isa.h"
#include "support/compiled_twin.h"
#include "support/conv_twin.h"
#include "support/same_bytes.h"
#include "support/sanitizers.h"

namespace tinycoral::compiler {
namespace {

using container::Activation;
using testing::CompiledTwin;
using testing::edgetpu_reference;
using testing::random_bytes;
using testing::reference_output;
using testing::same_bytes;
using twins::conv_twin;
using twins::ConvSpec;
using twins::depthwise;
using twins::describe;
using twins::random_case;
using twins::RandomCase;

// `check` looks at the compiled programs too.
void expect_equal_to_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                         std::mt19937& random, size_t& tiles, bool int8_io = false,
                         size_t distinct = 32,
                         const std::function<void(const CompiledTwin&)>& check = nullptr) {
  SCOPED_TRACE(describe(h, w, cin, specs) + (int8_io ? " int8 I/O" : ""));
  const container::Model twin = conv_twin(h, w, cin, specs, random, int8_io);
  const CompiledTwin compiled(twin);
  ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
  ASSERT_NE(compiled.exes.execution, nullptr);
  ASSERT_NE(compiled.exes.caching, nullptr);
  if (check) check(compiled);

  host::Interpreter cpu = edgetpu_reference(twin);
  const std::vector<uint8_t> x = random_bytes(static_cast<size_t>(h) * w * cin, random);
  std::vector<uint8_t> want = reference_output(cpu, x);
  // int8 tensors reach the chip with their most significant bit flipped by the host
  // (SIGNED_FIXED_POINT8 layers): compare in the chip's uint8 domain.
  const uint8_t flip = int8_io ? 0x80 : 0;
  for (auto& b : want) b ^= flip;
  std::vector<uint8_t> device_x(x);
  for (auto& b : device_x) b ^= flip;
  if (specs.back().act != Activation::kNone) {
    // The activation must clip: some outputs sit at the bound it sets.
    const auto& y = twin.subgraphs[0].tensors.back().quantization;
    const int zp = static_cast<int>(y.zero_point[0]);  // the uint8 twin tensor "y"
    const int top = std::min(255, zp + static_cast<int>(std::nearbyint(6.0f / y.scale[0])));
    const int bound = specs.back().act == Activation::kRelu ? zp : top;
    ASSERT_GT(std::count(want.begin(), want.end(), static_cast<uint8_t>(bound)), 0)
        << "the activation never clips";
  } else {
    size_t saturated = 0;
    for (uint8_t v : want) saturated += v == 0 || v == 255;
    ASSERT_LT(saturated * 4, want.size()) << "the test's output quantization saturates";
    ASSERT_GT(std::set<uint8_t>(want.begin(), want.end()).size(),
              std::min<size_t>(want.size() / 4, distinct));
  }

  chip::VirtualEdgeTpu chip;
  compiled.cache_parameters(chip);
  const auto& layer = compiled.exes.execution->output_layers.at(0);
  EXPECT_EQ(layer.data_type,
            int8_io ? container::DataType::kSignedFixedPoint8 : container::DataType::kFixedPoint8);
  // The tiles whose bytes the output holds (a tile's start to the next one's, or to the end).
  const auto& starts = layer.output_layout->linearized_tile_byte_offset;
  for (size_t t = 0; t < starts.size(); ++t)
    tiles += (t + 1 < starts.size() ? starts[t + 1] : layer.size_bytes) > starts[t];
  for (int inference = 0; inference < 2; ++inference)
    EXPECT_TRUE(same_bytes(compiled.infer(chip, {{"x", device_x}}), want))
        << "inference " << inference;
  EXPECT_EQ(chip.fault(), "");
}

// Returns the number of tiles the output comes from (0 when the test failed before).
size_t expect_equal_to_cpu(int h, int w, int cin, const std::vector<ConvSpec>& specs,
                           std::mt19937& random) {
  size_t tiles = 0;
  expect_equal_to_cpu(h, w, cin, specs, random, tiles);
  return tiles;
}

TEST(ConvOnTheVirtualEdgeTpu, OneByOneAndThreeByThreeEqualTheCpuReference) {
  std::mt19937 random(1);
  expect_equal_to_cpu(8, 8, 4, {{8, 1, 1, false}}, random);
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 1, false}}, random);
  expect_equal_to_cpu(8, 8, 8, {{16, 3, 1, true}}, random);
  expect_equal_to_cpu(9, 10, 4, {{16, 3, 2, true}}, random);
}

TEST(ConvOnTheVirtualEdgeTpu, RandomShapesEqualTheCpuReferenceInEveryByte) {
  std::mt19937 random(20261204);
  for (int i = 0; i < 24; ++i) {
    const RandomCase c = random_case(random);
    expect_equal_to_cpu(c.h, c.w, c.cin, {c.spec}, random);
  }
}

TEST(ConvOnTheVirtualEdgeTpu, OutputGroupsOfSixtyFourEqualTheCpuReference) {
  std::mt19937 random(3);
  expect_equal_to_cpu(6, 6, 16, {{128, 3, 1, true}}, random);
  expect_equal_to_cpu(5, 4, 8, {{192, 1, 1, false, false}}, random);
}

TEST(ConvOnTheVirtualEdgeTpu, FusedReluAndRelu6EqualTheCpuReference) {
  std::mt19937 random(5);
  expect_equal_to_cpu(8, 8, 8, {{16, 3, 1, true, true, true, Activation::kRelu}}, random);
  expect_equal_to_cpu(8, 6, 4, {{8, 3, 2, true, true, true, Activation::kRelu6}}, random);
  expect_equal_to_cpu(7, 8, 8, {{64, 1, 1, false, false, false, Activation::kRelu}}, random);
}

// Long images: more input pieces than the program's input rows (a fence every 32 pieces), in row
// bands over several tiles (as many as the placement's time model picks).
TEST(ConvOnTheVirtualEdgeTpu, ImagesOfManyRowPiecesEqualTheCpuReference) {
  std::mt19937 random(9);
  EXPECT_GT(expect_equal_to_cpu(40, 40, 8, {{8, 3, 2, true}}, random), 1u);
}

// Images whose activations exceed one tile's narrow memory: the output rows are split over several
// tiles, each computing its band (and the halo rows its band needs) on its own.
TEST(ConvOnTheVirtualEdgeTpu, ImagesLargerThanOneTileEqualTheCpuReference) {
  std::mt19937 random(37);
  EXPECT_EQ(expect_equal_to_cpu(96, 96, 8, {{32, 3, 1, true}}, random), 16u);  // 295 KB out
  // (8 tiles since the output goes to the host many packets a transfer: the time model prices
  // 16 tiles' extra instructions above what they save.)
  EXPECT_GT(expect_equal_to_cpu(128, 128, 3, {{16, 3, 2, true}}, random), 1u);
}

// The host's image in transfers of many rows (a band's rows, or every row for tiles that keep the
// whole image): rows over one packet that end inside one (600 and 800 bytes: the last fill of the
// transfer is short), an image over one pop pass (160,000 bytes, the pass ends inside row 163),
// and rows under a packet that only go in whole packets (3 x 64 bytes, 5 rows = 3.75 packets).
TEST(ConvOnTheVirtualEdgeTpu, ImagesInTransfersOfManyRowsEqualTheCpuReference) {
  std::mt19937 random(41);
  EXPECT_GT(expect_equal_to_cpu(60, 150, 4, {{8, 3, 2, true}}, random), 1u);
  EXPECT_GT(expect_equal_to_cpu(200, 200, 4, {{8, 3, 2, true}}, random), 1u);
  expect_equal_to_cpu(30, 64, 3, {{8, 3, 1, true}, {8, 3, 2, true}}, random);
}

// The host's image as one run per tile of a first stage in row bands (stream_runs): each tile
// receives the rows its band reads, halo rows included, in one transfer, the rows two bands share
// read twice from the pop's staging - one image infeed per tile (two for a run that the start of
// a later pop cuts, image_pop_cuts; and a few for rows that go the row-by-row way), where runs of
// rows for the same tiles took two or three per tile (35 and 46 infeeds here). Images too large for
// every tile to keep whole (LayerPlan::full): 960-byte rows over two pop passes (a run across the
// pass, runs ending inside a packet) and 1600-byte rows.
TEST(ConvChainOnTheVirtualEdgeTpu, ImageBandsGoAsOneRunPerTile) {
  std::mt19937 random(43);
  for (const auto& [h, w, cin] : {std::tuple{240, 240, 4}, std::tuple{180, 200, 8}}) {
    size_t tiles = 0;
    expect_equal_to_cpu(
        h, w, cin, {{16, 3, 2, true}, {16, 3, 1, true}}, random, tiles, false, 32,
        [&](const CompiledTwin& compiled) {
          int infeeds = 0, pops = 0;
          uint32_t receivers = 0;
          bool shared = false;  // an infeed starts inside the one before: rows two bands read
          uint32_t end = 0;
          for (const auto& bs : compiled.exes.execution->bitstreams) {
            const std::unique_ptr<chip::Program> program = chip::Program::decode(bs.data);
            for (const chip::ProgramItem& item : program->items) {
              // (A pop's infeeds count their offsets from its first unit.)
              if (const auto* pop = std::get_if<chip::PopInstr>(&item.decoded);
                  pop && pop->activations) {
                ++pops;
                end = 0;
              }
              if (const auto* in = std::get_if<chip::InfeedInstr>(&item.decoded);
                  in && in->activations && !in->from_scalar_memory) {
                ++infeeds;
                receivers |= in->tiles;
                // (Offsets count within a pop pass of 16384 units; these runs go forward.)
                shared = shared || (in->offset < end % 16384 && end % 16384 - in->offset < 8192);
                end = in->offset + in->units;
              }
            }
          }
          const int bands = std::popcount(receivers);
          SCOPED_TRACE(cat(infeeds, " image infeeds to ", bands, " tiles, ", pops, " pops"));
          EXPECT_GE(bands, 4);
          EXPECT_TRUE(shared);
          // (Each pop after the first cuts the runs that cross its start, one or two.)
          EXPECT_LE(infeeds, bands + 2 + 2 * (pops - 1));
        });
    EXPECT_GT(tiles, 1u);
  }
}

// Chains: one program, the activations stay in the tile's narrow memory between the layers.
TEST(ConvChainOnTheVirtualEdgeTpu, ChainsOfConvolutionsEqualTheCpuReference) {
  std::mt19937 random(11);
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 1, true}, {16, 1, 1, false}}, random);
  expect_equal_to_cpu(12, 12, 8, {{16, 3, 2, true}, {16, 3, 1, true}, {8, 1, 1, false}}, random);
  expect_equal_to_cpu(10, 9, 4, {{12, 3, 1, false}, {128, 3, 2, true}, {24, 3, 1, true}}, random);
  expect_equal_to_cpu(10, 8, 8,
                      {{16, 3, 1, true, true, true, Activation::kRelu6},
                       {8, 5, 1, true, true, true, Activation::kRelu}},
                      random);
}

TEST(ConvChainOnTheVirtualEdgeTpu, RandomChainsEqualTheCpuReference) {
  std::mt19937 random(13);
  for (int i = 0; i < 8; ++i) {
    const RandomCase c = random_case(random);
    const int layers = 2 + static_cast<int>(random() % 2);
    expect_equal_to_cpu(c.h, c.w, c.cin, twins::random_chain(c.spec, layers, random), random);
  }
}

// Edges: a 1x1 image, kernels larger than the image (SAME), stride 2 with 1x1 kernels, one output
// channel, kernels of the image's size (VALID: one output pixel).
TEST(ConvOnTheVirtualEdgeTpu, EdgeShapesEqualTheCpuReference) {
  std::mt19937 random(31);
  expect_equal_to_cpu(1, 2, 4, {{8, 1, 1, true}}, random);
  expect_equal_to_cpu(2, 2, 8, {{16, 5, 1, true}}, random);
  expect_equal_to_cpu(3, 2, 4, {{4, 5, 2, true}}, random);
  expect_equal_to_cpu(7, 6, 4, {{24, 1, 2, false}}, random);
  expect_equal_to_cpu(6, 6, 8, {{1, 3, 1, true}}, random);
  expect_equal_to_cpu(5, 5, 8, {{32, 5, 1, false}}, random);
  // VALID leaving the last row unread, rows of 36 bytes (two per packet): the unread row is
  // streamed too, into the image's own buffer.
  expect_equal_to_cpu(10, 9, 4, {{8, 3, 2, false}, {8, 1, 1, false}}, random);
}

// int8 input and output (no QUANTIZE around the layers).
TEST(ConvOnTheVirtualEdgeTpu, Int8InputsAndOutputsEqualTheCpuReference) {
  std::mt19937 random(43);
  size_t tiles = 0;
  expect_equal_to_cpu(8, 8, 8, {{16, 3, 1, true}}, random, tiles, true);
  expect_equal_to_cpu(12, 12, 4, {{8, 3, 2, true}, {16, 1, 1, false}}, random, tiles, true);
  expect_equal_to_cpu(8, 8, 3, {{8, 3, 2, true, true, true, Activation::kRelu}}, random, tiles,
                      true);
}

// Images of 1, 2 or 3 channels (RGB, grey): block x Cout columns over word-aligned windows.
TEST(ConvOnTheVirtualEdgeTpu, FewInputChannelsEqualTheCpuReference) {
  std::mt19937 random(19);
  expect_equal_to_cpu(16, 16, 3, {{16, 3, 2, true}}, random);  // MobileNet's first layer, small
  expect_equal_to_cpu(16, 16, 3, {{8, 3, 1, true}}, random);
  expect_equal_to_cpu(12, 8, 3, {{12, 3, 1, false}}, random);
  expect_equal_to_cpu(12, 12, 1, {{4, 3, 1, true}}, random);  // looming's Sobel shape
  expect_equal_to_cpu(12, 12, 1, {{6, 5, 2, true}}, random);
  expect_equal_to_cpu(10, 8, 2, {{16, 3, 2, false}}, random);
  expect_equal_to_cpu(9, 8, 3, {{10, 1, 1, true}}, random);
  std::mt19937 shapes(23);
  for (int i = 0; i < 8; ++i) {
    ConvSpec s{};
    const int cin = 1 + static_cast<int>(shapes() % 3);
    s.k = 1 + static_cast<int>(shapes() % 5);
    s.stride = 1 + static_cast<int>(shapes() % 2);
    s.same = shapes() % 2 == 0;
    s.bias = shapes() % 3 != 0;
    s.per_channel = shapes() % 3 != 0;
    const int block = cin == 2 && s.stride == 2   ? 1
                      : cin == 2                  ? 2
                      : s.stride == 2 && cin != 1 ? 2
                                                  : 4;
    s.cout = 4 * (1 + static_cast<int>(shapes() % static_cast<unsigned>(16 / block)));
    int h = s.k + 2 + static_cast<int>(shapes() % 12);
    const int w = 4 * (2 + static_cast<int>(shapes() % 4));
    if (w * cin % 8 != 0 && h % 2 != 0) ++h;  // rows stream two at a time
    expect_equal_to_cpu(h, w, cin, {s}, random);
  }
}

TEST(ConvChainOnTheVirtualEdgeTpu, RgbImageThroughAChainEqualsTheCpuReference) {
  std::mt19937 random(29);
  ConvSpec fc{10};
  fc.fc = true;
  expect_equal_to_cpu(16, 16, 3, {{16, 3, 2, true}, {32, 3, 1, true}, {16, 1, 1, true}, fc},
                      random);
}

// A classifier after the convolutions: FULLY_CONNECTED over the whole map, in the same program.
TEST(ConvChainOnTheVirtualEdgeTpu, ConvolutionsThenFullyConnectedEqualTheCpuReference) {
  std::mt19937 random(17);
  ConvSpec fc10{10};
  fc10.fc = true;
  ConvSpec fc64{64};
  fc64.fc = true;
  fc64.reshape = false;
  ConvSpec fc128{128};
  fc128.fc = true;
  fc128.act = Activation::kRelu;
  expect_equal_to_cpu(8, 8, 4, {{8, 3, 2, true}, fc10}, random);
  expect_equal_to_cpu(6, 6, 8, {{16, 3, 1, false}, fc64}, random);
  expect_equal_to_cpu(8, 8, 4, {{16, 3, 2, true}, {16, 3, 2, true}, fc128}, random);
}

TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, ChannelDepthwiseLayersEqualTheCpuReference) {
  std::mt19937 random(47);
  expect_equal_to_cpu(8, 8, 8, {depthwise(3, 1)}, random);
  expect_equal_to_cpu(10, 12, 16, {depthwise(3, 2)}, random);
  expect_equal_to_cpu(6, 6, 128, {depthwise(3, 1)}, random);  // two groups of 64 channels
  expect_equal_to_cpu(4, 4, 256, {depthwise(3, 2)}, random);  // MobileNet's last, at stride 2
  expect_equal_to_cpu(9, 8, 12, {depthwise(5, 1, false)}, random);
  expect_equal_to_cpu(8, 8, 32, {depthwise(3, 1, true, Activation::kRelu6)}, random);
}

// Dense depthwise weights (docs/compiler.md "How Google stores depthwise parameters"): the
// program sends each layer's 16-byte tap entries, and only those, through scalar memory (infeeds
// of 16-byte packets), and the parameters hold 16 instead of 256 bytes per word and tap.
TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, DenseDepthwiseWeightsGoThroughScalarMemory) {
  std::mt19937 random(61);
  for (const auto& [c, k] : {std::pair{128, 3}, std::pair{96, 5}, std::pair{12, 3}}) {
    SCOPED_TRACE(cat(c, " channels, ", k, "x", k));
    const CompiledTwin compiled(conv_twin(8, 8, c, {depthwise(k, 1)}, random, false));
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1);
    const chip::testing::PackageExecutables& exes = compiled.exes;
    ASSERT_NE(exes.execution, nullptr);
    ASSERT_NE(exes.caching, nullptr);
    uint64_t entry_bytes = 0;
    for (const auto& bs : exes.execution->bitstreams) {
      const std::unique_ptr<chip::Program> program = chip::Program::decode(bs.data);
      for (const chip::ProgramItem& item : program->items)
        if (const auto* in = std::get_if<chip::InfeedInstr>(&item.decoded);
            in && in->from_scalar_memory) {
          EXPECT_EQ(in->packet_bytes, 16u);
          entry_bytes += uint64_t{in->units} * 4;
        }
    }
    const uint64_t entries = uint64_t(c / 4) * k * k;
    EXPECT_EQ(entry_bytes, 16 * entries);
    // (Per 64-channel group a multiplier and a bias row; one zero-point row; the entries of
    // every group's words, 16 to a row.)
    const uint64_t groups = (c + 63) / 64, words = groups * (std::min(c, 64) / 4);
    const uint64_t rows = groups * 2 + 1 + (16 * words * k * k + 255) / 256;
    EXPECT_EQ(exes.caching->parameters.size(), rows * 256);
    EXPECT_LT(exes.caching->parameters.size(), entries * 256);
  }
  expect_equal_to_cpu(8, 8, 96, {depthwise(5, 1)}, random);
}

TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, RandomChannelDepthwiseLayersEqualTheCpuReference) {
  static const int kChannels[] = {4, 8, 12, 16, 24, 32, 64, 128, 192};
  static const int kK[] = {1, 3, 3, 3, 5};
  std::mt19937 random(53);
  for (int i = 0; i < 16; ++i) {
    ConvSpec s = depthwise(kK[random() % 5], 1 + static_cast<int>(random() % 2), random() % 3 != 0);
    s.bias = random() % 4 != 0;
    s.per_channel = random() % 4 != 0;
    const int c = kChannels[random() % 9];
    const int lo = s.same ? 1 : s.k;
    const int h = lo + static_cast<int>(random() % 12);
    int w = lo + static_cast<int>(random() % 12);
    if (w * c % 8 != 0) ++w;  // rows of whole 8-byte units
    expect_equal_to_cpu(h, w, c, {s}, random);
  }
}

// DeepLab's atrous depthwise layers: tap (ky, kx) reads input pixel (y s + ky d, x s + kx d), so
// the padded image, the band's halo rows and the op's tap strides grow with d.
ConvSpec dilated(int k, int d, int stride = 1, bool same = true,
                 Activation act = Activation::kNone) {
  ConvSpec s = depthwise(k, stride, same, act);
  s.dilation = d;
  return s;
}

TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, DilatedDepthwiseLayersEqualTheCpuReference) {
  std::mt19937 random(71);
  expect_equal_to_cpu(8, 8, 16, {dilated(3, 2)}, random);
  expect_equal_to_cpu(12, 12, 32, {dilated(3, 4)}, random);
  expect_equal_to_cpu(11, 10, 8, {dilated(3, 2, 1, false)}, random);  // VALID: 7 x 6 out
  expect_equal_to_cpu(9, 9, 128, {dilated(3, 2)}, random);            // two groups of 64
  expect_equal_to_cpu(8, 6, 8, {dilated(3, 4)}, random);              // taps reach past every edge
  expect_equal_to_cpu(10, 10, 12, {dilated(5, 2, 2)}, random);
  expect_equal_to_cpu(6, 8, 24, {dilated(3, 3, 1, true, Activation::kRelu6)}, random);
}

// DeepLab v3's dilated MobileNet v2 blocks (expand 1x1 -> depthwise 3x3 d 2 or 4 -> project 1x1
// -> residual ADD) on 33 x 33 maps over the tiles' row bands: the halo rows a band reads grow
// with d.
TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, DilatedMobileNetV2BlocksEqualTheCpuReference) {
  std::mt19937 random(79);
  const Activation r6 = Activation::kRelu6;
  ConvSpec expand{96, 1, 1, true, true, true, r6};
  ConvSpec project{16, 1, 1};
  ConvSpec add;
  add.residual_from = 0;
  size_t tiles = 0;
  expect_equal_to_cpu(33, 33, 16, {expand, dilated(3, 2, 1, true, r6), project, add}, random,
                      tiles);
  EXPECT_GT(tiles, 1u);
  ConvSpec add4 = add;
  add4.residual_from = 4;
  expect_equal_to_cpu(33, 33, 16,
                      {expand, dilated(3, 4, 1, true, r6), project, add, expand,
                       dilated(3, 2, 1, true, r6), project, add4},
                      random, tiles, false, 16);  // (two blocks deep: fewer distinct bytes)
}

// A dilated CONV_2D is not generated yet: the chain stays on the CPU with that reason.
TEST(ConvChainOnTheVirtualEdgeTpu, DilatedConvolutionIsRefusedWithItsReason) {
  std::mt19937 random(83);
  ConvSpec conv{16, 3, 1};
  conv.dilation = 2;
  const auto r = compile_model(container::write_tflite(conv_twin(12, 12, 8, {conv}, random)));
  ASSERT_EQ(r.edgetpu_subgraphs, 0);
  ASSERT_FALSE(r.rows.empty());
  for (const auto& row : r.rows)
    EXPECT_EQ(row.status, "CONV_2D with dilation is not generated yet") << row.status;
}

// A dense depthwise layer in a chain takes one FIFO row per tap, 25 of them: a 7x7 one (49 taps,
// weights not all equal) is refused with that reason, and the layout built before the refusal stays
// within its rows (it marked 49 of 25 rows once: a write past its table, which AddressSanitizer
// reports).
TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, MoreTapsThanFifoRowsAreRefusedWithTheirReason) {
  std::mt19937 random(89);
  const auto r = compile_model(container::write_tflite(
      conv_twin(12, 12, 16, {ConvSpec{16, 1, 1}, depthwise(7, 1)}, random)));
  ASSERT_EQ(r.edgetpu_subgraphs, 0);
  ASSERT_FALSE(r.rows.empty());
  for (const auto& row : r.rows)
    EXPECT_EQ(row.status, "DEPTHWISE_CONV_2D with more than 25 taps (its FIFO rows)") << row.status;
}

// MobileNet v1's blocks: conv 3x3 s2 -> depthwise 3x3 -> pointwise 1x1 (-> depthwise s2 ->
// pointwise), RELU6 throughout as in the model, one program with the activations in tile memory.
TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, MobileNetBlocksEqualTheCpuReference) {
  std::mt19937 random(59);
  const Activation r6 = Activation::kRelu6;
  ConvSpec first{8, 3, 2, true, true, true, r6};
  ConvSpec pw16{16, 1, 1, true, true, true, r6};
  ConvSpec pw32{32, 1, 1, true, true, true, r6};
  expect_equal_to_cpu(16, 16, 3, {first, depthwise(3, 1, true, r6), pw16}, random);
  expect_equal_to_cpu(
      32, 32, 3, {first, depthwise(3, 1, true, r6), pw16, depthwise(3, 2, true, r6), pw32}, random);
  ConvSpec pw128{128, 1, 1, true, true, true, r6};
  ConvSpec fc10{10};
  fc10.fc = true;
  expect_equal_to_cpu(8, 8, 64, {depthwise(3, 2, true, r6), pw128, depthwise(3, 1), fc10}, random);
}

// MobileNet's head: the global AVERAGE_POOL_2D (a depthwise layer of weights 1 and the chip's
// averaging multiplier) and the 1x1 classifier of 1001 classes (padded to 16 groups of 64).
TEST(DepthwiseInAChainOnTheVirtualEdgeTpu, AveragePoolAndClassifierEqualTheCpuReference) {
  std::mt19937 random(61);
  ConvSpec pool4{0, 4, 4};
  pool4.pool = true;
  ConvSpec pool2{0, 2, 2};
  pool2.pool = true;
  ConvSpec pool5{0, 5, 5};
  pool5.pool = true;
  expect_equal_to_cpu(8, 8, 16, {{32, 1, 1, true}, pool2}, random);
  expect_equal_to_cpu(4, 4, 64, {{64, 1, 1, true}, pool4, {1001, 1, 1, true}}, random);
  expect_equal_to_cpu(5, 5, 32, {depthwise(3, 1), pool5, {100, 1, 1, true}}, random);
}

// Chains whose weights exceed one tile's wide memory: the parameters are cut into segments that
// the execution program streams into wide memory in turn (every inference, the first included).
TEST(ConvChainOnTheVirtualEdgeTpu, ParametersBeyondWideMemoryAreStreamedInSegments) {
  std::mt19937 random(73);
  const ConvSpec c128{128, 3, 1, true};  // 2 groups x 9 x 32 weight rows + 5 = 581 rows
  expect_equal_to_cpu(6, 6, 128, {c128, c128, c128, c128, c128}, random);
}

// One 64-channel group of 1,983 rows (3x3 over 880 channels: 9 x 220 weight rows + 3): over the
// 1,920 rows the parameters had while the input FIFO rows sat under 0x2000 (refused then), within
// the 2,044 they have now - the whole 512 KiB of wide memory but the ADD rows.
TEST(ConvChainOnTheVirtualEdgeTpu, AGroupOfRowsUpToTheWholeWideMemoryIsResident) {
  std::mt19937 random(79);
  expect_equal_to_cpu(4, 4, 880, {{64, 3, 1, true}}, random);
}

// A layer larger than one wide memory (1x1 1024 -> 1024: 4,113 rows) takes its weights through a
// FIFO from owner tiles (WeightsBeyondTheWideMemoriesComeThroughAFifoFromOwnerTiles; segments
// took turns for it before, the next test); the chain is cut into
// stages on tiles of their own (a pipeline handing over 2x2x1024 maps), and the 2x2 pool's 16
// groups share one set of rows. Two inferences, every byte equal.
TEST(ConvChainOnTheVirtualEdgeTpu, LayersBeyondOneWideMemoryAreSplitAndPipelined) {
  std::mt19937 random(79);
  ConvSpec pool2{0, 2, 2};
  pool2.pool = true;
  expect_equal_to_cpu(2, 2, 1024, {{1024, 1, 1, true}, depthwise(3, 1), pool2}, random);
}

// Turns from owner tiles (own_turns), for a layer whose group of rows exceeds a FIFO window (1x1
// over 1,088 channels: 272 rows, kFifoMaxRows 256): the caching program also keeps each segment
// that takes turns (and the first of its group, loaded again after them) on a tile with free wide
// rows, and the execution program sends it from there over the ring (a producer of the parameter
// form, pcfg 4, to the segment's tiles) where it streamed it from the host. Every byte equal on
// two inferences; the host sends no parameter with an inference, where it would send the two turns
// of the 1088 -> 1024 layer (1,919 and 549 rows) and the 1,919 rows of its first segment they
// overwrite; the three broadcasts carry exactly those rows. (Over 1,024 channels the layer takes a
// FIFO instead; these numbers were 1,807, 517 and 1,807 rows then.)
TEST(ConvChainOnTheVirtualEdgeTpu, SegmentsTakingTurnsComeFromOwnerTilesOverTheRing) {
  std::mt19937 random(89);
  ConvSpec pool2{0, 2, 2};
  pool2.pool = true;
  size_t tiles = 0;
  expect_equal_to_cpu(2, 2, 1088, {{1024, 1, 1, true}, depthwise(3, 1), pool2}, random, tiles,
                      false, 32, [](const CompiledTwin& compiled) {
                        const container::Executable& exe = *compiled.exes.execution;
                        EXPECT_EQ(exe.parameters.size(), 0u) << "parameters streamed from the host";
                        for (const auto& hint : exe.dma_hints.hints)
                          EXPECT_FALSE(hint.kind == container::HintKind::kDma &&
                                       hint.meta.desc == container::BufferKind::kParameter)
                              << "a parameter DMA hint";
                        int broadcasts = 0;
                        int64_t rows = 0;
                        for (const auto& bs : exe.bitstreams) {
                          const std::unique_ptr<chip::Program> program =
                              chip::Program::decode(bs.data);
                          for (const chip::ProgramItem& item : program->items) {
                            const auto* r = std::get_if<chip::RingInstr>(&item.decoded);
                            // (A dense depthwise layer's taps go to the scalar core in this form
                            // too.)
                            if (item.opcode != isa::kRingProducer || r == nullptr || r->mode != 0 ||
                                r->dest >> 16 != 0)
                              continue;
                            ++broadcasts;
                            EXPECT_EQ(std::popcount(r->tile_mask), 1) << "one owner tile sends";
                            rows += static_cast<int64_t>(r->ttu.steps());
                          }
                        }
                        EXPECT_EQ(broadcasts, 3);
                        EXPECT_EQ(rows, 1919 + 549 + 1919);
                      });
}

// What the programs' weight FIFOs carry (Google's form, docs/compiler.md "Weights through a FIFO
// from owner tiles"): the owners' broadcast producers into ringConsumer1 and the ops that read it.
struct FifoTraffic {
  int producers = 0, consumers = 0, fifo_ops = 0;
  // Of the FIFO ops, those reading a weight window (par tflags 0x40; a depthwise layer's taps
  // come through a FIFO too), and the K-chunked ones among them (reduce 0b101, psum rows).
  int window_ops = 0, chunked_ops = 0;
  uint32_t max_window = 0;  // the largest weight window an op reads (par_fifo)
  int64_t rows = 0;         // weight rows the producers send
  uint32_t receivers = 0;   // tiles that take them
  int consumers_first = 0;  // consumers with no producer since the FIFO op before
};
FifoTraffic fifo_traffic(const container::Executable& exe) {
  FifoTraffic f;
  for (const auto& bs : exe.bitstreams) {
    const std::unique_ptr<chip::Program> program = chip::Program::decode(bs.data);
    bool sent = false;  // a producer since the last FIFO op
    for (const chip::ProgramItem& item : program->items) {
      if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded); op && op->par_fifo != 0) {
        ++f.fifo_ops;
        if (op->par.tflags == 0x40) {
          ++f.window_ops;
          if (op->dp_mode == 3 && op->reduce_mask == 0b101) ++f.chunked_ops;
          f.max_window = std::max(f.max_window, op->par_fifo);
        }
        sent = false;
      }
      const auto* r = std::get_if<chip::RingInstr>(&item.decoded);
      if (r == nullptr) continue;
      if (item.opcode == isa::kRingConsumer1) {
        ++f.consumers;
        if (!sent) ++f.consumers_first;
      }
      if (item.opcode != isa::kRingProducer || !r->to_c1 || r->dest >> 16 != 0) continue;
      ++f.producers;
      sent = true;
      EXPECT_EQ(std::popcount(r->tile_mask), 1) << "one owner tile sends";
      f.rows += static_cast<int64_t>(r->ttu.steps());
      f.receivers |= r->dest;
    }
  }
  return f;
}

// A layer whose weights exceed the wide memories its stage leaves them (1x1 512 -> 1024: 2,048
// weight rows; 3x3 64 -> 1024 over a SAME window: 16 x 144) takes them through a FIFO of one
// group's rows on each tile that computes it, broadcast from the owner tiles that keep them
// (several, in group order) with every inference: no parameter comes from the host, every weight
// row crosses the ring once per inference to all its tiles at once, every byte equal to the CPU's.
// A layer's first run goes before its consumer and ops (Google's order). The windows are
// K-chunked (docs/compiler.md "K-chunked FIFO windows"): a few rows a fill (8 of a 1x1 layer's
// 128 words a group, 12 of a 3x3's 144), the positions' partial sums in psum rows.
TEST(ConvChainOnTheVirtualEdgeTpu, WeightsBeyondTheWideMemoriesComeThroughAFifoFromOwnerTiles) {
  std::mt19937 random(20261205);
  struct Case {
    int side, cin;
    std::vector<ConvSpec> specs;
    int fifo_layers;
    int receivers;        // tiles computing the FIFO layers (their stage's, as placed)
    int64_t weight_rows;  // of the FIFO layers: groups x kwords
    uint32_t window;      // rows of the largest K-chunked window
  };
  const std::vector<Case> cases{
      {8, 512, {{1024, 1, 1, true}, {64, 1, 1, true}}, 2, 8, 16 * 128 + 256, 8},
      {4, 64, {{1024, 3, 1, true}, depthwise(3, 1), {48, 1, 1, true}}, 1, 4, 16 * 144, 12},
  };
  for (const Case& c : cases) {
    size_t tiles = 0;
    expect_equal_to_cpu(c.side, c.side, c.cin, c.specs, random, tiles, false, 32,
                        [&](const CompiledTwin& compiled) {
                          const container::Executable& exe = *compiled.exes.execution;
                          EXPECT_EQ(exe.parameters.size(), 0u)
                              << "parameters streamed from the host";
                          const FifoTraffic f = fifo_traffic(exe);
                          EXPECT_EQ(f.consumers, c.fifo_layers);
                          EXPECT_GE(f.fifo_ops, 1);
                          EXPECT_GE(f.producers, 2) << "the weights fit one owner tile";
                          EXPECT_EQ(f.rows, c.weight_rows);
                          EXPECT_EQ(std::popcount(f.receivers), c.receivers);
                          EXPECT_GE(f.window_ops, 1);
                          EXPECT_EQ(f.chunked_ops, f.window_ops) << "a whole group's window";
                          EXPECT_EQ(f.max_window, c.window);
                          // Google's order: a layer's first run before its consumer and ops.
                          EXPECT_EQ(f.consumers_first, 0);
                        });
  }
}

// K-chunked windows over random reductions (1x1 over 2x2 or 3x3 maps of 520-1,016 channels into
// 1,024, beyond the wide memories of the pipeline's tiles): each FIFO op reads a window of the
// largest divisor of its 130-254 words up to 15 (at least 4) and keeps its positions' partial
// sums from chunk to chunk; every byte equal to the CPU's on two inferences.
TEST(ConvChainOnTheVirtualEdgeTpu, KChunkedWindowsOverRandomReductionsEqualTheCpuReference) {
  std::mt19937 random(20261206);
  ConvSpec pool{0, 2, 2};
  pool.pool = true;
  for (int i = 0; i < 4; ++i) {
    const int side = 2 + static_cast<int>(random() % 2);
    int cin = 0, chunk = 0;
    while (chunk < 4) {
      cin = 8 * (65 + static_cast<int>(random() % 63));
      for (chunk = 15; cin / 4 % chunk != 0; --chunk) {
      }
    }
    pool.k = pool.stride = side;
    size_t tiles = 0;
    expect_equal_to_cpu(side, side, cin, {{1024, 1, 1, true}, depthwise(3, 1), pool}, random, tiles,
                        false, 32, [&](const CompiledTwin& compiled) {
                          const FifoTraffic f = fifo_traffic(*compiled.exes.execution);
                          EXPECT_GE(f.window_ops, 1) << "no FIFO layer";
                          EXPECT_EQ(f.chunked_ops, f.window_ops);
                          EXPECT_EQ(f.max_window, static_cast<uint32_t>(chunk));
                        });
  }
}

// A classifier whose parameters exceed one wide memory (512 -> 1001 over a 1x1 map: 2,081 rows;
// a 4x4 VALID conv of 64 channels to 1001: 4,129) is split by output groups over two (three)
// tiles, each keeping its groups' rows resident (MobileNet v1 0.5's case); the host
// reads the tiles' channels in order. Every byte equal.
TEST(ConvChainOnTheVirtualEdgeTpu, ClassifiersBeyondOneWideMemoryAreSplitOverTiles) {
  std::mt19937 random(83);
  const ConvSpec classifier{1001, 1, 1, true};
  EXPECT_EQ(expect_equal_to_cpu(1, 1, 512, {classifier}, random), 2u);
  const std::vector<ConvSpec> specs{{64, 3, 2, true}, depthwise(3, 1), {1001, 4, 1, false}};
  EXPECT_EQ(expect_equal_to_cpu(8, 8, 32, specs, random), 3u);
}

// Layers inside a chain whose parameters exceed one tile's wide memory (over 1,920 rows: 16 or 8
// groups of 64 output channels over long reductions) are split by output groups over tiles, each
// tile keeping its groups' rows: a convolution from the whole input, the depthwise layer after it
// from its own channels only; the slices are handed over into the next layer's pixels. That no
// parameter is streamed shows the split (no tile could hold such a layer whole).
TEST(ConvChainOnTheVirtualEdgeTpu, LayersBeyondOneWideMemoryAreSplitOverTiles) {
  std::mt19937 random(20261205);
  for (int i = 0; i < 5; ++i) {
    const int side = 2 + static_cast<int>(random() % 4);
    const int cin = 8 * (1 + static_cast<int>(random() % 4));  // rows of whole 8-byte units
    const int wide = 64 * (random() % 2 == 0 ? 16 : 8);
    // 3x3 over 64 input channels makes 16 x 144 weight rows; 8 groups need 3x3 over 112 or more.
    const int mid = wide == 1024 ? 64 : 112 + 4 * static_cast<int>(random() % 8);
    std::vector<ConvSpec> specs{{mid, 1 + 2 * static_cast<int>(random() % 2), 1, true}};
    specs.push_back({wide, 3, 1, true, random() % 2 == 0});
    specs.push_back(depthwise(3, 1 + static_cast<int>(random() % 2)));
    specs.push_back({64 + 4 * static_cast<int>(random() % 17), 1, 1, true});
    std::mt19937 same = random;  // expect_equal_to_cpu builds the same twin
    const CompiledTwin compiled(conv_twin(side, side, cin, specs, same));
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    ASSERT_NE(compiled.exes.execution, nullptr);
    EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u)
        << describe(side, side, cin, specs) << ": parameters streamed, the layers were not split";
    expect_equal_to_cpu(side, side, cin, specs, random);
  }
}

// The same layers over larger maps: a split layer's slices are also split into row bands (2-D
// blocks, each band's tiles keeping its slice's rows; split_stage with bands), handed over from
// and into row bands. Whatever the search picks, every parameter stays and every byte equals the
// twin's (for these shapes it picks 8 slices in 2 bands each, and the depthwise layer after them
// in 8 slices: the hand-overs out of and into 2-D blocks this guards).
TEST(ConvChainOnTheVirtualEdgeTpu, SplitLayersInRowBandsEqualTheCpuReference) {
  std::mt19937 random(20261204);
  for (int i = 0; i < 3; ++i) {
    const int side = 8 + static_cast<int>(random() % 5);
    const int cin = 8 * (1 + static_cast<int>(random() % 2));
    // (8 groups of 3x3 over 112 or more channels: over one wide memory, 8 slices.)
    const int mid = 112 + 4 * static_cast<int>(random() % 8);
    std::vector<ConvSpec> specs{{mid, 1, 1, true}};
    specs.push_back({512, 3, 1, true, random() % 2 == 0});
    specs.push_back(depthwise(3, 1 + static_cast<int>(random() % 2)));
    specs.push_back({64 + 4 * static_cast<int>(random() % 17), 1, 1, true});
    std::mt19937 same = random;  // expect_equal_to_cpu builds the same twin
    const CompiledTwin compiled(conv_twin(side, side, cin, specs, same));
    ASSERT_EQ(compiled.result.edgetpu_subgraphs, 1) << compiled.reason();
    ASSERT_NE(compiled.exes.execution, nullptr);
    EXPECT_EQ(compiled.exes.execution->parameters.size(), 0u) << describe(side, side, cin, specs);
    expect_equal_to_cpu(side, side, cin, specs, random);
  }
}

// MobileNet v1 of other widths and resolutions than the test data's (Google's models come in
// alphas 0.25-1.0 at 128-224; the hold-out models may be any of them): the whole chain, random
// weights, RELU6 as in the model, the pool and the 1001-class classifier; compiled whole, every
// byte equal on the virtual Edge TPU, on two inferences.
std::vector<ConvSpec> mobilenet_v1(double alpha, int resolution) {
  const Activation r6 = Activation::kRelu6;
  auto c = [&](int n) { return static_cast<int>(n * alpha); };
  std::vector<ConvSpec> specs{{c(32), 3, 2, true, true, true, r6}};
  const std::vector<std::pair<int, int>> blocks{{64, 1},  {128, 2},  {128, 1}, {256, 2}, {256, 1},
                                                {512, 2}, {512, 1},  {512, 1}, {512, 1}, {512, 1},
                                                {512, 1}, {1024, 2}, {1024, 1}};
  for (const auto& [cout, stride] : blocks) {
    specs.push_back(depthwise(3, stride, true, r6));
    specs.push_back({c(cout), 1, 1, true, true, true, r6});
  }
  ConvSpec pool{0, resolution / 32, resolution / 32};
  pool.pool = true;
  specs.push_back(pool);
  specs.push_back({1001, 1, 1, true});
  return specs;
}

// MobileNet v2 likewise: inverted residual blocks (1x1 expansion, depthwise 3x3, 1x1 projection,
// the residual ADD where the shape stays), the 1x1 to 1280, the pool and the classifier.
std::vector<ConvSpec> mobilenet_v2(double alpha, int resolution) {
  const Activation r6 = Activation::kRelu6;
  auto c = [&](int n) { return std::max(8, static_cast<int>(n * alpha + 4) / 8 * 8); };
  std::vector<ConvSpec> specs{{c(32), 3, 2, true, true, true, r6}};
  int channels = c(32);
  struct Block {
    int t, c, n, s;
  };
  for (const Block& b :
       {Block{1, 16, 1, 1}, Block{6, 24, 2, 2}, Block{6, 32, 3, 2}, Block{6, 64, 4, 2},
        Block{6, 96, 3, 1}, Block{6, 160, 3, 2}, Block{6, 320, 1, 1}})
    for (int k = 0; k < b.n; ++k) {
      const int stride = k == 0 ? b.s : 1;
      const int first = static_cast<int>(specs.size());
      if (b.t > 1) specs.push_back({channels * b.t, 1, 1, true, true, true, r6});
      specs.push_back(depthwise(3, stride, true, r6));
      specs.push_back({c(b.c), 1, 1, true});
      if (stride == 1 && channels == c(b.c)) {
        ConvSpec add{};
        add.residual_from = first;
        specs.push_back(add);
      }
      channels = c(b.c);
    }
  specs.push_back({alpha > 1.0 ? c(1280) : 1280, 1, 1, true, true, true, r6});
  ConvSpec pool{0, resolution / 32, resolution / 32};
  pool.pool = true;
  specs.push_back(pool);
  specs.push_back({1001, 1, 1, true});
  return specs;
}

// Sizes of each MobileNet: under the sanitizers (each size a compile and a run about ten times
// slower) the first of v1 and none of v2, whose residual chains the sanitized run compiles and
// runs whole in MobileNetCompiledWhole.V2Gen2020EqualsItsTwinAndPassesGooglesCheck; the normal
// build checks them all.
#ifdef TINYCORAL_ASAN
constexpr size_t kV1Sizes = 1, kV2Sizes = 0;
#else
constexpr size_t kV1Sizes = 2, kV2Sizes = 2;
#endif

TEST(ConvChainOnTheVirtualEdgeTpu, MobileNetsOfOtherSizesEqualTheCpuReference) {
  std::mt19937 random(20261207);
  const std::pair<double, int> v1_sizes[] = {{1.0, 128}, {0.75, 192}};
  const std::pair<double, int> v2_sizes[] = {{0.5, 160}, {0.75, 192}};
  for (size_t s = 0; s < kV1Sizes; ++s) {
    const auto [alpha, resolution] = v1_sizes[s];
    SCOPED_TRACE(cat("alpha ", alpha, ", ", resolution));
    // (28 layers of random weights narrow the logits to a dozen or so values.)
    size_t tiles = 0;
    expect_equal_to_cpu(resolution, resolution, 3, mobilenet_v1(alpha, resolution), random, tiles,
                        false, 8);
  }
  for (size_t s = 0; s < kV2Sizes; ++s) {
    const auto [alpha, resolution] = v2_sizes[s];
    SCOPED_TRACE(cat("v2 alpha ", alpha, ", ", resolution));
    size_t tiles = 0;
    expect_equal_to_cpu(resolution, resolution, 3, mobilenet_v2(alpha, resolution), random, tiles,
                        false, 8);
  }
}

// A refused chain that starts with a DEPTHWISE_CONV_2D and holds a CONV_2D is logged with the
// chain generator's reason (here the 7x7 depthwise's 49 taps), not the single-depthwise
// generator's "no code generator for CONV_2D yet" (CONV_2D has one: the chain's).
TEST(ConvChainOnTheVirtualEdgeTpu, RefusedChainLogsTheChainsReason) {
  std::mt19937 random(5);
  ConvSpec dw{0, 7, 1};
  dw.depthwise = true;
  const auto r =
      compile_model(container::write_tflite(conv_twin(12, 12, 8, {dw, {16, 1, 1}}, random)));
  ASSERT_EQ(r.edgetpu_subgraphs, 0);
  ASSERT_FALSE(r.rows.empty());
  for (const auto& row : r.rows) {
    EXPECT_EQ(row.status.find("no code generator for CONV_2D"), std::string::npos) << row.status;
    EXPECT_NE(row.status.find("taps"), std::string::npos) << row.status;
  }
}

}  // namespace
}  // namespace tinycoral::compiler
