// Google's checks on the test models (google_expectations.h). Each check kind follows section 1.7
// of the reference: how Google's suites compared results and with which thresholds.
#include "support/google_expectations.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <random>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/file.h"
#include "container/recurrent_links.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "support/google_expectations_pieces.h"
#include "support/testdata.h"

namespace tinycoral::host {

namespace fs = std::filesystem;
using container::Tensor;
using container::TensorType;

// ------------------------------------------------------------------------------------ the TSV

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

}  // namespace

std::vector<ExpectationRow> parse_expectations_tsv(const std::string& text) {
  std::vector<ExpectationRow> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("id\t", 0) == 0) continue;
    const auto f = split(line, '\t');
    if (f.size() < 7) fail("expectations TSV line ", line_no, ": ", f.size(), " fields, need 7");
    ExpectationRow r;
    r.id = f[0];
    r.set = f[1];
    r.model = f[2];
    r.image = f[3];
    r.check = f[4];
    r.preprocess = f[5];
    if (f.size() > 7) r.source = f[7];
    if (f.size() > 8) r.inputs_missing = f[8];
    if (f[6] != "-") {
      for (const auto& kv : split(f[6], ';')) {
        const size_t eq = kv.find('=');
        if (eq == std::string::npos) continue;
        r.params[trim(kv.substr(0, eq))] = trim(kv.substr(eq + 1));
      }
    }
    rows.push_back(std::move(r));
  }
  return rows;
}

std::vector<ExpectationRow> read_expectations_tsv(const fs::path& path) {
  const auto bytes = read_file(path);
  return with_context(path.string(), [&] {
    return parse_expectations_tsv(std::string(bytes.begin(), bytes.end()));
  });
}

// ------------------------------------------------------------------------------ the CPU device

namespace {

class CpuSession final : public ModelSession {
 public:
  explicit CpuSession(Interpreter interpreter) : it_(std::move(interpreter)) {}
  size_t num_inputs() const override { return it_.num_inputs(); }
  size_t num_outputs() const override { return it_.num_outputs(); }
  const Tensor& input(size_t i) const override { return *it_.input(i).tensor; }
  const Tensor& output(size_t i) const override { return *it_.output(i).tensor; }
  void set_input(size_t i, std::span<const uint8_t> bytes) override { it_.set_input(i, bytes); }
  void invoke() override { it_.invoke(); }
  std::span<const uint8_t> output_bytes(size_t i) const override { return it_.output_bytes(i); }
  void reset_state() override { it_.reset_variables(); }

 private:
  Interpreter it_;
};

}  // namespace

Device cpu_device(Rounding rounding) {
  return [rounding](const fs::path& path) {
    DeviceOpen open;
    container::Model model = container::read_tflite_file(path);
    const auto missing = unsupported_operators(model);
    if (!missing.empty()) {
      open.why_not = "CPU lacks ";
      for (size_t i = 0; i < missing.size(); ++i) open.why_not += (i ? ", " : "") + missing[i];
      return open;
    }
    InterpreterOptions options;
    options.rounding = rounding;
    open.session = std::make_unique<CpuSession>(Interpreter(std::move(model), options));
    return open;
  };
}

Device interpreter_device(InterpreterOptions options) {
  return [options](const fs::path& path) {
    DeviceOpen open;
    try {
      open.session =
          std::make_unique<CpuSession>(Interpreter(container::read_tflite_file(path), options));
    } catch (const Error& e) {
      open.why_not = e.what();
    }
    return open;
  };
}

const char* check_status_name(CheckStatus status) {
  switch (status) {
    case CheckStatus::kPass:
      return "PASS";
    case CheckStatus::kFail:
      return "FAIL";
    case CheckStatus::kSkip:
      return "SKIP";
  }
  return "?";
}

// ------------------------------------------------------------------------------- check pieces

void apply_legacy_row_defect(std::vector<uint8_t>& pixels, int height, int width, int channels) {
  (void)width;
  const size_t kept = static_cast<size_t>(height) * height * channels;
  if (kept < pixels.size())
    std::fill(pixels.begin() + static_cast<std::ptrdiff_t>(kept), pixels.end(), 0);
}

double segmentation_iou(std::span<const int64_t> labels, std::span<const uint8_t> truth,
                        bool void_to_zero) {
  if (labels.size() != truth.size())
    fail("segmentation: ", labels.size(), " labels but ", truth.size(), " ground-truth pixels");
  size_t equal = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    const int64_t t = (void_to_zero && truth[i] == 255) ? 0 : truth[i];
    if (labels[i] == t) ++equal;
  }
  const double n = static_cast<double>(labels.size());
  const double e = static_cast<double>(equal);
  return e / (2 * n - e);
}

