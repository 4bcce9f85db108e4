// Acceptance: both DeepLab v3 CPU twins (MobileNet v2 0.5 on 513 x 513, output stride 16: three
// depthwise layers dilated by 2) compiled by `compile_model` - the backbone (34 CONV_2D, 17
// DEPTHWISE_CONV_2D, 10 residual ADDs) in one program, its image as it is (no PAD), the ASPP
// branches after it (image pooling, the 1x1 branch) on the CPU - run through the runtime's delegate
// on the virtual Edge TPU: the program's output and the label map equal the twin's in `edgetpu`
// rounding in every byte on bird_segmentation.bmp, and Google's segmentation check of its own
// compiled file passes on ours (G014 gen2020, G023 gen2021).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "compiler/googles_check_on_ours.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/image.h"
#include "host/interpreter.h"
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

void expect_deeplab_whole(const std::filesystem::path& data, const std::string& model,
                          const std::string& google_row, int cpu_quantizes) {
  SCOPED_TRACE(model);
  const container::Model twin = container::read_tflite_file(data / (model + ".tflite"));
  // (The atrous layers the chain must generate: DeepLab's reason to exist.)
  int dilated = 0;
  for (const container::Operator& op : twin.subgraphs.at(0).operators)
    if (const auto* o = std::get_if<container::DepthwiseConv2DOptions>(&op.options))
      if (o->dilation_h > 1 || o->dilation_w > 1) {
        ++dilated;
        EXPECT_EQ(o->dilation_h, 2);
        EXPECT_EQ(o->dilation_w, 2);
      }
  EXPECT_EQ(dilated, 3);

  const CompileResult r = compile_model(container::write_tflite(twin));
  ASSERT_EQ(r.edgetpu_subgraphs, 1) << (r.rows.empty() ? "" : r.rows.back().status);
  std::map<std::string, int> mapped, cpu;
  for (const LogRow& row : r.rows) (row.mapped ? mapped : cpu)[row.op] += row.count;
  EXPECT_EQ(mapped,
            (std::map<std::string, int>{{"ADD", 10}, {"CONV_2D", 34}, {"DEPTHWISE_CONV_2D", 17}}));
  std::map<std::string, int> want_cpu{{"ARG_MAX", 1},         {"AVERAGE_POOL_2D", 1},
                                      {"CONCATENATION", 1},   {"CONV_2D", 4},
                                      {"RESIZE_BILINEAR", 3}, {"QUANTIZE", cpu_quantizes}};
  if (cpu_quantizes == 0) want_cpu.erase("QUANTIZE");
  EXPECT_EQ(cpu, want_cpu);
  expect_image_as_it_is(twin, container::read_tflite(r.tflite));

  // The program's output (the backbone's last image) and the labels, on Google's test image.
  const container::EdgeTpuModel compiled = container::read_edgetpu_model(r.tflite);
  const chip::testing::PackageExecutables exes = chip::testing::executables_of(compiled);
  ASSERT_NE(exes.execution, nullptr);
  std::vector<std::string> names = chip::testing::output_layer_names(*exes.execution);
  ASSERT_EQ(names.size(), 1u);
  const auto& sg = twin.subgraphs.at(0);
  names.push_back(sg.tensors.at(static_cast<size_t>(sg.outputs.at(0))).name);  // ArgMax
  host::Interpreter reference =
      testing::edgetpu_reference(chip::testing::twin_with_outputs(twin, names));
  host::InterpreterOptions tpu_options;
  tpu_options.rounding = host::Rounding::kEdgeTpu;  // (the CPU part's, as the reference's)
  runtime::add_edgetpu_delegate(tpu_options.delegates, runtime::open_virtual_edgetpu());
  host::Interpreter tpu(chip::testing::twin_with_outputs(container::read_tflite(r.tflite), names),
                        tpu_options);
  const auto in = reference.input(0);
  const std::vector<int32_t> shape(in.shape().begin(), in.shape().end());
  const auto bytes =
      host::image_to_input(host::read_image(data / "images" / "bird_segmentation.bmp"), shape,
                           in.type(), host::ResizeMode::kBilinear, {});
  reference.set_input(0, bytes);
  reference.invoke();
  tpu.set_input(0, bytes);
  tpu.invoke();
  for (size_t o = 0; o < names.size(); ++o)
    EXPECT_TRUE(testing::same_bytes(tpu.output_bytes(o), reference.output_bytes(o))) << names[o];

  testing::expect_googles_check_passes(data, google_row, r.tflite, tpu_options);
}

// Under the sanitizers only gen2021's (per-channel) backbone is compiled and run: each is a
// compile and an inference of about 45 s there, the same code on both sides of the chip but for
// the per-tensor scales, which gen2020's MobileNets compiled whole cover there.
#ifndef TINYCORAL_ASAN
TEST(DeepLabCompiledWhole, Gen2020BackboneEqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_deeplab_whole(data, "gen2020/deeplabv3_mnv2_dm05_pascal_quant", "G014", 0);
}
#endif

TEST(DeepLabCompiledWhole, Gen2021BackboneEqualsItsTwinAndPassesGooglesCheck) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  expect_deeplab_whole(data, "gen2021/deeplabv3_mnv2_dm05_pascal_quant", "G023", 1);
}

}  // namespace
}  // namespace tinycoral::compiler
