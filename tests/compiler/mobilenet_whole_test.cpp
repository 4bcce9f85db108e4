// Whole MobileNets compiled by tinycoral: the CPU twins of the test data go through
// `compile_model` into one Edge TPU program (every layer mapped, the SOFTMAX on the CPU), which
// runs on the virtual Edge TPU. Checked: the chip's logits equal the CPU twin's in `edgetpu`
// rounding in every byte (cat, bird and a random image, two inferences), the whole model through
// the runtime's delegate equals the twin's output, and Google's own classification check on
// cat.bmp (google_expectations.tsv) passes on our compiled file.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <utility>

#include "chip/program.h"
#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "compiler/googles_check_on_ours.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "isa/isa.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/compiled_twin.h"
#include "support/hand_overs.h"
#include "support/output_sends.h"
#include "support/same_bytes.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

std::vector<uint8_t> read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

// `model` (relative to the test data) compiled whole, checked as the file's comment says;
// `google_row` is the id of Google's cat.bmp classification row for the model ("": none applies);
// `cpu_ops` the operators left on the CPU; `quick`: cat.bmp only, one inference (the 224 x 224
// models take seconds per inference on the simulator); `max_streamed`: the most parameter bytes the
// inference program may stream (0: every parameter stays in the tiles' wide memory, cached once);
// `layout`: checks of the compiled file's layout, run on it before it runs (ctest runs each test
// in its own process, so a model's layout is checked in the test that compiles it: a whole
// compile is seconds under GCC and ten times more under the sanitizers).
void expect_compiled_whole(const std::filesystem::path& data, const std::string& model,
                           const std::string& google_row,
                           const std::map<std::string, int>& cpu_ops_left = {{"SOFTMAX", 1}},
                           bool quick = false, size_t max_streamed = SIZE_MAX,
                           const std::function<void(const std::vector<uint8_t>&)>& layout = {}) {
  SCOPED_TRACE(model);
  const std::vector<uint8_t> cpu_bytes = read_bytes(data / model);
  ASSERT_FALSE(cpu_bytes.empty()) << "missing " << model;
  const CompileResult r = compile_model(cpu_bytes);
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.front().status);
  std::map<std::string, int> cpu_ops;
  for (const LogRow& row : r.rows)
    if (!row.mapped) cpu_ops[row.op] += row.count;
  EXPECT_EQ(cpu_ops, cpu_ops_left);
  if (layout) layout(r.tflite);

  const container::Model twin_model = container::read_tflite(cpu_bytes);
  const auto compiled = container::read_edgetpu_model(r.tflite);
  const auto exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  ASSERT_NE(exes.caching, nullptr);
  EXPECT_LE(exes.execution->parameters.size(), max_streamed) << "parameters streamed";
  const container::Layer& in_layer = exes.execution->input_layers.at(0);
  const container::Layer& logits = exes.execution->output_layers.at(0);

  // The CPU twin, with the chip part's output (the logits) as a second output.
  const auto& sg = twin_model.subgraphs.at(0);
  const container::Tensor& input = sg.tensors.at(static_cast<size_t>(sg.inputs.at(0)));
  const std::string final_name = sg.tensors.at(static_cast<size_t>(sg.outputs.at(0))).name;
  host::Interpreter cpu = testing::edgetpu_reference(
      chip::testing::twin_with_outputs(twin_model, {final_name, logits.name}));
  host::InterpreterOptions tpu_options;
  runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(container::read_tflite(r.tflite), tpu_options);

  std::vector<std::vector<uint8_t>> images;
  for (const char* name : {"cat.bmp", "bird.bmp"})
    images.push_back(host::image_to_input(host::read_image(data / "images" / name), input.shape,
                                          input.type, host::parse_resize_mode("bilinear"), {}));
  std::mt19937 random(71);
  images.emplace_back(images.front().size());
  for (auto& b : images.back()) b = static_cast<uint8_t>(random());
#ifdef TINYCORAL_ASAN
  // Sanitized (a compile and an inference take ten to twenty times longer): cat.bmp once, the
  // same code as every image and repetition; the normal build checks all three twice.
  quick = true;
#endif
  if (quick) images.resize(1);

  chip::VirtualEdgeTpu chip;
  chip::testing::run_executable(chip, *exes.caching, {});
  for (size_t i = 0; i < images.size(); ++i) {
    SCOPED_TRACE(i < 2 ? (i == 0 ? "cat.bmp" : "bird.bmp") : "a random image");
    cpu.set_input(0, images[i]);
    cpu.invoke();
    const auto want_logits = cpu.output_bytes(1);
    for (int inference = 0; inference < (quick ? 1 : 2); ++inference) {
      const auto got = chip::testing::detile(
          logits, chip::testing::run_executable(chip, *exes.execution, {{in_layer.name, images[i]}})
                      .at(logits.name));
      EXPECT_TRUE(testing::same_bytes(got, want_logits)) << "logits of inference " << inference;
    }
    tpu.set_input(0, images[i]);
    tpu.invoke();
    EXPECT_TRUE(testing::same_bytes(tpu.output_bytes(0), cpu.output_bytes(0)))
        << "the model's output";
  }
  EXPECT_EQ(chip.fault(), "");
  if (google_row.empty()) return;

  testing::expect_googles_check_passes(data, google_row, r.tflite, tpu_options);
}