bool topk_contains(std::span<const float> scores, int k, float threshold, int64_t label) {
  std::vector<int64_t> candidates;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i] >= threshold) candidates.push_back(static_cast<int64_t>(i));
  std::sort(candidates.begin(), candidates.end(), [&](int64_t a, int64_t b) {
    if (scores[static_cast<size_t>(a)] != scores[static_cast<size_t>(b)])
      return scores[static_cast<size_t>(a)] > scores[static_cast<size_t>(b)];
    return a > b;
  });
  for (size_t i = 0; i < candidates.size() && i < static_cast<size_t>(k); ++i)
    if (candidates[i] == label) return true;
  return false;
}

// ------------------------------------------------------------------------------ the checks

namespace expectation_pieces {

double number(const ExpectationRow& row, const std::string& key) {
  auto it = row.params.find(key);
  if (it == row.params.end()) fail(row.id, ": parameter '", key, "' is missing");
  try {
    return std::stod(it->second);
  } catch (const std::exception&) {
    fail(row.id, ": parameter '", key, "' = '", it->second, "' is not a number");
  }
}

double number_or(const ExpectationRow& row, const std::string& key, double fallback) {
  return row.params.count(key) ? number(row, key) : fallback;
}

std::string text(const ExpectationRow& row, const std::string& key) {
  auto it = row.params.find(key);
  if (it == row.params.end()) fail(row.id, ": parameter '", key, "' is missing");
  return it->second;
}

// "dev:images/cat.bmp" -> testdata/images/cat.bmp; "missing:repo@commit:name.bmp" and the mask
// references "repo@commit:path/name.bmp" -> testdata/images/name.bmp (where the files were added).
fs::path data_file(const ExpectationOptions& o, const std::string& spec) {
  if (spec.rfind("dev:", 0) == 0) return o.testdata / spec.substr(4);
  std::string name = spec.substr(spec.rfind(':') + 1);
  name = name.substr(name.rfind('/') + 1);
  return o.testdata / "images" / name;
}

fs::path existing(const fs::path& p) {
  if (!fs::exists(p)) throw Skip{cat("input ", p.filename().string(), " is not in the test data")};
  return p;
}

// "dir/x_{0,1}_y.tflite" -> dir/x_0_y.tflite, dir/x_1_y.tflite.
std::vector<std::string> expand_braces(const std::string& s) {
  const size_t open = s.find('{');
  const size_t close = s.find('}', open == std::string::npos ? 0 : open);
  if (open == std::string::npos || close == std::string::npos) return {s};
  std::vector<std::string> out;
  for (const auto& alt : split(s.substr(open + 1, close - open - 1), ','))
    out.push_back(s.substr(0, open) + alt + s.substr(close + 1));
  return out;
}

std::unique_ptr<ModelSession> open_model(const Device& device, const fs::path& model) {
  if (!device) throw Skip{"no device"};
  existing(model);
  DeviceOpen open = device(model);
  if (!open.session) throw Skip{open.why_not.empty() ? "device cannot run it" : open.why_not};
  return std::move(open.session);
}

ResizeMode resize_mode_for(const std::string& prep) {
  if (prep == "P_LEGACY" || prep == "P_LEGACY_ROWBUG") return ResizeMode::kBilinearLegacy;
  if (prep == "P_LIBCORAL") return ResizeMode::kBilinear;
  if (prep == "P_PIL_NEAREST") return ResizeMode::kNearest;
  if (prep == "P_NONE" || prep == "P_PIL_LANCZOS") return ResizeMode::kNone;  // 513 -> 513 copy
  fail("unknown preprocessing '", prep, "'");
}

// The input tensor bytes for an image as the row's suite prepared them.
std::vector<uint8_t> image_input(const Image& img, const Tensor& t, const std::string& prep) {
  std::vector<uint8_t> bytes = image_to_input(img, t.shape, t.type, resize_mode_for(prep), {});
  if (prep == "P_LEGACY_ROWBUG") {
    if (t.shape.size() != 4) fail("the legacy row defect needs a [1, H, W, C] input");
    // Zeroed pixels are value 0, which an int8 tensor stores as -128.
    const size_t kept = static_cast<size_t>(t.shape[1]) * t.shape[1] * t.shape[3];
    const uint8_t zero = t.type == TensorType::kInt8 ? 0x80 : 0;
    for (size_t i = kept; i < bytes.size(); ++i) bytes[i] = zero;
  }
  return bytes;
}

void run_on_image(ModelSession& s, const ExpectationOptions& o, const ExpectationRow& row) {
  if (s.num_inputs() != 1) fail("model has ", s.num_inputs(), " inputs, expected 1");
  const Image img = read_image(existing(data_file(o, row.image)));
  s.set_input(0, image_input(img, s.input(0), row.preprocess));
  s.invoke();
}

// Output i as real numbers: quantized types dequantized ((q - zp) * scale in float32), others as
// is.
std::vector<float> real_output(const ModelSession& s, size_t i) {
  const Tensor& t = s.output(i);
  const auto bytes = s.output_bytes(i);
  const float scale = t.quantization.scale.empty() ? 1.0f : t.quantization.scale[0];
  const int32_t zp =
      t.quantization.zero_point.empty() ? 0 : static_cast<int32_t>(t.quantization.zero_point[0]);
  const bool q = !t.quantization.scale.empty();
  std::vector<float> out;
  switch (t.type) {
    case TensorType::kUInt8:
      for (uint8_t v : bytes) out.push_back(q ? static_cast<float>(v - zp) * scale : v);
      break;
    case TensorType::kInt8:
      for (uint8_t v : bytes) {
        const int8_t s8 = static_cast<int8_t>(v);
        out.push_back(q ? static_cast<float>(s8 - zp) * scale : s8);
      }
      break;
    case TensorType::kFloat32:
      out.resize(bytes.size() / 4);
      std::memcpy(out.data(), bytes.data(), out.size() * 4);
      break;
    default:
      fail("output ", i, " has type ", container::tensor_type_name(t.type), ", not a score type");
  }
  return out;
}

std::vector<int64_t> label_output(const ModelSession& s, size_t i) {
  const Tensor& t = s.output(i);
  const auto b = s.output_bytes(i);
  std::vector<int64_t> out;
  switch (t.type) {
    case TensorType::kInt64:
      out.resize(b.size() / 8);
      std::memcpy(out.data(), b.data(), out.size() * 8);
      break;
    case TensorType::kInt32: {
      std::vector<int32_t> v(b.size() / 4);
      std::memcpy(v.data(), b.data(), v.size() * 4);
      out.assign(v.begin(), v.end());
      break;
    }
    case TensorType::kUInt8:
      out.assign(b.begin(), b.end());
      break;
    default:
      fail("output ", i, " has type ", container::tensor_type_name(t.type), ", not a label map");
  }
  return out;
}

std::string fmt(double v, int precision) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(precision) << v;
  return s.str();
}

