// Google's own checks on the test models (reference google_expectations.md/.tsv), runnable against
// any "device" that can run a TFLite model: the CPU interpreter here, the Edge TPU (real or
// virtual) through the runtime. Each TSV row is prepared the way its Google suite prepared it
// (legacy or libcoral bilinear, the legacy row defect, raw bytes), run, and judged with Google's
// thresholds (rows that edit a model first do it with our writer: google_edit_checks.cpp). Rows a
// device cannot run are skipped with the reason.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "host/interpreter.h"
#include "host/kernel.h"

namespace tinycoral::host {

// One row of google_expectations.tsv.
struct ExpectationRow {
  std::string id, set, model, image, check, preprocess, source, inputs_missing;
  std::map<std::string, std::string> params;  // "k=3;label=283" -> {k: 3, label: 283}
};
std::vector<ExpectationRow> parse_expectations_tsv(const std::string& text);
std::vector<ExpectationRow> read_expectations_tsv(const std::filesystem::path& path);

// A model loaded on a device, ready to run many times.
class ModelSession {
 public:
  virtual ~ModelSession() = default;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  virtual const container::Tensor& input(size_t i) const = 0;  // name, shape, type, quantization
  virtual const container::Tensor& output(size_t i) const = 0;
  virtual void set_input(size_t i, std::span<const uint8_t> bytes) = 0;
  virtual void invoke() = 0;
  virtual std::span<const uint8_t> output_bytes(size_t i) const = 0;
  // Back to the initial state (a recurrent model's variables); nothing for a model without state.
  virtual void reset_state() {}
};

// Opens a model on a device; `session` is null when the device cannot run it (`why_not` says why:
// e.g. the CPU given an *_edgetpu.tflite file).
struct DeviceOpen {
  std::unique_ptr<ModelSession> session;
  std::string why_not;
};
using Device = std::function<DeviceOpen(const std::filesystem::path& model)>;

// The CPU reference interpreter as a Device (refuses models with operators it does not have).
Device cpu_device(Rounding rounding = Rounding::kTflite);
// The interpreter with `options` (e.g. the runtime's Edge TPU delegate) as a Device; a model it
// cannot load is refused with the interpreter's reason.
Device interpreter_device(InterpreterOptions options);

enum class CheckStatus { kPass, kFail, kSkip };
const char* check_status_name(CheckStatus status);

struct CheckResult {
  std::string id, model, check;
  CheckStatus status = CheckStatus::kSkip;
  std::string detail;  // the measured value against the threshold, or why it was skipped
};

struct ExpectationOptions {
  std::filesystem::path testdata;   // the folder with gen2020/, images/, expected/ ...
  Device device;                    // the device under test
  Device reference = cpu_device();  // the CPU twin's device for CPU-vs-device agreement rows
  int max_repeats = 3;              // cap for rows that ask for many iterations
  int repeatability_runs = 20;      // G077 (Google's CI used 20)
};

// Runs one row; never throws for a problem of the row itself (that is a kFail with the message).
CheckResult run_expectation(const ExpectationRow& row, const ExpectationOptions& options);
std::vector<CheckResult> run_expectations(const std::vector<ExpectationRow>& rows,
                                          const ExpectationOptions& options);

// Google's check `row_id` of its own compiled model, run on `ours` (our compile of the same CPU
// twin, written to a temporary file) on `device`: the compiler's whole-model tests. nullopt, with
// `why`, when google_expectations.tsv is neither beside the test data nor in ../shared/reference;
// an Error when it has no such row.
std::optional<CheckResult> run_expectation_on_ours(const std::filesystem::path& testdata,
                                                   const std::string& row_id,
                                                   std::span<const uint8_t> ours, Device device,
                                                   std::string& why);

// A fixed-width table: row, model, check, result, detail.
std::string format_expectation_table(const std::vector<CheckResult>& results);

// Pieces of the checks, exposed for tests.
// The legacy helpers' defect (section 1.3): only height x height x C of the resized values survive.
void apply_legacy_row_defect(std::vector<uint8_t>& pixels, int height, int width, int channels);
// Agreement metric of the segmentation suites: equal / (2N - equal).
double segmentation_iou(std::span<const int64_t> labels, std::span<const uint8_t> truth,
                        bool void_to_zero);
// Top-k (score >= threshold, ties to the higher id) contains `label`.
bool topk_contains(std::span<const float> scores, int k, float threshold, int64_t label);

}  // namespace tinycoral::host
