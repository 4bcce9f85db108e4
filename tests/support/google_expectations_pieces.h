// The pieces Google's checks share (google_expectations.cpp): reading a row's parameters, opening
// a model on a device, reading outputs as real numbers, the verdict. For the check kinds kept in
// files of their own (google_edit_checks.cpp: the model-editing checks).
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "support/google_expectations.h"

namespace tinycoral::host::expectation_pieces {

// Thrown by a check that does not apply (no test data, a device that cannot run the model).
struct Skip {
  std::string why;
};

double number(const ExpectationRow& row, const std::string& key);  // a numeric parameter
std::string text(const ExpectationRow& row, const std::string& key);
std::filesystem::path existing(const std::filesystem::path& p);  // or Skip
std::unique_ptr<ModelSession> open_model(const Device& device, const std::filesystem::path& model);
// Output i as real numbers (quantized types dequantized in float32, as Google's runners do).
std::vector<float> real_output(const ModelSession& s, size_t i);
std::string fmt(double v, int precision = 4);
CheckResult verdict(bool ok, std::string detail);

// The model-editing checks (google_edit_checks.cpp).
CheckResult append_fc_softmax(const ExpectationRow& row, const ExpectationOptions& o);
CheckResult graph_surgery_io_counts(const ExpectationRow& row, const ExpectationOptions& o);
CheckResult recurrent_sequence_equivalence(const ExpectationRow& row, const ExpectationOptions& o);

}  // namespace tinycoral::host::expectation_pieces
