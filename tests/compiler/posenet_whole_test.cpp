// Acceptance: both PoseNet CPU twins (MobileNet v1 0.75 on 353 x 481, its decoder custom op on the
// CPU) compiled whole by `compile_model` - the trunk and the three heads in one program with three
// outputs, the image as it is (repacked on the chip, no PAD), the first stage in rounds - run
// through the runtime's delegate on the virtual Edge TPU: the decoder's three inputs equal the
// twin's in `edgetpu` rounding in every byte on posenet_test_image.bmp, and Google's keypoint check
// of its own compiled file passes on ours (G017 gen2020, G034 gen2021).
#include <gtest/gtest.h>

#include <bit>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "chip/program.h"
#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "compiler/googles_check_on_ours.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "isa/isa.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/compiled_twin.h"
#include "support/image_as_it_is.h"
#include "support/same_bytes.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

using testing::expect_image_as_it_is;

// `layout`: checks of the compiled file's layout (ctest runs each test in its own process, so they
// run in the test that compiles the model: a whole compile costs seconds, ten times more under the
// sanitizers).
void expect_posenet_whole(const std::filesystem::path& data, const std::string& model,
                          const std::string& google_row,
                          const std::function<void(const std::vector<uint8_t>&)>& layout = {}) {
  SCOPED_TRACE(model);
  const container::Model twin = container::read_tflite_file(data / (model + ".tflite"));
  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.back().status);
  if (layout) layout(r.tflite);
  std::map<std::string, int> cpu;
  for (const LogRow& row : r.rows)
    if (!row.mapped) cpu[row.op] += row.count;
  EXPECT_EQ(cpu, (std::map<std::string, int>{{"PosenetDecoderOp", 1}}));
  {
    // One ring producer per hand-over transfer to tiles: the split depthwise layer's 1,984-byte
    // slice rows (7.75 packets) go to the head bands two rows a transfer, not 7 packets and a rest
    // per row (docs/compiler.md "Hand-over rows that end inside a packet").
    const container::EdgeTpuModel compiled = container::read_edgetpu_model(r.tflite);
    const chip::testing::PackageExecutables exes = chip::testing::executables_of(compiled);
    ASSERT_NE(exes.execution, nullptr);
    int to_tiles = 0;
    for (const isa::Instruction& in : isa::decode(exes.execution->bitstreams.at(0).data))
      to_tiles += in.opcode() == isa::kRingProducer && (in.value("dest") & 0xffff) != 0;
    EXPECT_LT(to_tiles, 640);  // (574; 706 with a transfer per slice row's packets and rest)
  }

  // The decoder's inputs (the custom op's outputs) of both files on the test image.
  const container::Model ours = container::read_tflite(r.tflite);
  expect_image_as_it_is(twin, ours);
  const auto& sg = twin.subgraphs.at(0);
  std::vector<std::string> names;
  for (int t : sg.operators.back().inputs)
    names.push_back(sg.tensors.at(static_cast<size_t>(t)).name);
  host::Interpreter reference =
      testing::edgetpu_reference(chip::testing::twin_with_outputs(twin, names));
  host::InterpreterOptions tpu_options;
  runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(chip::testing::twin_with_outputs(ours, names), tpu_options);
  const auto in = reference.input(0);
  const std::vector<int32_t> shape(in.shape().begin(), in.shape().end());
  const auto bytes =
      host::image_to_input(host::read_image(data / "images" / "posenet_test_image.bmp"), shape,
                           in.type(), host::ResizeMode::kBilinearLegacy, {});
  reference.set_input(0, bytes);
  reference.invoke();
  tpu.set_input(0, bytes);
  tpu.invoke();
  for (size_t o = 0; o < names.size(); ++o) {
    EXPECT_TRUE(testing::same_bytes(tpu.output_bytes(o), reference.output_bytes(o))) << names[o];
  }

  testing::expect_googles_check_passes(data, google_row, r.tflite, tpu_options);
}

// Under the sanitizers only gen2020's PoseNet is compiled and run (about 22 s each there): the
// same compiler and chip code on both but for the per-channel scales, which gen2021's MobileNet
// v1 0.25 and DeepLab backbone compiled whole cover there.
#ifndef TINYCORAL_ASAN
TEST(PoseNetCompiledWhole, Gen2021EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_posenet_whole(data, "gen2021/posenet_mobilenet_v1_075_353_481_16_quant_decoder", "G034");
}
#endif

// gen2020 PoseNet compiled whole: its execution program and its ops (the simulator's), in program
// order, for the checks of its layout below (`execution` points into `model`).
struct Compiled {
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;

  container::EdgeTpuModel model;
  const container::Executable* execution = nullptr;
  std::vector<chip::OpInstr> ops;
};
void read_compiled(const std::vector<uint8_t>& tflite, Compiled& compiled) {
  compiled.model = container::read_edgetpu_model(tflite);
  const chip::testing::PackageExecutables exes = chip::testing::executables_of(compiled.model);
  ASSERT_NE(exes.execution, nullptr);
  compiled.execution = exes.execution;
  compiled.ops = testing::execution_ops(*exes.execution);
}