TEST(MobileNetCompiledWhole, V1QuarterGen2020EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_compiled_whole(data, "gen2020/mobilenet_v1_0.25_128_quant.tflite", "G002",
                        {{"SOFTMAX", 1}}, false, 0);
}

TEST(MobileNetCompiledWhole, V1QuarterGen2021EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_compiled_whole(data, "gen2021/mobilenet_v1_0.25_128_quant.tflite", "G019",
                        {{"SOFTMAX", 1}}, false, 0);
}

// Stages: the first layers in row bands over 10 tiles, the rest on tile 0 after a hand-over over
// the ring; parameters in 8 segments (docs/compiler.md "Whole MobileNets").
TEST(MobileNetCompiledWhole, V1HalfGen2020EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_compiled_whole(data, "gen2020/mobilenet_v1_0.5_160_quant.tflite", "G004", {{"SOFTMAX", 1}},
                        false, 0);
}

// The 7x7 average pool at the end is split by output groups like the layer before it, each tile
// pooling its own channels (16 groups of 64). Its groups run on all its tiles at once: group k of
// every tile is one op instruction on all of them (the same addresses on each), so the pool's op
// instructions all have the same tiles, and there are 16 / tiles of them (16 one-tile ops before).
void v1_embedding_pools_each_group_on_all_its_tiles_at_once(const std::vector<uint8_t>& tflite) {
  SCOPED_TRACE("V1EmbeddingExtractorPoolsEachGroupOnAllItsTilesAtOnce");
  const auto compiled = container::read_edgetpu_model(tflite);
  const auto exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  std::vector<uint16_t> pool_ops;  // the tiles of each op of 49 taps
  for (const chip::OpInstr& op : testing::execution_ops(*exes.execution))
    if (op.loops[0] == 48) pool_ops.push_back(op.tile_mask);
  ASSERT_FALSE(pool_ops.empty());
  const int tiles = std::popcount(pool_ops.front());
  EXPECT_GT(tiles, 1) << "the pool is not split over tiles";
  for (uint16_t mask : pool_ops) EXPECT_EQ(mask, pool_ops.front());
  EXPECT_EQ(static_cast<int>(pool_ops.size()) * tiles, 16);
}

// The 14x14 and 7x7 layers split by output groups over tiles, all 6.4 MB of parameters resident
// (6.3 MB were streamed before the splits, 171 KB before the parameters had the whole 512 KiB of
// wide memory). The embedding must equal the twin's in every byte, and Google's G011 (a
// classifier appended to the extractor, scores within 0.005 of softmax(1/3, 2/3, 1)) must pass on
// our compiled file. Its pool is checked too (above).
TEST(MobileNetCompiledWhole, V1EmbeddingExtractorEqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_compiled_whole(data, "gen2020/mobilenet_v1_1.0_224_quant_embedding_extractor.tflite",
                        "G011", {}, true, 0,
                        v1_embedding_pools_each_group_on_all_its_tiles_at_once);
}

// gen2020 MobileNet v2 compiled whole: its execution program's instructions (the ISA table's
// decoding) and its ops (the simulator's), in program order, for the checks of its layout below.
struct CompiledV2 {
  std::vector<isa::Instruction> instructions;
  std::vector<chip::OpInstr> ops;
  std::vector<uint8_t> cached;  // the caching program's parameters
};
void read_v2(const std::vector<uint8_t>& tflite, CompiledV2& v2) {
  const container::EdgeTpuModel compiled = container::read_edgetpu_model(tflite);
  const chip::testing::PackageExecutables exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  for (const auto& bs : exes.execution->bitstreams)
    for (const isa::Instruction& in : isa::decode(bs.data)) v2.instructions.push_back(in);
  v2.ops = testing::execution_ops(*exes.execution);
  ASSERT_NE(exes.caching, nullptr);
  v2.cached = exes.caching->parameters;
}

// v2's 7x7 average pool (20 groups of 64 channels) is split like the 1x1 layer before it (5
// slices of 4 groups), each tile pooling its own groups: its group k on every tile is one op
// instruction on all of them, 4 in all (before, 20 one after another on one tile, 4.8 k cycles;
// widen_with_fifos, docs/compiler.md "v2's pool split like the layer before"). The bytes of this
// program are checked by V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_pools_each_group_on_the_tiles_of_the_layer_before(const CompiledV2& v2) {
  std::vector<uint16_t> pool_ops;  // the tiles of each op of 49 taps
  for (const chip::OpInstr& op : v2.ops)
    if (op.loops[0] == 48) pool_ops.push_back(op.tile_mask);
  ASSERT_FALSE(pool_ops.empty());
  const int tiles = std::popcount(pool_ops.front());
  EXPECT_GT(tiles, 1) << "the pool is not split over tiles";
  for (uint16_t mask : pool_ops) EXPECT_EQ(mask, pool_ops.front());
  EXPECT_EQ(static_cast<int>(pool_ops.size()) * tiles, 20);
}