CheckResult verdict(bool ok, std::string detail) {
  CheckResult r;
  r.status = ok ? CheckStatus::kPass : CheckStatus::kFail;
  r.detail = std::move(detail);
  return r;
}

}  // namespace expectation_pieces

namespace {

using namespace expectation_pieces;

CheckResult classify_topk(const ExpectationRow& row, const ExpectationOptions& o) {
  auto s = open_model(o.device, o.testdata / row.model);
  run_on_image(*s, o, row);
  const auto scores = real_output(*s, 0);
  const int k = static_cast<int>(number(row, "k"));
  const int64_t label = static_cast<int64_t>(number(row, "label"));
  const float t = static_cast<float>(number(row, "min_score"));
  if (label < 0 || static_cast<size_t>(label) >= scores.size())
    fail("label ", label, " outside the ", scores.size(), " scores");
  int rank = 1;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i] > scores[static_cast<size_t>(label)] ||
        (scores[i] == scores[static_cast<size_t>(label)] && static_cast<int64_t>(i) > label))
      ++rank;
  const bool ok = topk_contains(scores, k, t, label);
  return verdict(ok, cat("score(", label, ")=", fmt(scores[static_cast<size_t>(label)]), " rank ",
                         rank, " (need >= ", fmt(t, 2), " in top ", k, ")"));
}

CheckResult class_score_gt(const ExpectationRow& row, const ExpectationOptions& o) {
  auto s = open_model(o.device, o.testdata / row.model);
  const int64_t label = static_cast<int64_t>(number(row, "label"));
  const float t = static_cast<float>(number(row, "score_gt"));
  const int wanted = static_cast<int>(
      std::max({1.0, number_or(row, "iterations", 1), number_or(row, "runs_per_tpu", 1)}));
  const int runs = std::min(wanted, std::max(1, o.max_repeats));
  float worst = 1e9f;
  for (int r = 0; r < runs; ++r) {
    run_on_image(*s, o, row);
    const auto scores = real_output(*s, 0);
    if (label < 0 || static_cast<size_t>(label) >= scores.size()) fail("label out of range");
    worst = std::min(worst, scores[static_cast<size_t>(label)]);
  }
  return verdict(worst > t, cat("min score(", label, ")=", fmt(worst), " over ", runs,
                                " runs (need > ", fmt(t, 2), ")"));
}

std::vector<int64_t> mask_labels(const ExpectationOptions& o, const ExpectationRow& row) {
  Image mask = read_image(existing(data_file(o, text(row, "mask"))));
  if (mask.channels != 1) mask = convert_channels(mask, 1);  // 24-bit grey masks: (R+G+B)/3
  return std::vector<int64_t>(mask.pixels.begin(), mask.pixels.end());
}

