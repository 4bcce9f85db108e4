// Google's own checks (reference google_expectations.tsv) on the compiled models, run the way a
// user runs them: the reference interpreter with the runtime's Edge TPU delegate, the virtual
// stick's wire protocol and the virtual Edge TPU executing Google's programs. The rows are those
// whose programs the virtual chip runs (docs/chip.md "Status"); each must really run and pass.
#include <gtest/gtest.h>

#include <iostream>
#include <set>

#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "support/google_expectations.h"
#include "support/sanitizers.h"
#include "support/testdata.h"

namespace tinycoral::runtime {
namespace {

// Runs the rows `wanted` through the runtime on a virtual stick; each must really run and pass.
void expect_rows_pass(const std::set<std::string>& wanted) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  std::filesystem::path tsv = data.parent_path() / "reference" / "google_expectations.tsv";
  if (!std::filesystem::exists(tsv))
    tsv = testing::source_dir().parent_path() / "shared" / "reference" / "google_expectations.tsv";
  if (!std::filesystem::exists(tsv)) GTEST_SKIP() << "google_expectations.tsv not found";

  host::InterpreterOptions interpreter_options;
  add_edgetpu_delegate(interpreter_options.delegates, open_virtual_edgetpu());
  host::ExpectationOptions options;
  options.testdata = data;
  options.device = host::interpreter_device(interpreter_options);
  // The simulator is deterministic by construction: two repeats show a model's state or a stale
  // buffer leaking into the next run as well as Google's 20 (and cost a tenth). Under the
  // sanitizers (ten times slower) each row runs once and each model repeats once; the normal build
  // checks every repetition.
#ifdef TINYCORAL_ASAN
  options.max_repeats = 1;
  options.repeatability_runs = 1;
#else
  options.max_repeats = 2;
  options.repeatability_runs = 2;
#endif

  std::vector<host::ExpectationRow> rows;
  for (const auto& r : host::read_expectations_tsv(tsv))
    if (wanted.count(r.id)) rows.push_back(r);
  ASSERT_EQ(rows.size(), wanted.size());
  const auto results = host::run_expectations(rows, options);
  std::cout << host::format_expectation_table(results);
  for (const auto& r : results) {
    SCOPED_TRACE(r.id + " " + r.model + " " + r.check + ": " + r.detail);
    EXPECT_EQ(r.status, host::CheckStatus::kPass);
  }
}

// gen2020 MobileNet v1 0.25 and 0.5 (classification top-k with Google's score thresholds) and
// MobileNet v2 1.0 (top-k and score checks on cat and bird), PoseNet (keypoints), gen2021's
// per-channel PoseNet (keypoints), both DeepLabs (label map against the ground-truth mask, the
// edgetpu, libcoral and pycoral cases, and against the CPU model's map) and the four-segment SSD
// pipeline on one stick (detection on cat.bmp), gen2021's MobileNet with its on-tile softmax,
// the Keras LSTM (its host scratch round trip served on device-reported descriptors),
// split_concat's inputs and outputs, and the repeatability of every gen2020/gen2021 model.
// Under the sanitizers each model runs through one row (its first); the rows that check the same
// programs again (v2's G007-G009, DeepLab's G015, G024 and G026, and G077's repeatability of every
// model, which EveryCompiledModel runs there too) only in the normal build: they add checks of the
// outputs, not other code on the chip's side (91 s of that stage with them).
TEST(GoogleExpectationsOnTheVirtualStick, CompiledModelRowsPass) {
  std::set<std::string> rows = {"G002", "G004", "G006", "G014", "G017", "G019",
                                "G021", "G023", "G030", "G034", "G035"};
#ifndef TINYCORAL_ASAN
  rows.insert({"G007", "G008", "G009", "G015", "G024", "G026", "G077"});
#endif
  expect_rows_pass(rows);
}

// The rows that edit a compiled model first: a classifier appended to the embedding extractor
// (G011 with Google's fixed weights, G012 with numpy's random ones; four 1.0/224 inferences),
// split_concat with recurrent links made inside (G031 its inputs and outputs, G032 five frames
// equal to the original fed back by hand).
TEST(GoogleExpectationsOnTheVirtualStick, ModelEditingRowsPass) {
  expect_rows_pass({"G011", "G012", "G031", "G032"});
}

}  // namespace
}  // namespace tinycoral::runtime