// v2's 14x14 576 -> 96 projections run split by output groups (2 slices, 64 and 32 channels, in 7
// row bands: 14 tiles, each one group of 2 rows), their ADDs stages of their own after them
// (split_pointwise, docs/compiler.md "Pointwise stages re-cut by output groups"): before, 7 row
// bands each computed both groups with all 293 parameter rows on every tile, 29 k cycles instead
// of 14 k. (Since the rows traded between stages, the first of them runs in 5 bands of 2 or 3
// rows; the second keeps its 14 tiles.) The bytes of this layout are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_projections_to_96_are_split_by_output_groups(const CompiledV2& v2) {
  // (The ops of 144 reduction words, 576 input channels, over 28 positions: 2 rows of the 14x14
  // map, or 4 of the 7x7 one of the 576 -> 160 projection; loops[2] counts groups - 1.)
  int two_groups = 0;
  uint16_t one_group_tiles = 0;
  for (const chip::OpInstr& op : v2.ops) {
    if (op.loops[0] != 143 || op.loops[1] != 27) continue;
    if (op.loops[2] > 0)
      ++two_groups;
    else
      one_group_tiles |= op.tile_mask;
  }
  EXPECT_EQ(two_groups, 0) << "a projection's band computes both groups";
  EXPECT_GE(std::popcount(one_group_tiles), 14);
}

// A hand-over transfer ending inside a packet is split into its whole packets and a short rest
// only where that lets the parts gather (conv_hand_over.cpp, gathered): otherwise it goes whole
// with one producer while the other transfers gather (the row bands of v2's 14x14 stages handing
// over into its split depthwise layers), or as overlapping whole packets (hand_over_gather_test):
// one producer per transfer, 772 producers to tiles before, 620 after (on the layout of the rows
// traded between stages, more tiles: 787 before, 633 after; with stages widened through FIFOs,
// more still: 641). The bytes of this program are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_hand_overs_split_only_transfers_whose_rests_gather(const CompiledV2& v2) {
  // (Not the owners' broadcasts of FIFO weights, which go to ringConsumer1: to_c1.)
  int to_tiles = 0, ops = 0;
  for (const isa::Instruction& in : v2.instructions) {
    to_tiles += in.opcode() == isa::kRingProducer && (in.value("dest") & 0xffff) != 0 &&
                in.value("to_c1") == 0;
    ops += in.opcode() == isa::kTensorOp;
  }
  // (686 since the pixel bands of the 7 x 7 pointwise layers: the rows their bands share go in
  // pieces, one per band.)
  EXPECT_LE(to_tiles, 690);
  // The stages whose band tiles keep the whole first image slide it in its region, so that the
  // tiles share their ops (docs/compiler.md "Whole images slid in their region"): 239 ops with
  // the images as planned, 116 of them differing from another only in their tiles and `in.base`;
  // 147 now.
  EXPECT_GT(ops, 100);
  EXPECT_LE(ops, 147);
}

// v2's first 14x14 384 -> 96 projection ran in 7 row bands, each computing both output groups
// with all 197 parameter rows on every tile; split in 2 slices of 5 bands each tile computes one
// group (19 k -> 14 k cycles) with 99 rows, and the rows that frees (with the 28x28 32 -> 192
// layers split likewise) let the 28x28 depthwise stage before it widen from 7 tiles to 14, 31 k
// -> 16 k cycles (trade_rows, docs/compiler.md "Rows traded between stages, boundaries moved where
// the image shrinks"). Without the trade every wide memory stays full and the projection's ops
// compute two groups. The bytes of this layout are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_projection_to_96_gives_its_rows_to_the_depthwise_stage(const CompiledV2& v2) {
  // (The ops of 96 reduction words, 384 input channels: the 384 -> 64 projections and the
  // 384 -> 96 one; loops[2] counts groups - 1, or the chunks of a K-chunked op, loops (window,
  // positions, chunks, groups), whose loops[3] counts them.)
  int ops = 0, two_groups = 0;
  for (const chip::OpInstr& op : v2.ops) {
    const bool chunked = op.reduce_mask == 0b101;
    if ((chunked ? (op.loops[0] + 1) * (op.loops[2] + 1) : op.loops[0] + 1) != 96) continue;
    ++ops;
    if (op.loops[chunked ? 3 : 2] > 0) ++two_groups;
  }
  EXPECT_GT(ops, 0);
  EXPECT_EQ(two_groups, 0) << "a band of the 384 -> 96 projection computes both groups";
}

