// `tinycoral inspect --json` against the stand-alone Python inspector (../shared/tools/
// edgetpu_inspect.py), field by field, on split_concat and the MobileNet files; and the CLI's
// behaviour on bad input (one line, exit code 2).
#include <gtest/gtest.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support/testdata.h"

namespace tinycoral {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// Skips (with the reason) unless python3, the Python tool and the built CLI are all there.
std::optional<fs::path> python_tool(const fs::path& testdata, std::string* why) {
  const fs::path tool = testdata.parent_path() / "tools" / "edgetpu_inspect.py";
  if (!fs::exists(tool)) {
    *why = "edgetpu_inspect.py not found at " + tool.string();
    return std::nullopt;
  }
  if (std::system("python3 --version >/dev/null 2>&1") != 0) {
    *why = "python3 is not installed";
    return std::nullopt;
  }
  if (!fs::exists(testing::cli_path())) {
    *why = "the tinycoral CLI is not built (build the whole project first)";
    return std::nullopt;
  }
  return tool;
}

// Runs a shell command and returns its stdout.
std::string run_shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

json python_report(const fs::path& tool, const fs::path& model) {
  return json::parse(run_shell("python3 '" + tool.string() + "' --json '" + model.string() + "'"))
      .at(0);
}

json our_report(const fs::path& model) {
  const auto r = testing::run_cli("inspect --json '" + model.string() + "'");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

void expect_tensors_match(const json& ours_subgraph, const json& ours_ids, const json& theirs) {
  ASSERT_EQ(ours_ids.size(), theirs.size());
  for (size_t i = 0; i < theirs.size(); ++i) {
    const json& t = ours_subgraph["tensors"][ours_ids[i].get<size_t>()];
    EXPECT_EQ(t["name"], theirs[i][0]);
    EXPECT_EQ(t["shape"], theirs[i][1]);
    EXPECT_EQ(upper(t["type"].get<std::string>()), theirs[i][2]);
  }
}

void expect_layers_match(const json& ours, const json& theirs) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE(theirs[i]["name"].get<std::string>());
    EXPECT_EQ(ours[i]["name"], theirs[i]["name"]);
    EXPECT_EQ(ours[i]["size_bytes"], theirs[i]["size_bytes"]);
    EXPECT_EQ(ours[i]["y"], theirs[i]["y"]);
    EXPECT_EQ(ours[i]["x"], theirs[i]["x"]);
    EXPECT_EQ(ours[i]["z"], theirs[i]["z"]);
    EXPECT_EQ(ours[i]["zero_point"], theirs[i]["zero_point"]);
    EXPECT_FLOAT_EQ(ours[i]["dequantization_factor"].get<float>(),
                    theirs[i]["dequant"].get<float>());
    EXPECT_EQ(ours[i]["data_type"], theirs[i]["data_type"]);
    EXPECT_EQ(ours[i]["execution_count"], theirs[i]["exec_count"]);
  }
}

void expect_hints_match(const json& ours, const json& theirs) {
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) {
    SCOPED_TRACE("hint " + std::to_string(i));
    EXPECT_EQ(ours[i]["kind"], theirs[i]["kind"]);
    EXPECT_EQ(ours[i]["direction"], theirs[i]["direction"]);
    if (theirs[i]["kind"] == "dma") {
      EXPECT_EQ(ours[i]["offset"], theirs[i]["offset"]);
      EXPECT_EQ(ours[i]["size"], theirs[i]["size"]);
      EXPECT_EQ(ours[i]["meta"]["desc"], theirs[i]["meta"]["desc"]);
      EXPECT_EQ(ours[i]["meta"]["name"], theirs[i]["meta"]["name"]);
    } else if (theirs[i]["kind"] == "instr") {
      EXPECT_EQ(ours[i]["chunk"], theirs[i]["chunk"]);
    } else if (theirs[i]["kind"] == "interrupt") {
      EXPECT_EQ(ours[i]["interrupt"], theirs[i]["interrupt"]);
    }
  }
}