double agreement_iou(const std::vector<int64_t>& a, const std::vector<int64_t>& b, bool void0) {
  if (a.size() != b.size()) fail("label maps differ in size: ", a.size(), " vs ", b.size());
  size_t equal = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t t = (void0 && b[i] == 255) ? 0 : b[i];
    if (a[i] == t) ++equal;
  }
  const double n = static_cast<double>(a.size()), e = static_cast<double>(equal);
  return e / (2 * n - e);
}

CheckResult segmentation(const ExpectationRow& row, const ExpectationOptions& o) {
  auto s = open_model(o.device, o.testdata / row.model);
  run_on_image(*s, o, row);
  const auto labels = label_output(*s, 0);
  const auto truth = mask_labels(o, row);
  const bool void0 = text(row, "mask_255_to_0").rfind("yes", 0) == 0;
  const double iou = agreement_iou(labels, truth, void0);
  const double t = number(row, "score_gt");
  return verdict(iou > t, cat("agreement metric ", fmt(iou), " (need > ", fmt(t, 2), ")"));
}

CheckResult segmentation_pair(const ExpectationRow& row, const ExpectationOptions& o) {
  const auto models = split(row.model, '+');
  if (models.size() != 2) fail("expected two models joined by '+'");
  auto cpu = open_model(o.reference, o.testdata / models[0]);
  auto dev = open_model(o.device, o.testdata / models[1]);
  run_on_image(*cpu, o, row);
  run_on_image(*dev, o, row);
  const double iou = agreement_iou(label_output(*cpu, 0), label_output(*dev, 0), false);
  const double t = number(row, "score_gt");
  return verdict(iou > t, cat("CPU vs device metric ", fmt(iou), " (need > ", fmt(t, 2), ")"));
}

struct Pose {
  float score = 0;
  std::vector<std::array<float, 3>> keypoints;  // y, x, score
};

// The four PoseNet decoder outputs: keypoints (y, x), keypoint scores, pose scores, count.
std::vector<Pose> decoded_poses(const ModelSession& s) {
  if (s.num_outputs() < 4) fail("PoseNet decoder model has ", s.num_outputs(), " outputs");
  const auto kp = real_output(s, 0), ks = real_output(s, 1), ps = real_output(s, 2),
             n = real_output(s, 3);
  if (n.empty()) fail("empty pose count");
  const int count = static_cast<int>(n[0]);
  if (count < 0 || static_cast<size_t>(count) > ps.size() ||
      static_cast<size_t>(count) * 17 > ks.size() || static_cast<size_t>(count) * 34 > kp.size())
    fail("pose count ", count, " does not fit the outputs");
  std::vector<Pose> poses(static_cast<size_t>(count));
  for (int p = 0; p < count; ++p) {
    poses[p].score = ps[p];
    for (int k = 0; k < 17; ++k)
      poses[p].keypoints.push_back(
          {kp[(p * 17 + k) * 2], kp[(p * 17 + k) * 2 + 1], ks[p * 17 + k]});
  }
  return poses;
}

std::pair<int, int> parse_hxw(const std::string& s) {
  const size_t x = s.find('x');
  if (x == std::string::npos) fail("'", s, "' is not HxW");
  return {std::stoi(s.substr(0, x)), std::stoi(s.substr(x + 1))};
}

CheckResult posenet_legacy(const ExpectationRow& row, const ExpectationOptions& o) {
  auto s = open_model(o.device, o.testdata / row.model);
  run_on_image(*s, o, row);
  const auto poses = decoded_poses(*s);
  const int want = static_cast<int>(number(row, "n_poses_eq"));
  if (static_cast<int>(poses.size()) != want)
    return verdict(false, cat(poses.size(), " poses, expected ", want));
  const float pose_gt = static_cast<float>(number(row, "pose_score_gt"));
  const double s_tol = number(row, "kp_score_abs_tol"), px = number(row, "kp_yx_abs_tol_px");
  int checked = 0;
  double worst_px = 0, worst_s = 0;
  std::string bad;
  for (int p = 0; p < want; ++p) {
    if (!(poses[p].score > pose_gt))
      bad += cat(" pose ", p, " score ", fmt(poses[p].score, 3), ";");
    const auto expected = split(text(row, cat("expected_pose", p)), ',');
    if (expected.size() != 17) fail("expected_pose", p, " does not list 17 keypoints");
    for (int k = 0; k < 17; ++k) {
      const auto f = split(expected[k], ':');
      if (f.size() != 3) fail("expected keypoint '", expected[k], "' is not y:x:score");
      const double ey = std::stod(f[0]), ex = std::stod(f[1]), es = std::stod(f[2]);
      if (!(es > 0.5)) continue;
      ++checked;
      const auto& kp = poses[p].keypoints[k];
      const double dy = std::abs(kp[0] - ey), dx = std::abs(kp[1] - ex), ds = std::abs(kp[2] - es);
      worst_px = std::max({worst_px, dy, dx});
      worst_s = std::max(worst_s, ds);
      if (ds > s_tol || dy > px || dx > px)
        bad += cat(" pose ", p, " kp ", k, " (", fmt(kp[0], 1), ",", fmt(kp[1], 1), ",",
                   fmt(kp[2], 3), ");");
    }
  }
  return verdict(bad.empty(), cat(checked, " keypoints, worst ", fmt(worst_px, 2), " px / score ",
                                  fmt(worst_s, 3), bad.empty() ? "" : " off:" + bad));
}