// v2's first stage ended after the 112x112 16 -> 96 expansion, so its hand-over moved 112x112x96
// bytes (1.2 MB over the ring, 19 k cycles with no op running) where the expansion's input is
// 112x112x16; the expansion now runs in the stage of the stride-2 depthwise layer after it, on
// that stage's tiles (shift_cuts, docs/compiler.md "Rows traded between stages, boundaries
// moved"). The first stage is now re-cut to that stage's tiles and writes its rows in place, so
// that only the halo rows cross the ring (match_bands, docs/compiler.md "Out of the first stage
// in place; uneven stride-2 bands"). The bytes of this layout are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_first_stage_hands_over_the_image_before_the_expansion(const CompiledV2& v2) {
  // (The ops in program order with their tiles: the expansion's are the only ones of 4 reduction
  // words, 16 input channels; the first stage's first op is the 3x3 stem's.)
  std::vector<std::pair<bool, uint16_t>> ops;  // expansion?, tiles
  for (const chip::OpInstr& op : v2.ops) ops.push_back({op.loops[0] == 3, op.tile_mask});
  uint16_t expansion_tiles = 0, after = 0;
  for (size_t k = 0; k < ops.size(); ++k) {
    if (!ops[k].first) continue;
    expansion_tiles |= ops[k].second;
    if (k + 1 < ops.size() && !ops[k + 1].first) after = ops[k + 1].second;
  }
  ASSERT_NE(expansion_tiles, 0) << "no op of 16 input channels";
  EXPECT_EQ(expansion_tiles, after) << "the expansion runs in a stage before the depthwise layer's";
  // (The first stage's stem: its first three ops, by band height.)
  EXPECT_EQ(expansion_tiles, ops.front().second | ops[1].second | ops[2].second)
      << "(the first stage on 16 tiles, the expansion's stage on 14, before the re-cut)";
}

// v2's 7 x 7 x 960 pairs of a 1x1 layer and its depthwise layer, both split by output groups (15
// slices), ran on tiles that differ in one (1x1 on tiles 0-14 and depthwise on 0-13 and 15, then
// the other way round): each hand-over sent all 15 slices over the ring, 14 of them to their own
// tile. Now the 14 tiles in both write their slices in place and the one slice in between goes
// over the ring (write_in_place, docs/compiler.md "Split pairs in place on their shared tiles;
// the outputs' fills at once"). Since the 960 -> 160 projections run in pixel bands (docs/
// compiler.md "Pixel bands"), the packing puts both pairs on the same 15 tiles, so no slice
// crosses any more. The bytes of this program are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_split_pairs_write_in_place_on_their_shared_tiles(const CompiledV2& v2) {
  // (The 160 -> 960 layers' ops: 40 reduction words; the depthwise layers': 9 taps.)
  const std::vector<testing::HandOver> pairs = testing::hand_overs(v2.instructions, 39, 8);
  ASSERT_EQ(pairs.size(), 3u);
  for (const testing::HandOver& h : pairs)
    EXPECT_LE(h.producers, 1) << "(15 when every slice went over the ring)";
}

// v2's 7 x 7 960 -> 320 and 320 -> 1280 layers run split by output groups in 5 slices of 3 bands;
// in row bands of 2, 2 and 3 rows the third band's tiles computed 21 positions while the others
// computed 14; in pixel bands (pixel_bands, docs/compiler.md "Pixel bands") each slice's 49 pixels
// go 16, 16 and 17. The bytes of this program (every logit equal to the twin's) are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_7x7_pointwise_layers_run_in_pixel_bands(const CompiledV2& v2) {
  // (Positions per op and the tiles running it, of the ops reading 320 channels (80 reduction
  // words: only the 320 -> 1280 layer) and 960 (240: the 960 -> 160 and 960 -> 320 layers); a
  // K-chunked op's loops are (window, positions, chunks, groups).)
  std::map<int, int> tiles_320;
  int most_960 = 0, off_rows_960 = 0;
  for (const chip::OpInstr& op : v2.ops) {
    const bool chunked = op.reduce_mask == 0b101;
    const int words =
        static_cast<int>(chunked ? (op.loops[0] + 1) * (op.loops[2] + 1) : op.loops[0] + 1);
    const int positions = static_cast<int>(op.loops[1] + 1);
    if (words == 80) tiles_320[positions] += std::popcount(op.tile_mask);
    if (words != 240) continue;
    most_960 = std::max(most_960, positions);
    off_rows_960 += positions % 7 != 0;
  }
  EXPECT_EQ(tiles_320, (std::map<int, int>{{16, 10}, {17, 5}})) << "(5 slices of 16, 16, 17)";
  EXPECT_LE(most_960, 17) << "(21: 3 rows of the 960 -> 320 layer)";
  EXPECT_GT(off_rows_960, 0) << "no op of the 960-channel layers starts or ends inside a row";
}

// v2's 7 x 7 960 -> 320 and 320 -> 1280 layers take their weights through FIFOs, each slice's rows
// in runs from several owner tiles, a fence on the tile of each run before the next. A fence on a
// tile that computes the layer must come before the layer's ops, and the scalar core waits there
// for every run sent before it: in the trace the tiles idled 4.8 k and 6.3 k cycles before these
// layers. Now each slice takes one long run before any takes a second, and its owners send the
// short runs first and the longest last, after the ops (own_fifo_weights, send_order in
// conv_fifo.cpp; fifo_fenced; docs/compiler.md "Pixel bands"): the ops wait for 45 and 440
// weight rows, not 945 and 1,370. The bytes of this program are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_fifo_layers_wait_only_for_short_runs(const CompiledV2& v2) {
  // (The weight rows of the owners' producers (to ringConsumer1) sent since the last full fence,
  // as they stood at the last fence before each op.)
  int sent = 0, waited = 0, most = 0, layers = 0;
  for (const isa::Instruction& in : v2.instructions) {
    if (in.opcode() == isa::kTensorOp) {
      most = std::max(most, waited);
      layers += waited > 0;
      sent = waited = 0;
    } else if (in.opcode() == isa::kRingProducer && in.value("to_c1") != 0) {
      sent += static_cast<int>(in.value("cnt0")) + 1;
    } else if (in.opcode() == isa::kScalarSync && in.value("tokwait") != 0) {
      if (in.value("tmask") == 0xffff) sent = 0;
      waited = sent;
    }
  }
  EXPECT_EQ(layers, 1) << "(2 before refit_fifo_runs: the 960 -> 320 layer waited for 45 rows)";
  EXPECT_LE(most, 450) << "(1,370 rows when the runs went in the order they were placed)";
}

