// `tinycoral compile` and `tinycoral compare` end to end: outputs and logs in edgetpu_compiler's
// format, models that cannot be mapped, malformed models (exit 2), and the comparison verdicts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/file.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "support/testdata.h"

namespace tinycoral::compiler {
namespace {

namespace fs = std::filesystem;
using testing::run_cli;

fs::path scratch(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("tinycoral_compile_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(CliCompile, DenseTwinCompilesAndComparesIdenticalToGoogle) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path out = scratch("dense");
  const fs::path model = dir / "libredgetpu" / "dense_256.tflite";
  const auto r = run_cli("compile " + model.string() + " -o " + out.string() + " -s");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("FULLY_CONNECTED                1          Mapped to Edge TPU"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("QUANTIZE                       2          Mapped to Edge TPU"),
            std::string::npos)
      << r.out;
  const std::string log = slurp(out / "dense_256_edgetpu.log");
  EXPECT_NE(log.find("Operator                       Count      Status"), std::string::npos) << log;
  const fs::path ours = out / "dense_256_edgetpu.tflite";
  const auto model_read = container::read_edgetpu_model_file(ours);
  EXPECT_EQ(model_read.edgetpu_ops.size(), 1u);

  const auto same = run_cli("compare " + ours.string() + " " +
                            (dir / "libredgetpu" / "dense_256_edgetpu.tflite").string());
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
  EXPECT_NE(same.out.find("identical\n"), std::string::npos) << same.out;
  const auto other = run_cli("compare " + ours.string() + " " +
                             (dir / "libredgetpu" / "dense_512_edgetpu.tflite").string());
  EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
  EXPECT_NE(other.out.find("first difference at instruction"), std::string::npos) << other.out;
  EXPECT_NE(other.out.find("parameters: 67584 vs 266240 bytes"), std::string::npos) << other.out;
}

// A whole MobileNet from the command line: the table says what mapped, and the result classifies
// cat.bmp on the virtual Edge TPU as Google's expectation says (283, tiger cat).
TEST(CliCompile, MobileNetCompilesWholeAndClassifiesOnTheVirtualEdgeTpu) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path out = scratch("mobilenet");
  const fs::path model = dir / "gen2020" / "mobilenet_v1_0.25_128_quant.tflite";
  const auto r = run_cli("compile " + model.string() + " -o " + out.string() + " -s");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* row : {"CONV_2D                        15         Mapped to Edge TPU",
                          "DEPTHWISE_CONV_2D              13         Mapped to Edge TPU",
                          "AVERAGE_POOL_2D                1          Mapped to Edge TPU",
                          "RESHAPE                        1          Mapped to Edge TPU",
                          "SOFTMAX                        1          tinycoral runs this SOFTMAX "
                          "on the CPU"})
    EXPECT_NE(r.out.find(row), std::string::npos) << row << "\n" << r.out;
  EXPECT_NE(r.out.find("Number of Edge TPU subgraphs: 1"), std::string::npos) << r.out;
  const fs::path ours = out / "mobilenet_v1_0.25_128_quant_edgetpu.tflite";
  const auto run = run_cli("run " + ours.string() + " --image " +
                           (dir / "images" / "cat.bmp").string() + " --device sim --top 1");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.substr(0, 4), "283 ") << run.out;
}

// Looming with its first head also a graph output (the joins need it kept on the chip): refused,
// so the output is the model as it was, with the reason in the log.
TEST(CliCompile, UnmappableModelStillGetsAnOutputAndALogSayingWhy) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path out = scratch("cpu");
  container::Model twin =
      container::read_tflite_file(dir / "libredgetpu" / "looming_64x64_3x3.tflite");
  container::Subgraph& g = twin.subgraphs.at(0);
  int head = -1;
  for (const container::Operator& op : g.operators)
    if (head < 0 && twin.operator_codes.at(op.opcode_index).builtin_code ==
                        static_cast<int32_t>(container::BuiltinOp::kConv2D))
      head = op.outputs.at(0);
  ASSERT_GE(head, 0);
  g.outputs.push_back(head);
  const fs::path model = out / "looming_head_out.tflite";
  write_file(model, container::write_tflite(twin));
  const auto r = run_cli("compile " + model.string() + " -o " + out.string() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"edgetpu_subgraphs\": 0"), std::string::npos) << r.out;
  const auto written = container::read_edgetpu_model_file(out / "looming_head_out_edgetpu.tflite");
  EXPECT_TRUE(written.edgetpu_ops.empty());
  EXPECT_EQ(written.model.subgraphs.at(0).operators.size(), g.operators.size());
  const std::string log = slurp(out / "looming_head_out_edgetpu.log");
  EXPECT_NE(log.find("a joined fan-out head that is also a graph output"), std::string::npos)
      << log;
}

// libredgetpu's colour filter (QUANTIZE, CONV_2D, RESHAPE, SOFTMAX, two FULLY_CONNECTED, concat)
// maps whole: one program of the conv chain and the softmax (its reasons when refused are
// ColourTrackersOnTheVirtualEdgeTpu's; before, the single-FULLY_CONNECTED generator's "no code
// generator for CONV_2D yet" was logged, which sent a reader after the wrong layer).
TEST(CliCompile, ColourFilterMapsWhole) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path out = scratch("colour");
  const fs::path model = dir / "libredgetpu" / "color_red_64x64.tflite";
  const auto r = run_cli("compile " + model.string() + " -o " + out.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(out / "color_red_64x64_edgetpu.tflite"));
  const std::string log = slurp(out / "color_red_64x64_edgetpu.log");
  for (const char* op :
       {"QUANTIZE", "CONV_2D", "RESHAPE", "SOFTMAX", "FULLY_CONNECTED", "CONCATENATION"}) {
    const size_t at = log.find(std::string("\n") + op + " ");
    ASSERT_NE(at, std::string::npos) << op << "\n" << log;
    const std::string row = log.substr(at + 1, log.find('\n', at + 1) - at - 1);
    EXPECT_NE(row.find("Mapped to Edge TPU"), std::string::npos) << row;
  }
}

TEST(CliCompile, EdgetpuCompilersOtherFlagsAreAcceptedWithAWarning) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  const fs::path out = scratch("flags");
  const fs::path model = dir / "libredgetpu" / "dense_512.tflite";
  const auto r =
      run_cli("compile -m 13 -a -t 180 -s --out_dir " + out.string() + " " + model.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("-a is not supported yet"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(out / "dense_512_edgetpu.tflite"));
  EXPECT_TRUE(fs::exists(out / "dense_512_edgetpu.log"));
}

TEST(CliCompile, MalformedModelIsExitCodeTwoWithOneLine) {
  const fs::path out = scratch("bad");
  const fs::path bad = out / "bad.tflite";
  const std::vector<uint8_t> junk = {1, 2, 3, 4, 'T', 'F', 'L', '3', 9, 9, 9, 9};
  write_file(bad, junk);
  const auto r = run_cli("compile " + bad.string() + " -o " + out.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.tflite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out / "bad_edgetpu.tflite"));
}

}  // namespace
}  // namespace tinycoral::compiler
