// `tinycoral run --device cpu` end to end: Google's classification expectations on the CPU twins of
// the gen2020 models (expected/classification_test_cases.csv, 2020 legacy preprocessing), the
// output formats, and one-line errors with exit code 2 for bad input.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/file.h"
#include "support/testdata.h"

namespace tinycoral::host {
namespace {

using tinycoral::testing::run_cli;

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, sep)) out.push_back(part);
  return out;
}

TEST(HostCliRun, GoogleClassificationCasesOnCpuTwins) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::ifstream csv(data / "expected" / "classification_test_cases.csv");
  ASSERT_TRUE(csv.good());
  std::string line;
  std::getline(csv, line);  // header
  std::set<std::string> done;
  int checked = 0;
  while (std::getline(csv, line)) {
    const auto f = split(line, ',');
    if (f.size() < 8) continue;
    std::string model = f[0];
    const auto pos = model.find("_edgetpu");
    if (pos != std::string::npos) model.erase(pos, 8);
    const auto path = data / "gen2020" / model;
    if (!std::filesystem::exists(path) || !done.insert(model + f[1]).second) continue;
    const auto means = split(f[3], ':');
    std::string cmd = "run '" + path.string() + "' --image '" + (data / "images" / f[1]).string() +
                      "' --device cpu --resize bilinear-legacy --top " + f[6];
    if (f[2] != "1.0" || means[0] != "0") cmd += " --normalize " + f[2] + "," + means[0];
    const auto r = run_cli(cmd);
    ASSERT_EQ(r.exit_code, 0) << cmd << "\n" << r.err;
    const float threshold = std::stof(f[5]);
    bool found = false;
    for (const auto& out : split(r.out, '\n')) {
      std::istringstream ls(out);
      int index = -1;
      float score = 0;
      ls >> index >> score;
      if (index == std::stoi(f[7]) && score >= threshold) found = true;
    }
    EXPECT_TRUE(found) << model << " on " << f[1] << ": label " << f[7] << " with score >= " << f[5]
                       << " not in\n"
                       << r.out;
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(HostCliRun, OutputFileJsonAndLabels) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model = data / "gen2020" / "mobilenet_v1_0.25_128_quant.tflite";
  const auto out = std::filesystem::temp_directory_path() / "tinycoral_host_cli_out.bin";
  const auto r =
      run_cli("run '" + model.string() + "' --image '" + (data / "images" / "cat.bmp").string() +
              "' --resize bilinear-legacy --top 2 --json --labels '" +
              (data / "labels" / "imagenet_labels.txt").string() + "' --output-file '" +
              out.string() + "'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["device"], "cpu");
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["values"].size(), 1001u);
  EXPECT_EQ(j["outputs"][0]["dtype"], "uint8");
  ASSERT_EQ(j["top"].size(), 2u);
  EXPECT_EQ(j["top"][0]["index"], 283);
  EXPECT_EQ(j["top"][0]["label"], "tiger cat");
  const auto bytes = read_file(out);
  ASSERT_EQ(bytes.size(), 1001u);
  EXPECT_FLOAT_EQ(bytes[283] / 256.0f, j["top"][0]["score"].get<float>());
  std::filesystem::remove(out);
}

TEST(HostCliRun, BadInputIsOneLineAndExitCode2) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto cpu = data / "gen2020" / "mobilenet_v1_0.25_128_quant.tflite";
  const auto tpu = data / "gen2020" / "mobilenet_v1_0.25_128_quant_edgetpu.tflite";
  const auto cat = data / "images" / "cat.bmp";
  const auto tmp = std::filesystem::temp_directory_path();
  write_file(tmp / "tinycoral_short.raw", std::vector<uint8_t>(10, 0));
  write_file(tmp / "tinycoral_corrupt.tflite", std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
  write_file(tmp / "tinycoral_bad.png", std::vector<uint8_t>{0x89, 'P', 'N', 'G', 0, 0});
  const std::vector<std::string> cmds = {
      "run '" + tpu.string() + "' --image '" + cat.string() + "' --device cpu",
      "run '" + cpu.string() + "' --input '" + (tmp / "tinycoral_short.raw").string() + "'",
      "run '" + (tmp / "tinycoral_corrupt.tflite").string() + "' --image '" + cat.string() + "'",
      "run '" + cpu.string() + "' --image '" + (tmp / "tinycoral_bad.png").string() + "'",
      "run '" + cpu.string() + "' --image '" + cat.string() + "' --resize none",
      "run '" + cpu.string() + "' --image '" + cat.string() + "' --rounding fast",
      "run '" + cpu.string() + "' --image /nonexistent.bmp",
  };
  for (const auto& c : cmds) {
    const auto r = run_cli(c);
    EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c << "\n" << r.err;
  }
  EXPECT_NE(run_cli(cmds[0]).err.find("edgetpu-custom-op"), std::string::npos);
  for (const char* f : {"tinycoral_short.raw", "tinycoral_corrupt.tflite", "tinycoral_bad.png"})
    std::filesystem::remove(tmp / f);
}

TEST(HostCliRun, RawInputAndEdgeTpuRounding) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const auto model = data / "gen2020" / "mobilenet_v1_0.25_128_quant.tflite";
  const auto raw = std::filesystem::temp_directory_path() / "tinycoral_host_input.raw";
  std::vector<uint8_t> bytes(128 * 128 * 3);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 % 251);
  write_file(raw, bytes);
  const auto a = run_cli("run '" + model.string() + "' --input '" + raw.string() + "' --top 5");
  const auto b = run_cli("run '" + model.string() + "' --input '" + raw.string() +
                         "' --top 5 --rounding edgetpu");
  EXPECT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(b.exit_code, 0) << b.err;
  EXPECT_EQ(split(a.out, '\n').size(), 5u);
  EXPECT_EQ(split(b.out, '\n').size(), 5u);
  std::filesystem::remove(raw);
}

}  // namespace
}  // namespace tinycoral::host