// Compares everything both inspectors report; returns our report for further checks.
json compare_with_python(const fs::path& tool, const fs::path& model) {
  SCOPED_TRACE(model.string());
  const json theirs = python_report(tool, model);
  const json ours = our_report(model);
  EXPECT_EQ(ours["size"], theirs["size"]);
  EXPECT_EQ(ours["description"], theirs["description"]);
  // Subgraph inputs/outputs: names, shapes, types.
  EXPECT_EQ(ours["subgraphs"].size(), theirs["subgraphs"].size());
  for (size_t s = 0; s < std::min(ours["subgraphs"].size(), theirs["subgraphs"].size()); ++s) {
    const json& g = ours["subgraphs"][s];
    expect_tensors_match(g, g["inputs"], theirs["subgraphs"][s]["inputs"]);
    expect_tensors_match(g, g["outputs"], theirs["subgraphs"][s]["outputs"]);
    std::vector<std::string> our_ops, their_ops;
    for (const json& op : g["operators"]) our_ops.push_back(op["op"]);
    for (const json& op : theirs["subgraphs"][s]["ops"]) their_ops.push_back(op);
    EXPECT_EQ(our_ops, their_ops);
  }
  // Custom ops -> packages -> executables.
  const json& ops = ours["edgetpu_ops"];
  const json& their_ops = theirs["custom_ops"];
  EXPECT_EQ(ops.size(), their_ops.size());
  for (size_t o = 0; o < std::min(ops.size(), their_ops.size()); ++o) {
    EXPECT_EQ(ops[o]["subgraph"], their_ops[o]["subgraph"]);
    EXPECT_EQ(ops[o]["operator"], their_ops[o]["op_index"]);
    const json& pkgs = ops[o]["packages"];
    const json& their_pkgs = their_ops[o]["packages"];
    EXPECT_EQ(pkgs.size(), their_pkgs.size());
    for (size_t p = 0; p < std::min(pkgs.size(), their_pkgs.size()); ++p) {
      EXPECT_EQ(pkgs[p]["min_runtime_version"], their_pkgs[p]["min_runtime_version"]);
      EXPECT_EQ(pkgs[p]["compiler_version"], their_pkgs[p]["compiler_version"]);
      EXPECT_EQ(pkgs[p]["virtual_chip_id"], their_pkgs[p]["virtual_chip_id"]);
      const json& exes = pkgs[p]["executables"];
      const json& their_exes = their_pkgs[p]["executables"];
      EXPECT_EQ(exes.size(), their_exes.size());
      for (size_t e = 0; e < std::min(exes.size(), their_exes.size()); ++e) {
        SCOPED_TRACE("executable " + std::to_string(e));
        const json& a = exes[e];
        const json& b = their_exes[e];
        EXPECT_EQ(a["name"], b["name"]);
        EXPECT_EQ(a["type"], b["type"]);
        EXPECT_EQ(a["chip"], b["chip"]);
        EXPECT_EQ(a["batch_size"], b["batch_size"]);
        EXPECT_EQ(a["scratch_size_bytes"], b["scratch_size_bytes"]);
        EXPECT_EQ(a["parameter_bytes"], b["parameters_len"]);
        EXPECT_EQ(a["used_narrow_memory_bytes_per_tile"], b["used_narrow_memory_bytes_per_tile"]);
        EXPECT_EQ(std::stoull(a["parameter_caching_token"].get<std::string>(), nullptr, 16),
                  b["parameter_caching_token"].get<uint64_t>());
        EXPECT_EQ(a["dma_hints"]["fully_deterministic"], b["dma_fully_deterministic"]);
        expect_hints_match(a["dma_hints"]["hints"], b["dma_hints"]);
        expect_layers_match(a["input_layers"], b["inputs"]);
        expect_layers_match(a["output_layers"], b["outputs"]);
        EXPECT_EQ(a["bitstreams"].size(), b["bitstreams"].size());
        for (size_t i = 0; i < std::min(a["bitstreams"].size(), b["bitstreams"].size()); ++i) {
          const json& x = a["bitstreams"][i];
          const json& y = b["bitstreams"][i];
          EXPECT_EQ(x["bytes"], y["n_bytes"]);
          EXPECT_EQ(x["field_offsets"].size(), y["field_offsets"].size());
          for (size_t f = 0; f < std::min(x["field_offsets"].size(), y["field_offsets"].size());
               ++f) {
            EXPECT_EQ(x["field_offsets"][f]["offset_bit"], y["field_offsets"][f]["offset_bit"]);
            EXPECT_EQ(x["field_offsets"][f]["desc"], y["field_offsets"][f]["desc"]);
            EXPECT_EQ(x["field_offsets"][f]["position"], y["field_offsets"][f]["position"]);
          }
          // The instruction count needs our decoder; it is null where it cannot decode.
          if (!x["instructions"].is_null()) {
            EXPECT_EQ(x["instructions"], y["walk"]["n_instrs"]);
          }
        }
      }
    }
  }
  return ours;
}