// A FIFO op starts at its first fill, so a slice whose first run comes after other slices' long
// runs starts late (v2's 7 x 7 slices 1.2 k cycles apart). refit_fifo_runs (conv_fifo.cpp,
// docs/compiler.md "FIFO slices on one computing tile, a window first") sends each slice's first
// window as a run of its own before any longer run: in every such layer the first run to each
// slice is one window (at most 15 rows).
void v2_fifo_slices_start_on_a_window(const CompiledV2& v2) {
  std::map<uint32_t, int> first;  // a slice's tiles -> the rows of its first run
  int layers = 0, windowed = 0;
  for (const isa::Instruction& in : v2.instructions) {
    if (in.opcode() == isa::kTensorOp) {
      if (first.size() > 1) {
        ++layers;
        windowed +=
            std::all_of(first.begin(), first.end(), [](const auto& f) { return f.second <= 15; });
      }
      first.clear();
    } else if (in.opcode() == isa::kRingProducer && in.value("to_c1") != 0) {
      first.emplace(static_cast<uint32_t>(in.value("dest")),
                    static_cast<int>(in.value("cnt0")) + 1);
    }
  }
  EXPECT_GE(layers, 4);
  EXPECT_GE(windowed, 4) << "(none before refit_fifo_runs)";
}

// v2's 960 -> 320 and 320 -> 1280 layers run in the same pixel bands (5 slices of 16, 16 and 17
// pixels), so each receiver needs exactly its sender's pixels: each sender's band goes to the 5
// tiles of its band as one run of bytes (SenderCut::same_pixels), where it went as rows and
// pieces of rows to every band reading the row (40 producers and 14 wideToNarrows between the
// two layers' ops, now 20 and 5; docs/compiler.md "Pixel bands"). The bytes of this program are
// checked by V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_pixel_stages_hand_over_only_their_pixels(const CompiledV2& v2) {
  // (The K-chunked ops' loop0 is the window: 15 rows of the 960-channel input, 10 of the 320.)
  const std::vector<testing::HandOver> found = testing::hand_overs(v2.instructions, 14, 9);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_LE(found.front().receives.size(), 6u) << "(14 when the receivers took whole rows)";
  EXPECT_LE(found.front().producers - found.front().weight_runs, 20) << "(40 before)";
}

// The 16 band tiles of v2's 112 x 112 x 16 projection hand their rows to the 14 tiles of the
// expansion stage, each reading 9 rows: a row two receivers read went to both in one transfer,
// the rows around it to each alone (38 producers, 27 receiver sets); now each receiver's rows of
// a sender go to it in one transfer, the shared row twice (docs/compiler.md "Each receiver's rows
// on their own; pixel bands as one run"). And each of the 15 pixel-band tiles of the 320 -> 1280
// layer sends its pixels to its slice's pool tile as one run: they are one run in the pool's
// gapless image too (35 producers before: a band's partial first and last rows and its whole
// rows apart).
void v2_hand_overs_take_each_receivers_rows_at_once(const CompiledV2& v2) {
  // (loop0: the projection's 8 input words, the expansion's 4; the 320-channel layer's 10-row
  // window, the pool's 49 taps.)
  const std::vector<testing::HandOver> first = testing::hand_overs(v2.instructions, 7, 3);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_LE(first.front().producers, 30) << "(38 before)";
  const std::vector<testing::HandOver> pool = testing::hand_overs(v2.instructions, 9, 48);
  ASSERT_EQ(pool.size(), 1u);
  EXPECT_EQ(pool.front().producers - pool.front().weight_runs, 15) << "(35 before)";
}

// v2's classifier, split over 16 tiles, sends each tile's slice to the host in one transfer: the
// 16 narrowToWides into the tiles' ring rows are one instruction (the same fields on every tile),
// ahead of the 16 outfeeds and producers (output_fills_test.cpp on a small classifier).
void v2_output_fills_its_ring_rows_at_once(const CompiledV2& v2) {
  const testing::OutputSends s = testing::output_sends(v2.instructions);
  EXPECT_EQ(s.outfeeds, 16);
  EXPECT_EQ(s.fills, 1) << "(16 before)";
  EXPECT_TRUE(s.fills_first) << "a narrowToWide after an outfeed";
}

