// `tinycoral run` on the Edge TPU devices: --device auto picks the virtual stick when no stick is
// plugged in (and the CPU for a model with nothing for the Edge TPU), --trace writes what the
// virtual Edge TPU executed, and --json carries the simulator's statistics and the modeled stick
// time.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

using tinycoral::testing::run_cli;

std::string quoted(const std::filesystem::path& p) { return "'" + p.string() + "'"; }

TEST(CliRunDevice, SimTracesEveryUnitAndReportsStatistics) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model = data / "gen2020/mobilenet_v1_0.25_128_quant_edgetpu.tflite";
  const std::string trace = ::testing::TempDir() + "tinycoral_trace.txt";
  const auto r = run_cli("run " + quoted(model) + " --image " + quoted(data / "images/cat.bmp") +
                         " --device sim --top 1 --json --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"], "sim");
  EXPECT_EQ(j["top"][0]["index"], 283);  // tiger cat, as the CPU twin says
  const auto& sim = j["simulator"];
  // MobileNet v1 0.25/128 does about 14 million multiply-accumulates; the chip pads channels.
  EXPECT_GT(sim["macs"].get<uint64_t>(), 14'000'000u);
  EXPECT_GT(sim["instructions"]["op"].get<uint64_t>(), 0u);
  EXPECT_EQ(sim["programs_completed"], 2);  // parameter caching, then the inference

  // The modeled stick time: its parts add up at each clock, the compute halves at 500 MHz, and the
  // link carries what the runtime sent (the inference's instructions and the 49152-byte image).
  const auto& t = j["modeled_stick_ms"];
  const double link = t["usb_host_to_device"].get<double>() +
                      t["usb_device_to_host"].get<double>() + t["per_run"].get<double>();
  EXPECT_DOUBLE_EQ(t["250MHz"].get<double>(), t["compute_250MHz"].get<double>() + link);
  EXPECT_DOUBLE_EQ(t["500MHz"].get<double>(), t["compute_500MHz"].get<double>() + link);
  EXPECT_DOUBLE_EQ(t["compute_250MHz"].get<double>(), 2 * t["compute_500MHz"].get<double>());
  EXPECT_DOUBLE_EQ(t["compute_250MHz"].get<double>(), t["cycles"].get<double>() / 250e3);
  EXPECT_GT(t["bytes_host_to_device"].get<uint64_t>(), 49152u + 45712u);  // image + bitstream
  EXPECT_GE(t["bytes_device_to_host"].get<uint64_t>(), 1001u);
  EXPECT_GT(t["busy_cycles"]["mac"].get<uint64_t>(), 0u);
  EXPECT_GT(t["parameter_caching"]["bytes_host_to_device"].get<uint64_t>(), 518656u);

  std::ifstream in(trace);
  ASSERT_TRUE(in.good());
  std::string line;
  uint64_t lines = 0, op_lines = 0, short_ops = 0, last_program = 0, last_finish = 0;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    ++lines;
    std::istringstream fields(line);
    uint64_t program = 0, word = 0, start = 0, finish = 0;
    std::string mnemonic, tile, unit;
    ASSERT_TRUE(fields >> program >> word >> mnemonic >> tile >> unit >> start >> finish) << line;
    if (unit == "op") {
      ++op_lines;
      if (finish < start + 32) ++short_ops;  // an op costs at least its 32 start cycles
    }
    if (program != last_program) last_finish = 0;
    last_program = program;
    last_finish = std::max(last_finish, finish);
  }
  EXPECT_EQ(op_lines, sim["instructions"]["op"].get<uint64_t>());
  EXPECT_EQ(short_ops, 0u);
  EXPECT_GT(lines, 1000u);
  // The inference's records end where the clock says the inference ends.
  EXPECT_LE(last_finish, t["cycles"].get<uint64_t>());
  EXPECT_GT(last_finish, t["cycles"].get<uint64_t>() * 9 / 10);
}

TEST(CliRunDevice, AutoRunsAPlainModelOnTheCpuAndOnlyTracesTheVirtualChip) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model = data / "gen2020/mobilenet_v1_0.25_128_quant.tflite";
  const auto image = data / "images/cat.bmp";
  const auto r = run_cli("run " + quoted(model) + " --image " + quoted(image) + " --top 1 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["device"], "cpu");
  const auto bad = run_cli("run " + quoted(model) + " --image " + quoted(image) +
                           " --device cpu --trace /tmp/tinycoral_never_written");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--trace needs the virtual Edge TPU"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace tinycoral::runtime
