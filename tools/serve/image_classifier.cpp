#include "image_classifier.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <numeric>

#include "chip/tile.h"
#include "common/error.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/scores.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "runtime/stick_time.h"

namespace tinycoral::serve {

namespace {

namespace fs = std::filesystem;

bool has_edgetpu_op(const container::Model& model) {
  return std::any_of(
      model.operator_codes.begin(), model.operator_codes.end(),
      [](const container::OperatorCode& c) { return c.custom_code == "edgetpu-custom-op"; });
}

struct TileSnapshot {
  std::array<chip::TileStats, chip::kTileCount> tiles{};
  chip::ChipStats chip;
};

TileSnapshot snapshot(const chip::VirtualEdgeTpu& c) {
  TileSnapshot s;
  for (uint32_t t = 0; t < chip::kTileCount; ++t) s.tiles[t] = c.tile(t).stats;
  s.chip = c.stats();
  return s;
}

nlohmann::json stick_time_json(const runtime::ProgramRun& run) {
  const runtime::StickTime t = runtime::stick_time(run);
  nlohmann::json busy;
  for (size_t u = 0; u < run.busy_cycles.size(); ++u)
    busy[chip::clock_unit_name(static_cast<chip::ClockUnit>(u))] = run.busy_cycles[u];
  return {{"total_ms_250MHz", t.total_ms_high()},
          {"total_ms_500MHz", t.total_ms_max()},
          {"compute_ms_250MHz", t.compute_ms_high},
          {"usb_to_device_ms", t.to_device_ms},
          {"usb_from_device_ms", t.from_device_ms},
          {"per_run_ms", t.per_run_ms},
          {"cycles", run.cycles},
          {"busy_cycles", busy}};
}

// What the virtual chip did between two snapshots, tile by tile.
nlohmann::json chip_json(const TileSnapshot& a, const TileSnapshot& b) {
  nlohmann::json tiles = nlohmann::json::array();
  for (uint32_t t = 0; t < chip::kTileCount; ++t) {
    const chip::TileStats &x = a.tiles[t], &y = b.tiles[t];
    tiles.push_back({{"tile", t},
                     {"macs", y.macs - x.macs},
                     {"narrow_bytes", (y.narrow_bytes_read - x.narrow_bytes_read) +
                                          (y.narrow_bytes_written - x.narrow_bytes_written)},
                     {"wide_bytes", (y.wide_bytes_read - x.wide_bytes_read) +
                                        (y.wide_bytes_written - x.wide_bytes_written)}});
  }
  const chip::ChipStats &x = a.chip, &y = b.chip;
  return {{"tiles", tiles},
          {"macs", y.macs - x.macs},
          {"ring_bytes", y.ring_bytes - x.ring_bytes},
          {"mesh_bytes", y.mesh_bytes - x.mesh_bytes},
          {"host_in_bytes", y.host_in_bytes - x.host_in_bytes},
          {"host_out_bytes", y.host_out_bytes - x.host_out_bytes}};
}

}  // namespace

ImageClassifier::ImageClassifier(ClassifierOptions options, DeviceAccess access)
    : options_(std::move(options)), access_(std::move(access)) {
  runtime::parse_device(options_.device);  // a bad --device is a startup error
  if (!options_.labels.empty()) labels_ = host::Labels::read(options_.labels);
  if (options_.model.empty()) return;
  if (!fs::is_regular_file(options_.model)) fail("--model ", options_.model, ": no such file");
  const fs::path path(options_.model);
  model_dir_ = path.parent_path().string();
  default_model_ = path.filename().string();
  models_.push_back(default_model_);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(model_dir_.empty() ? "." : model_dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name != default_model_ && name.ends_with("_edgetpu.tflite") && entry.is_regular_file())
      models_.push_back(name);
  }
  std::sort(models_.begin() + 1, models_.end());
}

ImageClassifier::~ImageClassifier() = default;

void ImageClassifier::release() {
  interpreter_.reset();
  tpu_.reset();
  sim_chip_.reset();
  open_model_.clear();
  open_device_.clear();
}