// v2's two 7 x 7 x 160 residual ADDs ran alone on one tile, 1,992 cycles each (an ADD's op takes
// 4 loop steps a word and position, which the placement's price counts as one); spread one row a
// tile over 7 tiles, 312 (spread_adds, docs/compiler.md "ADDs spread one row a tile"). The bytes of
// this program are checked by V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
// (The first ADD's ops are one a tile since it reads its operand in place: the next check.)
void v2_adds_of_the_7x7_blocks_run_one_row_a_tile(const CompiledV2& v2) {
  // (ADD ops: dp_mode 4, loops (2)(2)(words)(positions...); 40 words, 160 channels.)
  int tiles = 0;
  for (const chip::OpInstr& op : v2.ops) {
    if (op.dp_mode != 4 || op.loops[2] != 39) continue;
    tiles += std::popcount(op.tile_mask);
    EXPECT_EQ((op.loops[3] + 1) * (op.loops[4] + 1), 7u) << "not one row of 7 positions a tile";
  }
  EXPECT_EQ(tiles, 14) << "(one tile each before)";
}

// The first 7 x 7 ADD's operand (block 13's output) was sent a second time to the ADD's 7 tiles
// after its all-gather to the 15 tiles of block 14's expansion (2.7 KB of instructions); the ADD's
// tiles are among those 15 and now read it there (operand_in_place, docs/compiler.md "An ADD's
// operand read where it was gathered"): one op a tile, each reading its row of the one whole 7 x 7
// x 160 image, so the lower operand addresses of the 7 ops step by whole rows (7 x 160 bytes).
void v2_first_7x7_add_reads_its_gathered_operand(const CompiledV2& v2) {
  std::vector<int64_t> rows;  // the lower operand address of each one-tile op of the first ADD
  for (const chip::OpInstr& op : v2.ops) {
    if (op.dp_mode != 4 || op.loops[2] != 39) continue;
    if (std::popcount(op.tile_mask) != 1) break;
    rows.push_back(std::min(op.in.base, op.in.base + op.in.strides()[1]));
  }
  ASSERT_EQ(rows.size(), 7u) << "(one op on 7 tiles before)";
  std::sort(rows.begin(), rows.end());
  for (size_t k = 1; k < rows.size(); ++k) EXPECT_EQ(rows[k] - rows[k - 1], 7 * 160) << k;
}

// v2's parts (layers, parts of split layers, hand-overs) ended with two fences that drain every
// tile and reset its counters 0-16, the second also sending the scalar core the token it waits
// for: 102 such pairs; fills that emitted nothing still got their fence, 31 right after the
// scalar core's wait. Each residual ADD built its weight rows with 8 one-word mesh fills (88 in
// all), where each of its 4 values sits at two words 6 apart. Now one fence ends a part, a fence
// follows only fills, and one fill writes both words of a value (docs/compiler.md "One fence a
// part, ADD weights filled in pairs"). The rows' zeros were a fill of all 16 words, then a fence
// before the values (11 in v2); now a fill of only the zero words, no fence (docs/compiler.md
// "Where v2's instruction bytes go after row 61; ADD rows without a fence"). v2's ADD rows are
// cached parameters since (below); the fills remain where an ADD finds no rows (looming's).
bool drains_all(const isa::Instruction& in) {
  return in.opcode() == isa::kTileSync && in.value("tiles") == 0xffff &&
         in.value("counters") == 0x1ffff && in.value("units") == 0x3ff;
}

// An ADD's weight-row fills in a program: one-word fills, paired fills (a value's two words 6
// apart) and paired fills right after a fence.
struct AddRowFills {
  int one_word = 0, paired = 0, fenced_pairs = 0;
};
AddRowFills add_row_fills(const std::vector<isa::Instruction>& instructions) {
  AddRowFills f;
  const isa::Instruction* before = nullptr;
  for (const isa::Instruction& in : instructions) {
    if (isa::is_mesh(in.opcode()) && in.value("fill_en") != 0 && in.value("fill") != 0) {
      const int64_t words = (in.value("i.cnt0") + 1) * (in.value("i.cnt1") + 1);
      f.one_word += words == 1;
      const bool paired = words == 2 && in.value("i.inc0") == 6;
      f.paired += paired;
      f.fenced_pairs += paired && before != nullptr && drains_all(*before);
    }
    before = &in;
  }
  return f;
}

void v2_parts_end_with_one_fence(const CompiledV2& v2) {
  int pairs = 0, after_wait = 0;
  const isa::Instruction* before = nullptr;
  for (const isa::Instruction& in : v2.instructions) {
    if (before != nullptr && drains_all(in) && in.value("signal") == 0) {
      if (before->opcode() == isa::kScalarSync && before->value("tokwait") != 0 &&
          before->value("tmask") == 0xffff)
        ++after_wait;
    }
    if (before != nullptr && drains_all(*before) && before->value("signal") == 0 &&
        drains_all(in) && in.value("signal") != 0)
      ++pairs;
    before = &in;
  }
  EXPECT_EQ(pairs, 0) << "(102 parts ended with two fences)";
  EXPECT_EQ(after_wait, 0) << "(31 fences after the scalar core's wait, nothing to fence)";
  // (v2's ADDs no longer fill their rows: V2AddWeightRowsAreCachedParameters; the fills' form
  // is checked on looming's joined ADD, LoomingsAddFillsItsWeightValuesInPairsWithoutAFence.)
}