CheckResult pose_reference(const ExpectationRow& row, const ExpectationOptions& o) {
  auto s = open_model(o.device, o.testdata / row.model);
  run_on_image(*s, o, row);
  const auto poses = decoded_poses(*s);
  const auto [h, w] = parse_hxw(text(row, "input"));
  // Reference CSV: pose_id, pose_score, keypoint_id, keypoint_score, keypoint_x, keypoint_y.
  const auto csv = read_file(existing(data_file(o, text(row, "reference"))));
  std::map<int, Pose> ref;
  std::istringstream in(std::string(csv.begin(), csv.end()));
  std::string line;
  while (std::getline(in, line)) {
    const auto f = split(trim(line), ',');
    if (f.size() < 6 || f[0] == "pose_id") continue;
    Pose& p = ref[std::stoi(f[0])];
    p.score = std::stof(f[1]);
    const size_t k = static_cast<size_t>(std::stoi(f[2]));
    if (p.keypoints.size() <= k) p.keypoints.resize(k + 1);
    p.keypoints[k] = {std::stof(f[5]), std::stof(f[4]), std::stof(f[3])};
  }
  if (poses.size() != ref.size())
    return verdict(false, cat(poses.size(), " poses, reference has ", ref.size()));
  const double ps_tol = number(row, "pose_score_abs_tol"), yx_tol = number(row, "kp_yx_abs_tol");
  const int min_checked = static_cast<int>(number(row, "min_checked_per_pose"));
  const double kp_min = 0.7;  // "keypoints with score > 0.7 in both"
  std::string bad, counts;
  double worst = 0;
  size_t p = 0;
  for (const auto& [id, r] : ref) {
    const Pose& got = poses[p];
    if (std::abs(got.score - r.score) > ps_tol)
      bad += cat(" pose ", p, " score ", fmt(got.score, 3), " vs ", fmt(r.score, 3), ";");
    int checked = 0;
    for (size_t k = 0; k < r.keypoints.size() && k < got.keypoints.size(); ++k) {
      const auto& a = got.keypoints[k];
      const auto& b = r.keypoints[k];
      if (!(a[2] > kp_min && b[2] > kp_min)) continue;
      ++checked;
      const double dy = std::abs(a[0] / h - b[0]), dx = std::abs(a[1] / w - b[1]);
      worst = std::max({worst, dy, dx});
      if (dy > yx_tol || dx > yx_tol) bad += cat(" pose ", p, " kp ", k, ";");
    }
    if (checked < min_checked) bad += cat(" pose ", p, " only ", checked, " keypoints compared;");
    counts += cat(p ? "+" : "", checked);
    ++p;
  }
  return verdict(bad.empty(), cat(counts, " keypoints, worst ", fmt(worst, 4), " (tol ",
                                  fmt(yx_tol, 2), ")", bad.empty() ? "" : " off:" + bad));
}