TEST(Inspect, SplitConcatMatchesThePythonInspector) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::string why;
  const auto tool = python_tool(dir, &why);
  if (!tool) GTEST_SKIP() << why;
  const json ours = compare_with_python(*tool, dir / "gen2021" / "split_concat_edgetpu.tflite");
  // The facts the issue names: 3 inputs, 5 outputs, 2 executables.
  EXPECT_EQ(ours["summary"]["inputs"], 3);
  EXPECT_EQ(ours["summary"]["outputs"], 5);
  EXPECT_EQ(ours["summary"]["executables"], 2);
  EXPECT_EQ(ours["summary"]["edgetpu_operators"], 1);
}

TEST(Inspect, MobileNetFilesMatchThePythonInspector) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::string why;
  const auto tool = python_tool(dir, &why);
  if (!tool) GTEST_SKIP() << why;
  int seen = 0;
  for (const char* gen : {"gen2020", "gen2021"}) {
    for (const auto& entry : fs::directory_iterator(dir / gen)) {
      const std::string name = entry.path().filename().string();
      if (name.rfind("mobilenet", 0) != 0 || name.find("_edgetpu.tflite") == std::string::npos)
        continue;
      // The Python tool is slow on the big ones; the small MobileNets cover both generations.
      if (fs::file_size(entry.path()) > 2'000'000) continue;
      const json ours = compare_with_python(*tool, entry.path());
      EXPECT_EQ(ours["summary"]["inputs"], 1);
      EXPECT_EQ(ours["summary"]["executables"], 2);
      ++seen;
    }
  }
  EXPECT_GE(seen, 3);
}

TEST(Inspect, CpuModelHasNoEdgeTpuOperators) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  if (!fs::exists(testing::cli_path())) GTEST_SKIP() << "the tinycoral CLI is not built";
  const json ours = our_report(dir / "gen2021" / "mobilenet_v1_0.25_128_quant.tflite");
  EXPECT_EQ(ours["summary"]["edgetpu_operators"], 0);
  EXPECT_GT(ours["summary"]["operators"].get<int>(), 10);
  EXPECT_TRUE(ours["edgetpu_ops"].empty());
}

TEST(Inspect, BadInputIsOneLineAndExitCode2) {
  if (!fs::exists(testing::cli_path())) GTEST_SKIP() << "the tinycoral CLI is not built";
  const fs::path dir = fs::temp_directory_path() / "tinycoral_inspect_test";
  fs::create_directories(dir);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.tflite", ""},
      {"magic.tflite", std::string("\x10\0\0\0XXXX\0\0\0\0\0\0\0\0", 16)},
      {"random.tflite", "\x1c\0\0\0TFL3 some random bytes that are not a model at all"},
  };
  for (const auto& [name, content] : cases) {
    SCOPED_TRACE(name);
    const fs::path file = dir / name;
    std::ofstream(file, std::ios::binary) << content;
    const auto r = testing::run_cli("inspect '" + file.string() + "'");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_TRUE(r.out.empty());
    EXPECT_NE(r.err.find(file.string()), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const auto missing = testing::run_cli("inspect '" + (dir / "missing.tflite").string() + "'");
  EXPECT_EQ(missing.exit_code, 2);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tinycoral