// Each residual ADD built its 4 weight rows with every inference: a fill of the zero words, 4
// paired value fills and a narrowToWide (11 builds, 6.7 KB of v2's instructions). Now the rows are
// parameters: the caching program writes each ADD's rows once into wide rows of its own on its
// stage's tiles (cache_add_rows, docs/compiler.md "Residual ADDs' weight rows cached"). Since the
// first stage was re-cut to 14 tiles (docs/compiler.md "Out of the first stage in place; uneven
// stride-2 bands") one tile's FIFO weight runs took two of the 4 rows 6 ADDs on 14 tiles had in
// common; the runs now leave the top 4 rows under the segments free in a chain with ADDs
// (own_fifo_weights) and all 10 are cached again: no paired fill (8 without that).
void v2_add_weight_rows_are_cached_parameters(const CompiledV2& v2) {
  int paired_fills = 0;  // (one fill of a value's two words, 6 apart)
  for (const isa::Instruction& in : v2.instructions)
    paired_fills += isa::is_mesh(in.opcode()) && in.value("fill_en") != 0 &&
                    in.value("fill") != 0 && in.value("i.inc0") == 6 &&
                    (in.value("i.cnt0") + 1) * (in.value("i.cnt1") + 1) == 2;
  EXPECT_EQ(paired_fills, 0) << "(44 paired fills of ADD weight values before caching, 8 after "
                                "the re-cut until the FIFO runs left the top rows free)";
  // The rows as the fills built them: row h + 2o holds (w_o, 0) and (0, w_o) in columns 2h and
  // 2h + 1 (16-bit halves of 32-bit columns), every other byte 0.
  auto word = [&](size_t at) {
    uint32_t v = 0;
    for (int b = 0; b < 4; ++b) v |= uint32_t{v2.cached[at + static_cast<size_t>(b)]} << (8 * b);
    return v;
  };
  auto row_is = [&](size_t at, uint32_t w, int h) {
    for (size_t c = 0; c < 64; ++c) {
      const uint32_t want = c / 2 == static_cast<size_t>(h) ? (c % 2 == 0 ? w : w << 16) : 0;
      if (word(at + 4 * c) != want) return false;
    }
    return true;
  };
  int adds = 0;
  for (size_t at = 0; at + 4 * 256 <= v2.cached.size(); at += 256) {
    const uint32_t w1 = word(at), w2 = word(at + 512);
    if (w1 == 0 || w1 > 0xffff || w2 == 0 || w2 > 0xffff) continue;
    const bool add = row_is(at, w1, 0) && row_is(at + 256, w1, 1) && row_is(at + 512, w2, 0) &&
                     row_is(at + 768, w2, 1);
    // (Past the ADD's rows: its w2 rows and the next ADD's w1 rows look alike.)
    if (add) ++adds, at += 3 * 256;
  }
  EXPECT_EQ(adds, 10) << "(v2 has 10 residual ADDs; 8 were cached after the re-cut)";
}

// A tile handing rows over to itself (its band's rows where the next stage keeps them on the same
// tile) sent them over the ring to itself: a narrowToWide into its ring row, a producer, a
// consumer, then the wideToNarrow (99 such producers in v2). Now such a transfer is copied on the
// tile, a narrowToWide into a FIFO row and the wideToNarrow out of it, which waits on
// NARROW_TO_WIDE (Google's local copy, DeepLab gen2021 words 9438-9445), wherever that takes
// fewer words (copy_locally, conv_hand_over.cpp; docs/compiler.md "Rows a tile hands to itself
// copied on the tile"). The bytes of this program are checked by
// V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_tiles_copy_rows_they_hand_to_themselves(const CompiledV2& v2) {
  int to_itself = 0, copies = 0;
  for (const isa::Instruction& in : v2.instructions) {
    to_itself += in.opcode() == isa::kRingProducer && in.value("to_c1") == 0 &&
                 in.value("dest") == in.value("tiles");
    copies += in.opcode() == isa::kWideToNarrow && in.value("sync.id") == 13;
  }
  EXPECT_LE(to_itself, 20) << "(99 producers sent rows only to their own tile)";
  EXPECT_GE(copies, 5);
}

// A split dense depthwise layer's tap entries go to scalar memory with one producer a run of
// parts held together on a holder tile (pcfg 4 to the scalar core; the output's producers use
// pcfg 20). v2 has no run of free rows that holds a 6-, 9- or 15-part layer's entries, so its 17
// layers took 37 producers; now a run may lie in pieces of equal length at a constant step on
// one tile (a producer's walk of two levels, sdims 3; docs/compiler.md "Held taps in pieces").
// The bytes of this program are checked by V2Gen2020EqualsItsTwinAndPassesGooglesCheck.
void v2_held_taps_go_out_in_pieces(const CompiledV2& v2) {
  int taps = 0, in_pieces = 0;
  for (const isa::Instruction& in : v2.instructions)
    if (in.opcode() == isa::kRingProducer && in.value("dest") == 0x10000 && in.value("pcfg") == 4) {
      ++taps;
      in_pieces += in.value("sdims") == 3;
    }
  EXPECT_LE(taps, 24) << "(37 with each run in one piece)";
  // (21 producers, 9 in pieces, since the image is widened on the chip; 23 and 12 before.)
  EXPECT_GE(in_pieces, 9);
}