void ImageClassifier::open(const std::string& model, const std::string& device) {
  if (interpreter_ && open_model_ == model && open_device_ == device) return;
  release();
  container::Model m = container::read_tflite_file(fs::path(model_dir_) / model);
  host::InterpreterOptions options;
  runtime::DeviceChoice choice = runtime::parse_device(device);
  if (choice.kind == runtime::DeviceChoice::Kind::kAuto && !has_edgetpu_op(m))
    choice.kind = runtime::DeviceChoice::Kind::kCpu;
  runtime::DeviceOptions device_options;
  device_options.firmware = options_.firmware;
  if (choice.kind == runtime::DeviceChoice::Kind::kSim ||
      choice.kind == runtime::DeviceChoice::Kind::kAuto) {
    sim_chip_ = std::make_shared<chip::VirtualEdgeTpu>();
    device_options.sim_chip = sim_chip_;
  }
  tpu_ = access_.open(choice, device_options);
  if (tpu_) runtime::add_edgetpu_delegate(options.delegates, tpu_);
  device_used_ = device_name(tpu_.get());
  if (device_used_ != "sim") sim_chip_.reset();
  interpreter_ = std::make_unique<host::Interpreter>(
      with_context(model, [&] { return host::Interpreter(std::move(m), std::move(options)); }));
  if (interpreter_->num_inputs() != 1 || interpreter_->num_outputs() < 1) {
    release();
    fail(model, ": not an image classifier (needs one input and a scores output)");
  }
  open_model_ = model;
  open_device_ = device;
}

nlohmann::json ImageClassifier::classify(const host::Image& image, const std::string& model,
                                         const std::string& device) {
  const std::string name = model.empty() ? default_model_ : model;
  if (models_.empty()) fail("no model: start tinycoral serve with --model M_edgetpu.tflite");
  if (std::find(models_.begin(), models_.end(), name) == models_.end())
    fail("unknown model '", name, "'");
  const std::string dev = device.empty() ? options_.device : device;
  try {
    open(name, dev);
  } catch (const Error&) {
    release();
    throw;
  }
  const host::TensorView in = interpreter_->input(0);
  interpreter_->set_input(
      0, host::image_to_input(image, in.shape(), in.type(), host::ResizeMode::kBilinear, {}));
  TileSnapshot before;
  if (sim_chip_) before = snapshot(*sim_chip_);
  if (tpu_) tpu_->reset_counters();
  const auto start = std::chrono::steady_clock::now();
  try {
    interpreter_->invoke();
  } catch (const Error& e) {
    // A stick pulled out, a chip fault: start over with a fresh session next time.
    const std::string what = device_used_;
    release();
    fail("the ", what == "usb" ? "stick" : what, " failed: ", e.what());
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::vector<double> s = host::dequantized_values(interpreter_->output(0));
  nlohmann::json top = nlohmann::json::array();
  for (size_t i : host::top_k(s, 5))
    top.push_back({{"index", i}, {"score", s[i]}, {"label", labels_.at(static_cast<int64_t>(i))}});
  nlohmann::json chip = {{"device", device_used_}, {"model", name}, {"time_ms", ms}};
  if (tpu_) {
    const auto& c = tpu_->counters();
    chip["edgetpu"] = tpu_->description();
    chip["usb"] = {{"to_device_bytes", c.bulk_out_bytes}, {"from_device_bytes", c.bulk_in_bytes}};
  }
  if (sim_chip_) {
    chip["sim"] = chip_json(before, snapshot(*sim_chip_));
    const auto& last = tpu_->last_run();
    if (last.inference.ran) chip["modeled_stick"] = stick_time_json(last.inference);
  }
  last_chip_ = chip;
  nlohmann::json result = {
      {"device", device_used_}, {"model", name}, {"top", top}, {"time_ms", ms}};
  if (chip.contains("modeled_stick"))
    result["modeled_stick_ms"] = chip["modeled_stick"]["total_ms_250MHz"];
  return result;
}

}  // namespace tinycoral::serve
