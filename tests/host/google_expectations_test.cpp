// Google's own checks (reference google_expectations.tsv) on the CPU reference interpreter: every
// row that applies to a CPU model must pass, with the preprocessing of its file's generation (the
// model-editing rows with our classifier head and recurrent-link surgery); rows that need the Edge
// TPU are skipped. Prints the whole table.
#include "support/google_expectations.h"

#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "support/testdata.h"

namespace tinycoral::host {
namespace {

std::filesystem::path tsv_path() {
  return testing::source_dir().parent_path() / "shared" / "reference" / "google_expectations.tsv";
}

TEST(GoogleExpectations, CpuRowsPass) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  // The TSV lives beside the test data in the shared reference folder.
  std::filesystem::path tsv = data.parent_path() / "reference" / "google_expectations.tsv";
  if (!std::filesystem::exists(tsv)) tsv = tsv_path();
  if (!std::filesystem::exists(tsv)) GTEST_SKIP() << "google_expectations.tsv not found";
  const auto rows = read_expectations_tsv(tsv);
  ASSERT_GE(rows.size(), 30u);

  ExpectationOptions options;
  options.testdata = data;
  options.device = cpu_device(Rounding::kTflite);
  const auto results = run_expectations(rows, options);
  std::cout << format_expectation_table(results);

  // Every row on a CPU model (and the model-free rows) must really run and pass.
  const std::set<std::string> cpu_rows = {"G001", "G003", "G005", "G010", "G013", "G016",
                                          "G018", "G020", "G022", "G025", "G027", "G028",
                                          "G029", "G030", "G033", "G036", "G078"};
  for (const auto& r : results) {
    SCOPED_TRACE(r.id + " " + r.model + " " + r.check + ": " + r.detail);
    EXPECT_NE(r.status, CheckStatus::kFail);
    if (cpu_rows.count(r.id)) {
      EXPECT_EQ(r.status, CheckStatus::kPass);
    }
    // Compiled models need the Edge TPU: the CPU device must refuse them, never mis-run them.
    if (r.model.find("_edgetpu") != std::string::npos && r.check != "graph_io_counts") {
      EXPECT_EQ(r.status, CheckStatus::kSkip);
    }
  }
}

// A stand-in "Edge TPU" that runs each compiled model's CPU twin: exercises the device plumbing
// (compiled-model rows, CPU-vs-device agreement, repeated runs) without hardware.
TEST(GoogleExpectations, DeviceRowsRunThroughAnyDevice) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::filesystem::path tsv = data.parent_path() / "reference" / "google_expectations.tsv";
  if (!std::filesystem::exists(tsv)) tsv = tsv_path();
  if (!std::filesystem::exists(tsv)) GTEST_SKIP() << "google_expectations.tsv not found";
  const Device cpu = cpu_device();
  ExpectationOptions options;
  options.testdata = data;
  options.device = [cpu](const std::filesystem::path& p) {
    const std::string s = p.string();
    const size_t pos = s.rfind("_edgetpu.tflite");
    if (pos == std::string::npos) return DeviceOpen{nullptr, "not a compiled model"};
    const std::filesystem::path twin = s.substr(0, pos) + ".tflite";
    if (!std::filesystem::exists(twin)) return DeviceOpen{nullptr, "no CPU twin"};
    return cpu(twin);
  };
  options.max_repeats = 2;
  std::vector<ExpectationRow> rows;
  const std::set<std::string> wanted = {"G002", "G007", "G008", "G021", "G024", "G035"};
  for (const auto& r : read_expectations_tsv(tsv))
    if (wanted.count(r.id)) rows.push_back(r);
  ASSERT_EQ(rows.size(), wanted.size());
  const auto results = run_expectations(rows, options);
  std::cout << format_expectation_table(results);
  for (const auto& r : results) {
    SCOPED_TRACE(r.id + ": " + r.detail);
    if (r.id == "G035") {
      EXPECT_EQ(r.status, CheckStatus::kSkip);  // the pipeline segments have no CPU twin
    } else {
      EXPECT_EQ(r.status, CheckStatus::kPass);
    }
  }
  // CPU vs the same CPU through the device: the label maps agree completely.
  EXPECT_NE(results[4].detail.find("1.0000"), std::string::npos) << results[4].detail;
}

TEST(GoogleExpectations, ParsesRowsAndParameters) {
  const auto rows = parse_expectations_tsv(
      "id\tset\tmodel\timage\tcheck_kind\tpreprocess\tparams\tsource\tinputs_missing\n"
      "G001\tdev\tgen2020/m.tflite\tdev:images/cat.bmp\tclassify_topk\tP_LEGACY\t"
      "k=3;label=283;min_score=0.36\tsrc\t-\n");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].id, "G001");
  EXPECT_EQ(rows[0].preprocess, "P_LEGACY");
  EXPECT_EQ(rows[0].params.at("k"), "3");
  EXPECT_EQ(rows[0].params.at("min_score"), "0.36");
  EXPECT_THROW(parse_expectations_tsv("G002\tdev\tonly three\n"), Error);
}

TEST(GoogleExpectations, TopKUsesThresholdAndHigherIdOnTies) {
  const std::vector<float> scores = {0.1f, 0.5f, 0.5f, 0.3f, 0.05f};
  EXPECT_TRUE(topk_contains(scores, 1, 0.2f, 2));  // tie at 0.5: the higher id ranks first
  EXPECT_FALSE(topk_contains(scores, 1, 0.2f, 1));
  EXPECT_TRUE(topk_contains(scores, 2, 0.2f, 1));
  EXPECT_FALSE(topk_contains(scores, 3, 0.35f, 3));  // below the threshold
  EXPECT_TRUE(topk_contains(scores, 3, 0.3f, 3));    // ">=" the threshold
}

TEST(GoogleExpectations, SegmentationMetricIsAgreementOverTwoNMinusAgreement) {
  const std::vector<int64_t> labels = {0, 3, 3, 1};
  const std::vector<uint8_t> truth = {0, 3, 255, 2};
  // With 255 -> 0: agreement 2 of 4 -> 2 / (8 - 2).
  EXPECT_DOUBLE_EQ(segmentation_iou(labels, truth, true), 2.0 / 6.0);
  const std::vector<uint8_t> truth2 = {0, 3, 3, 2};
  EXPECT_DOUBLE_EQ(segmentation_iou(labels, truth2, false), 3.0 / 5.0);
}

TEST(GoogleExpectations, LegacyRowDefectKeepsHeightSquaredValues) {
  // 2 rows x 3 columns x 1 channel: only 2 * 2 = 4 values survive.
  std::vector<uint8_t> px = {1, 2, 3, 4, 5, 6};
  apply_legacy_row_defect(px, 2, 3, 1);
  EXPECT_EQ(px, (std::vector<uint8_t>{1, 2, 3, 4, 0, 0}));
}

}  // namespace
}  // namespace tinycoral::host