// Where an ADD's rows are still built by fills each inference (an ADD that finds no free rows to
// cache them in, or a joined heads' ADD, as looming's x^2 + y^2), they take the form of rows 60
// and 62: a fill of only the zero words, then one fill per weight value writing its two words 6
// apart, with no fence between (docs/compiler.md "One fence a part, ADD weights filled in pairs").
TEST(JoinedHeadsCompiled, LoomingsAddFillsItsWeightValuesInPairsWithoutAFence) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const CompileResult r = compile_model(read_bytes(data / "libredgetpu/looming_64x64_3x3.tflite"));
  ASSERT_EQ(r.edgetpu_subgraphs, 1);
  CompiledV2 looming;
  ASSERT_NO_FATAL_FAILURE(read_v2(r.tflite, looming));
  const AddRowFills fills = add_row_fills(looming.instructions);
  EXPECT_EQ(fills.paired, 4) << "(one ADD: its 4 weight values, each at two words 6 apart)";
  // (Its 4 one-word fills are the MULs' identity row, one byte of the diagonal each.)
  EXPECT_EQ(fills.one_word, 4) << "(8 more: an ADD filled its values one word at a time)";
  EXPECT_EQ(fills.fenced_pairs, 0) << "(the zeros' fill fenced before the values)";
}

// v2's layout: each check under its own trace (the names of the tests they were, which
// docs/compiler.md cites), so a failure names its property.
void expect_v2_layout(const std::vector<uint8_t>& tflite) {
  CompiledV2 v2;
  ASSERT_NO_FATAL_FAILURE(read_v2(tflite, v2));
  const std::pair<const char*, void (*)(const CompiledV2&)> checks[] = {
      {"V2PoolsEachGroupOnTheTilesOfTheLayerBefore",
       v2_pools_each_group_on_the_tiles_of_the_layer_before},
      {"V2ProjectionsTo96AreSplitByOutputGroups", v2_projections_to_96_are_split_by_output_groups},
      {"V2HandOversSplitOnlyTransfersWhoseRestsGather",
       v2_hand_overs_split_only_transfers_whose_rests_gather},
      {"V2ProjectionTo96GivesItsRowsToTheDepthwiseStage",
       v2_projection_to_96_gives_its_rows_to_the_depthwise_stage},
      {"V2FirstStageHandsOverTheImageBeforeTheExpansion",
       v2_first_stage_hands_over_the_image_before_the_expansion},
      {"V2SplitPairsWriteInPlaceOnTheirSharedTiles",
       v2_split_pairs_write_in_place_on_their_shared_tiles},
      {"V2OutputFillsItsRingRowsAtOnce", v2_output_fills_its_ring_rows_at_once},
      {"V2AddsOfThe7x7BlocksRunOneRowATile", v2_adds_of_the_7x7_blocks_run_one_row_a_tile},
      {"V2First7x7AddReadsItsGatheredOperand", v2_first_7x7_add_reads_its_gathered_operand},
      {"V27x7PointwiseLayersRunInPixelBands", v2_7x7_pointwise_layers_run_in_pixel_bands},
      {"V2FifoLayersWaitOnlyForShortRuns", v2_fifo_layers_wait_only_for_short_runs},
      {"V2FifoSlicesStartOnAWindow", v2_fifo_slices_start_on_a_window},
      {"V2PixelStagesHandOverOnlyTheirPixels", v2_pixel_stages_hand_over_only_their_pixels},
      {"V2PartsEndWithOneFence", v2_parts_end_with_one_fence},
      {"V2TilesCopyRowsTheyHandToThemselves", v2_tiles_copy_rows_they_hand_to_themselves},
      {"V2AddWeightRowsAreCachedParameters", v2_add_weight_rows_are_cached_parameters},
      {"V2HandOversTakeEachReceiversRowsAtOnce", v2_hand_overs_take_each_receivers_rows_at_once},
      {"V2HeldTapsGoOutInPieces", v2_held_taps_go_out_in_pieces},
  };
  for (const auto& [property, check] : checks) {
    SCOPED_TRACE(property);
    check(v2);
  }
}

// MobileNet v2 (224): its residual ADDs and 96/144/160-channel layers in the chain's stages;
// cat.bmp once (seconds per inference on the simulator); Google's G006 on our file. Every
// parameter resident (230 KB were streamed before share_tiles packed layers split over 15 tiles
// and the classifier's slices beside the other stages); its layout as expect_v2_layout checks it.
TEST(MobileNetCompiledWhole, V2Gen2020EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_compiled_whole(data, "gen2020/mobilenet_v2_1.0_224_quant.tflite", "G006", {{"SOFTMAX", 1}},
                        true, 0, expect_v2_layout);
}

}  // namespace
}  // namespace tinycoral::compiler