CheckResult detection_top1(const ExpectationRow& row, const ExpectationOptions& o) {
  std::vector<std::unique_ptr<ModelSession>> segments;
  for (const auto& m : expand_braces(row.model))
    segments.push_back(open_model(o.device, o.testdata / m));
  // Route tensors by name from segment to segment (Google's pipelined runner).
  std::map<std::string, std::vector<uint8_t>> pool;
  const Image img = read_image(existing(data_file(o, row.image)));
  for (size_t k = 0; k < segments.size(); ++k) {
    ModelSession& s = *segments[k];
    for (size_t i = 0; i < s.num_inputs(); ++i) {
      auto it = pool.find(s.input(i).name);
      if (it != pool.end()) {
        s.set_input(i, it->second);
      } else if (k == 0 && i == 0) {
        s.set_input(i, image_input(img, s.input(0), row.preprocess));
      } else {
        fail("segment ", k, " input '", s.input(i).name, "' has no producer");
      }
    }
    s.invoke();
    for (size_t i = 0; i < s.num_outputs(); ++i) {
      const auto b = s.output_bytes(i);
      pool[s.output(i).name].assign(b.begin(), b.end());
    }
  }
  const ModelSession& last = *segments.back();
  if (last.num_outputs() < 4) fail("the last segment has ", last.num_outputs(), " outputs");
  const auto boxes = real_output(last, 0), classes = real_output(last, 1),
             scores = real_output(last, 2), count = real_output(last, 3);
  const float t = static_cast<float>(number(row, "score_gt"));
  const double iou_t = number(row, "iou_gt");
  const int label = static_cast<int>(number(row, "label"));
  std::vector<double> want;
  for (const auto& part : split(text(row, "expected_box"), ',')) {
    const auto f = split(trim(part), ' ');
    want.push_back(std::stod(f.back()));
  }
  if (want.size() != 4) fail("expected_box needs ymin, xmin, ymax, xmax");
  // Best candidate with score >= t (top_k = 1).
  const int n = std::min<int>(static_cast<int>(count.empty() ? 0 : count[0]),
                              static_cast<int>(scores.size()));
  int best = -1;
  for (int i = 0; i < n; ++i)
    if (scores[i] >= t && (best < 0 || scores[i] > scores[best])) best = i;
  if (best < 0) return verdict(false, cat("no detection with score >= ", fmt(t, 2)));
  auto clamp01 = [](double v) { return std::clamp(v, 0.0, 1.0); };
  const double y0 = clamp01(boxes[best * 4]), x0 = clamp01(boxes[best * 4 + 1]),
               y1 = clamp01(boxes[best * 4 + 2]), x1 = clamp01(boxes[best * 4 + 3]);
  const double inter = std::max(0.0, std::min(y1, want[2]) - std::max(y0, want[0])) *
                       std::max(0.0, std::min(x1, want[3]) - std::max(x0, want[1]));
  const double uni = (y1 - y0) * (x1 - x0) + (want[2] - want[0]) * (want[3] - want[1]) - inter;
  const double iou = uni > 0 ? inter / uni : 0;
  const int got_label = static_cast<int>(classes[best]);
  const bool ok = got_label == label && scores[best] > t && iou > iou_t;
  return verdict(ok, cat("label ", got_label, " score ", fmt(scores[best], 3), " IoU ", fmt(iou, 3),
                         " (need ", label, ", > ", fmt(t, 2), ", > ", fmt(iou_t, 2), ")"));
}

CheckResult bmp_decode(const ExpectationRow& row, const ExpectationOptions& o) {
  const Image img = decode_bmp(read_file(existing(data_file(o, row.image))));
  std::vector<int> values;
  const std::string rgb = text(row, "rgb");
  std::string cur;
  for (char c : rgb + ' ') {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (!cur.empty()) {
      values.push_back(std::stoi(cur));
      cur.clear();
    }
  }
  // "rgb=<row pattern> (rows 0-2) then <row pattern> (rows 3-5)": drop the row-range numbers.
  std::vector<int> top(values.begin(), values.begin() + std::min<size_t>(12, values.size()));
  std::vector<int> bottom;
  for (size_t i = 14; i < values.size() && bottom.size() < 12; ++i) bottom.push_back(values[i]);
  if (top.size() != 12 || bottom.size() != 12) fail("cannot parse the expected rgb values");
  bool ok = img.height == 6 && img.width == 4 && img.channels == 3;
  for (int y = 0; ok && y < 6; ++y)
    for (int i = 0; i < 12; ++i)
      ok = ok && img.pixels[static_cast<size_t>(y) * 12 + i] == (y < 3 ? top[i] : bottom[i]);
  return verdict(ok, cat("decoded ", img.height, "x", img.width, "x", img.channels,
                         ok ? ", pixels as expected" : ", pixels differ"));
}