// The 89 x 121 48 -> 96 pointwise layer runs as a stage of its own (cut_stages, docs/compiler.md
// "Stages cut where rounds recompute halos"): in one stage with the 3x3 depthwise layer after it,
// in three rounds, each tile computed 4 rows a round for the 2 it kept (21,417 positions for the
// map's 10,769). Now every position of each of its two output groups is computed once (since the
// round images may lie over the stage before's output, the layer is split by those groups over
// tiles, docs/compiler.md "Round images over the output of the stage before"). Checked on
// Gen2020EqualsItsTwinAndPassesGooglesCheck's compiled file.
void pointwise_before_the_depthwise_computes_no_halo_rows(const Compiled& compiled) {
  SCOPED_TRACE("PointwiseBeforeTheDepthwiseComputesNoHaloRows");
  // (The ops of 12 reduction words, 48 input channels, computing 64 or 32 columns of its output
  // groups - the first layer's ops also take 12 words, for 2-pixel blocks of 24 channels, 48
  // columns; loops count - 1.)
  int64_t positions = 0;
  for (const chip::OpInstr& op : compiled.ops)
    if (op.loops[0] == 11 && op.out_ch + 1 != 48)
      positions += int64_t{op.loops[1] + 1} * (op.loops[2] + 1) * std::popcount(op.tile_mask);
  EXPECT_EQ(positions, 2 * 89 * 121);
}

// The 89 x 121 3x3 depthwise layer over 96 channels and the 96 -> 96 pointwise layer after it run
// as one stage, in rounds (merge_stages, docs/compiler.md "Row-band stages merged where the image
// between them is large"): the 1 MB map between them stays on its tiles instead of going over the
// ring. Before, the depthwise layer was a stage of its own and 15 ring producers to tiles handed
// its output over. (Ops in program order, loops count - 1: the first layer and the 48 -> 96 layer
// take 12 reduction words, the depthwise layers 9 taps, the 96 -> 96 layer first of those of 24
// words.) Its bytes are checked by Gen2020EqualsItsTwinAndPassesGooglesCheck.
void depthwise_and_pointwise_of_the_large_maps_share_a_stage(const Compiled& compiled) {
  SCOPED_TRACE("DepthwiseAndPointwiseOfTheLargeMapsShareAStage");
  const std::vector<isa::Instruction> program =
      isa::decode(compiled.execution->bitstreams.at(0).data);
  auto loop0 = [&](size_t k, int64_t n) {
    return program[k].opcode() == isa::kTensorOp && program[k].value("loop0") == n;
  };
  size_t pointwise = 0;
  while (pointwise < program.size() && !loop0(pointwise, 23)) ++pointwise;
  ASSERT_LT(pointwise, program.size()) << "no op of 24 reduction words";
  size_t depthwise = pointwise;
  while (depthwise > 0 && !loop0(depthwise - 1, 11)) --depthwise;
  while (depthwise < pointwise && !loop0(depthwise, 8)) ++depthwise;
  ASSERT_LT(depthwise, pointwise) << "no depthwise op between the 48 -> 96 and 96 -> 96 layers";
  int producers = 0;  // to tiles (the depthwise weights go to the scalar core's memory)
  for (size_t k = depthwise; k < pointwise; ++k)
    producers +=
        program[k].opcode() == isa::kRingProducer && (program[k].value("dest") & 0xffff) != 0;
  EXPECT_EQ(producers, 0);
}

// The heatmaps (17 channels) and offsets (34) share one group of weight rows (their ops compute
// 20 and 56 columns of it) and the heads are split by group over tiles, so that each heads tile
// keeps 99 rows instead of 297; with the rows that frees one of the last three 23 x 31 384 -> 384
// layers runs in 3 slices of 5 bands instead of 6 slices of 2 (split_heads, docs/compiler.md
// "PoseNet's heads share a group, split by it over tiles"). Before: no op of 56 columns, every
// heads tile computing all three heads, three such layers in one-group slices (36 tile ops).
// Its bytes are checked by Gen2020EqualsItsTwinAndPassesGooglesCheck (gen2021's layout is the
// same, its displacements the first group).
void heads_share_a_group_and_give_their_rows_to_the_trunk(const Compiled& compiled) {
  SCOPED_TRACE("HeadsShareAGroupAndGiveTheirRowsToTheTrunk");
  // (The ops of 96 reduction words, 384 input channels, in program order: the trunk's 384 -> 384
  // layers, then the heads - the heatmaps' and offsets' group, then the displacements'; loops
  // count - 1, out_ch columns - 1.)
  std::vector<chip::OpInstr> ops;
  for (const chip::OpInstr& op : compiled.ops)
    if (op.loops[0] == 95) ops.push_back(op);
  size_t heads = 0;
  while (heads < ops.size() && ops[heads].out_ch + 1 != 56 && ops[heads].out_ch + 1 != 20) ++heads;
  ASSERT_LT(heads, ops.size()) << "no heads op of 20 or 56 columns";
  uint32_t shared = 0, displacements = 0;
  for (size_t k = heads; k < ops.size(); ++k)
    (ops[k].out_ch + 1 == 64 ? displacements : shared) |= ops[k].tile_mask;
  EXPECT_NE(shared, 0u);
  EXPECT_NE(displacements, 0u);
  EXPECT_EQ(shared & displacements, 0u) << "a tile computes both groups of the heads";
  int one_group = 0;  // tile ops of the trunk's 384 -> 384 layers in slices of one group
  for (size_t k = 0; k < heads; ++k)
    if (ops[k].loops[2] == 0) one_group += std::popcount(ops[k].tile_mask);
  EXPECT_LE(one_group, 24);
}

// With the checks of its layout above, each under its own trace.
TEST(PoseNetCompiledWhole, Gen2020EqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_posenet_whole(data, "gen2020/posenet_mobilenet_v1_075_353_481_quant_decoder", "G017",
                       [](const std::vector<uint8_t>& tflite) {
                         Compiled compiled;
                         ASSERT_NO_FATAL_FAILURE(read_compiled(tflite, compiled));
                         pointwise_before_the_depthwise_computes_no_halo_rows(compiled);
                         depthwise_and_pointwise_of_the_large_maps_share_a_stage(compiled);
                         heads_share_a_group_and_give_their_rows_to_the_trunk(compiled);
                       });
}

}  // namespace
}  // namespace tinycoral::compiler