CheckResult graph_io_counts(const ExpectationRow& row, const ExpectationOptions& o) {
  const container::Model m = container::read_tflite_file(existing(o.testdata / row.model));
  const auto& g = m.subgraphs.at(0);
  auto listed = [&](const std::string& key) {
    // "3 (input1 u8[1,8,8,3], inputs/rnn1 u8[1,8,8,1], ...)" -> names and shapes.
    const std::string v = text(row, key);
    std::vector<std::pair<std::string, std::string>> out;
    const size_t open = v.find('('), close = v.rfind(')');
    if (open == std::string::npos || close == std::string::npos) return out;
    std::string body = v.substr(open + 1, close - open - 1);
    // Split at commas outside brackets. Google abbreviates "a/x,y u8[...]" for a/x and a/y with
    // the same shape: a piece without a shape takes the next shape, a bare name the last prefix.
    int depth = 0;
    std::string cur, prefix;
    std::vector<std::string> pending;
    for (char c : body + ',') {
      if (c == '[') ++depth;
      if (c == ']') --depth;
      if (c == ',' && depth == 0) {
        const std::string item = trim(cur);
        const size_t sp = item.rfind(' ');
        std::string name = sp == std::string::npos ? item : item.substr(0, sp);
        if (name.find('/') == std::string::npos)
          name = prefix + name;
        else
          prefix = name.substr(0, name.rfind('/') + 1);
        pending.push_back(name);
        if (sp != std::string::npos) {
          for (const auto& n : pending) out.push_back({n, item.substr(sp + 1)});
          pending.clear();
        }
        cur.clear();
      } else {
        cur += c;
      }
    }
    return out;
  };
  auto describe = [&](int32_t index) {
    const auto& t = g.tensors.at(static_cast<size_t>(index));
    std::string s = t.type == TensorType::kUInt8 ? "u8[" : "?[";
    for (size_t i = 0; i < t.shape.size(); ++i) s += cat(i ? "," : "", t.shape[i]);
    return s + "]";
  };
  auto count_of = [&](const std::string& key) { return std::stoi(text(row, key)); };
  bool ok = static_cast<int>(g.inputs.size()) == count_of("inputs") &&
            static_cast<int>(g.outputs.size()) == count_of("outputs");
  std::string mismatch;
  for (auto [key, ids] : {std::pair{std::string("inputs"), &g.inputs},
                          std::pair{std::string("outputs"), &g.outputs}}) {
    const auto items = listed(key);
    for (const auto& [name, shape] : items) {
      bool found = false;
      for (int32_t id : *ids)
        if (g.tensors.at(static_cast<size_t>(id)).name == name && describe(id) == shape)
          found = true;
      if (!found) mismatch += cat(" ", name, " ", shape, ";");
    }
  }
  ok = ok && mismatch.empty();
  // "after_surgery_no_pairs=3 in/5 out": linking no pairs (then writing and reading the model back)
  // leaves the inputs and outputs as they were.
  std::string surgery;
  if (row.params.count("after_surgery_no_pairs")) {
    const auto& linked =
        container::read_tflite(container::write_tflite(container::append_recurrent_links(m, {})));
    const auto& lg = linked.subgraphs.at(0);
    const std::string got = cat(lg.inputs.size(), " in/", lg.outputs.size(), " out");
    ok = ok && got == text(row, "after_surgery_no_pairs");
    surgery = cat("; ", got, " after linking no pairs");
  }
  return verdict(
      ok, cat(g.inputs.size(), " inputs, ", g.outputs.size(), " outputs",
              mismatch.empty() ? " with the listed names and shapes" : ", missing:" + mismatch,
              surgery));
}

CheckResult repeatability(const ExpectationRow& row, const ExpectationOptions& o) {
  (void)row;
  int models = 0, errors = 0;
  std::string skipped;
  for (const char* gen : {"gen2020", "gen2021"}) {
    const fs::path dir = o.testdata / gen;
    if (!fs::exists(dir)) continue;
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().string().ends_with("_edgetpu.tflite")) files.push_back(e.path());
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      DeviceOpen open = o.device ? o.device(f) : DeviceOpen{};
      if (!open.session) continue;
      ModelSession& s = *open.session;
      std::default_random_engine rng(1);
      std::uniform_int_distribution<int> byte(0, 255);
      for (size_t i = 0; i < s.num_inputs(); ++i) {
        size_t n = container::tensor_type_size(s.input(i).type);
        for (int32_t d : s.input(i).shape) n *= static_cast<size_t>(d);
        std::vector<uint8_t> bytes(n);
        for (auto& b : bytes) b = static_cast<uint8_t>(byte(rng));
        s.set_input(i, bytes);
      }
      // Every run from the same state: a recurrent model (the Keras LSTM) carries its state from
      // one invoke to the next, so the same input gives other outputs by design.
      s.reset_state();
      s.invoke();
      std::vector<std::vector<uint8_t>> first;
      for (size_t i = 0; i < s.num_outputs(); ++i) {
        const auto b = s.output_bytes(i);
        first.emplace_back(b.begin(), b.end());
      }
      for (int r = 0; r < o.repeatability_runs; ++r) {
        s.reset_state();
        s.invoke();
        for (size_t i = 0; i < s.num_outputs(); ++i) {
          const auto b = s.output_bytes(i);
          if (!std::equal(b.begin(), b.end(), first[i].begin(), first[i].end())) ++errors;
        }
      }
      ++models;
    }
  }
  if (models == 0) throw Skip{"the device runs none of the *_edgetpu.tflite models"};
  return verdict(errors == 0, cat(models, " models x ", o.repeatability_runs, " runs, ", errors,
                                  " differing outputs"));
}

CheckResult resize_reference(const ExpectationRow& row, const ExpectationOptions& o) {
  const Image src = read_image(existing(data_file(o, row.image)));
  const int tol = static_cast<int>(number(row, "abs_tol"));
  std::string key;
  for (const auto& [k, v] : row.params)
    if (k.rfind("targets", 0) == 0) key = k;
  if (key.empty()) fail("no targets parameter");
  std::string detail;
  bool ok = true;
  for (const auto& target : split(text(row, key), ',')) {
    const auto [h, w] = parse_hxw(trim(target));
    const Image want =
        read_image(existing(o.testdata / "images" / cat("checker", h, "X", w, ".bmp")));
    const Image got = resize_image(src, w, h, ResizeMode::kBilinear);
    if (want.width != got.width || want.height != got.height || want.channels != got.channels)
      fail("checker ", h, "X", w, ": reference is ", want.height, "x", want.width, "x",
           want.channels);
    int worst = 0;
    size_t off = 0;
    for (size_t i = 0; i < got.pixels.size(); ++i) {
      const int d = std::abs(int{got.pixels[i]} - int{want.pixels[i]});
      worst = std::max(worst, d);
      if (d) ++off;
    }
    ok = ok && worst <= tol;
    detail += cat(detail.empty() ? "" : ", ", h, "x", w, ": max ", worst);
  }
  return verdict(ok, detail + cat(" (tol ", tol, ")"));
}

}  // namespace

CheckResult run_expectation(const ExpectationRow& row, const ExpectationOptions& options) {
  CheckResult r;
  try {
    const std::string& c = row.check;
    if (c == "classify_topk")
      r = classify_topk(row, options);
    else if (c == "class_score_gt")
      r = class_score_gt(row, options);
    else if (c == "segmentation_agreement")
      r = segmentation(row, options);
    else if (c == "segmentation_pair_agreement")
      r = segmentation_pair(row, options);
    else if (c == "posenet_legacy_keypoints")
      r = posenet_legacy(row, options);
    else if (c == "pose_reference_csv")
      r = pose_reference(row, options);
    else if (c == "detection_top1")
      r = detection_top1(row, options);
    else if (c == "bmp_decode")
      r = bmp_decode(row, options);
    else if (c == "graph_io_counts")
      r = graph_io_counts(row, options);
    else if (c == "repeatability")
      r = repeatability(row, options);
    else if (c == "resize_reference")
      r = resize_reference(row, options);
    else if (c == "append_fc_softmax")
      r = append_fc_softmax(row, options);
    else if (c == "graph_surgery_io_counts")
      r = graph_surgery_io_counts(row, options);
    else if (c == "recurrent_sequence_equivalence")
      r = recurrent_sequence_equivalence(row, options);
    else
      throw Skip{"unknown check kind"};
  } catch (const Skip& s) {
    r.status = CheckStatus::kSkip;
    r.detail = s.why;
  } catch (const std::exception& e) {
    r.status = CheckStatus::kFail;
    r.detail = e.what();
  }
  r.id = row.id;
  r.model = row.model;
  r.check = row.check;
  return r;
}

std::vector<CheckResult> run_expectations(const std::vector<ExpectationRow>& rows,
                                          const ExpectationOptions& options) {
  std::vector<CheckResult> out;
  for (const auto& row : rows) out.push_back(run_expectation(row, options));
  return out;
}

std::string format_expectation_table(const std::vector<CheckResult>& results) {
  auto shorten = [](std::string s, size_t n) {
    if (s.size() > n) s = "..." + s.substr(s.size() - (n - 3));
    return s;
  };
  std::ostringstream out;
  out << std::left << std::setw(6) << "row" << std::setw(50) << "model" << std::setw(31) << "check"
      << std::setw(6) << "result"
      << "detail\n";
  int pass = 0, fail_n = 0, skip = 0;
  for (const auto& r : results) {
    out << std::setw(6) << r.id << std::setw(50) << shorten(r.model, 48) << std::setw(31) << r.check
        << std::setw(6) << check_status_name(r.status) << r.detail << "\n";
    (r.status == CheckStatus::kPass ? pass : r.status == CheckStatus::kFail ? fail_n : skip)++;
  }
  out << pass << " passed, " << fail_n << " failed, " << skip << " skipped\n";
  return out.str();
}

std::optional<CheckResult> run_expectation_on_ours(const fs::path& testdata,
                                                   const std::string& row_id,
                                                   std::span<const uint8_t> ours, Device device,
                                                   std::string& why) {
  fs::path tsv = testdata.parent_path() / "reference" / "google_expectations.tsv";
  if (!fs::exists(tsv))
    tsv = testing::source_dir().parent_path() / "shared" / "reference" / "google_expectations.tsv";
  if (!fs::exists(tsv)) {
    why = "google_expectations.tsv not found";
    return std::nullopt;
  }
  std::optional<ExpectationRow> row;
  for (auto& candidate : read_expectations_tsv(tsv))
    if (candidate.id == row_id) row = std::move(candidate);
  if (!row) fail("google_expectations.tsv has no row ", row_id);
  const fs::path file = fs::temp_directory_path() /
                        ("tinycoral_" + row_id + "_ours_" + std::to_string(::getpid()) + ".tflite");
  write_file(file, ours);
  row->model = file.string();
  ExpectationOptions options;
  options.testdata = testdata;
  options.device = std::move(device);
  CheckResult result = run_expectation(*row, options);
  fs::remove(file);
  return result;
}

}  // namespace tinycoral::host
