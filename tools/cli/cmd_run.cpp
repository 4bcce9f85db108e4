// `tinycoral run`: runs a TFLite model on an image or raw input bytes and prints what it computed
// (top-K classes, raw output bytes, or JSON). The device is one switch: every device runs the same
// host::Interpreter; a device other than the CPU only contributes kernel delegates (e.g. for
// "edgetpu-custom-op") through options_for_device() below. On the virtual Edge TPU, --trace writes
// every executed instruction and --json adds the simulator's statistics.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "container/tflite_reader.h"
#include "host/image.h"
#include "host/interpreter.h"
#include "host/labels.h"
#include "host/scores.h"
#include "isa/isa.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"
#include "runtime/stick_time.h"

namespace tinycoral::cli {

namespace {

struct RunArgs {
  std::string model, image, input, device = "auto", rounding = "tflite", labels, output_file;
  std::string resize = "bilinear", normalize;
  int top = 0;
  bool json = false;
  std::string firmware;                   // --firmware (a stick in bootloader mode needs it)
  std::shared_ptr<runtime::EdgeTpu> tpu;  // the Edge TPU behind --device, if any
  std::string device_note;                // what --device auto picked
  std::string trace;                      // --trace FILE (virtual Edge TPU only)
  std::shared_ptr<chip::VirtualEdgeTpu> sim_chip;
};

class TraceFile;
TraceFile* trace_file = nullptr;  // --trace's file, once opened

// One line per executed instruction: program, word offset, mnemonic, tile ("-" on the scalar
// side), unit, and the clock's start and finish cycles (since the program started).
class TraceFile : public chip::TraceSink {
 public:
  explicit TraceFile(const std::string& path) : path_(path), out_(path) {
    if (!out_) fail("cannot write the trace file ", path);
    out_ << "# program word mnemonic tile unit start finish (modeled cycles)\n";
  }
  // Flushes and closes the file; a failed write (a full disk) is an Error.
  void finish() {
    out_.close();
    if (out_.fail()) fail(path_, ": writing the trace failed");
  }
  void record(const chip::TraceRecord& r) override {
    const isa::OpcodeSpec* spec = isa::find_opcode(r.opcode);
    out_ << r.program << ' ' << r.word_offset << ' ';
    if (spec)
      out_ << spec->mnemonic;
    else
      out_ << "op" << int(r.opcode);
    out_ << ' ';
    if (r.tile < 0)
      out_ << '-';
    else
      out_ << r.tile;
    out_ << ' ' << r.unit << ' ' << r.start << ' ' << r.finish << '\n';
  }

 private:
  std::string path_;
  std::ofstream out_;
};

bool has_edgetpu_op(const container::Model& model) {
  return std::any_of(
      model.operator_codes.begin(), model.operator_codes.end(),
      [](const container::OperatorCode& c) { return c.custom_code == "edgetpu-custom-op"; });
}

nlohmann::json chip_stats_json(const chip::ChipStats& s) {
  nlohmann::json units;
  for (size_t u = 0; u < s.instructions.size(); ++u)
    if (s.instructions[u] != 0)
      units[chip::unit_name(static_cast<chip::UnitId>(u))] = s.instructions[u];
  return {{"instructions", units},
          {"macs", s.macs},
          {"host_in_bytes", s.host_in_bytes},
          {"host_out_bytes", s.host_out_bytes},
          {"ring_bytes", s.ring_bytes},
          {"mesh_bytes", s.mesh_bytes},
          {"narrow_bytes_read", s.narrow_bytes_read},
          {"narrow_bytes_written", s.narrow_bytes_written},
          {"wide_bytes_read", s.wide_bytes_read},
          {"wide_bytes_written", s.wide_bytes_written},
          {"programs_completed", s.programs_completed}};
}

// The modeled time of one program run on a real stick (src/runtime/stick_time.h), with its parts.
nlohmann::json stick_time_json(const runtime::ProgramRun& run) {
  const runtime::StickTime t = runtime::stick_time(run);
  nlohmann::json busy;
  for (size_t u = 0; u < run.busy_cycles.size(); ++u)
    busy[chip::clock_unit_name(static_cast<chip::ClockUnit>(u))] = run.busy_cycles[u];
  return {{"250MHz", t.total_ms_high()},
          {"500MHz", t.total_ms_max()},
          {"compute_250MHz", t.compute_ms_high},
          {"compute_500MHz", t.compute_ms_max},
          {"cycles", run.cycles},
          {"busy_cycles", busy},
          {"usb_host_to_device", t.to_device_ms},
          {"usb_device_to_host", t.from_device_ms},
          {"per_run", t.per_run_ms},
          {"bytes_host_to_device", run.bytes_to_device},
          {"bytes_device_to_host", run.bytes_from_device}};
}

// The interpreter options of a device. "cpu" runs every operator on the host; devices that run
// part of the model elsewhere add their delegates to options.delegates here.
host::InterpreterOptions options_for_device(RunArgs& a, const container::Model& model) {
  host::InterpreterOptions options;
  if (a.rounding == "tflite")
    options.rounding = host::Rounding::kTflite;
  else if (a.rounding == "edgetpu")
    options.rounding = host::Rounding::kEdgeTpu;
  else
    fail("unknown --rounding '", a.rounding, "' (tflite or edgetpu)");
  runtime::DeviceChoice choice = runtime::parse_device(a.device);
  // auto on a model with nothing for the Edge TPU: the CPU, without opening a device.
  if (choice.kind == runtime::DeviceChoice::Kind::kAuto && !has_edgetpu_op(model)) {
    a.device = "cpu";
    choice = runtime::parse_device(a.device);
  }
  runtime::DeviceOptions device_options;
  device_options.firmware = a.firmware;
  if (choice.kind == runtime::DeviceChoice::Kind::kSim ||
      choice.kind == runtime::DeviceChoice::Kind::kAuto) {
    chip::ChipOptions chip_options;
    if (!a.trace.empty()) {
      static std::unique_ptr<TraceFile> trace;  // lives until the process ends
      trace = std::make_unique<TraceFile>(a.trace);
      chip_options.trace = trace.get();
      trace_file = trace.get();
    }
    a.sim_chip = std::make_shared<chip::VirtualEdgeTpu>(chip_options);
    device_options.sim_chip = a.sim_chip;
  }
  a.tpu = runtime::open_edgetpu(choice, device_options, &a.device_note);
  if (a.tpu) runtime::add_edgetpu_delegate(options.delegates, a.tpu);
  if (a.tpu && choice.kind == runtime::DeviceChoice::Kind::kAuto)
    a.device = a.tpu->is_virtual() ? "sim" : "usb";
  if (!a.device_note.empty()) std::cerr << a.device_note << "\n";
  return options;
}

// A full disk or a closed pipe behind stdout is an error too, not a silent exit 0.
void check_stdout() {
  std::cout.flush();
  if (!std::cout) fail("writing the results to standard output failed");
}

void set_inputs(host::Interpreter& interp, const RunArgs& a) {
  if (!a.image.empty()) {
    if (interp.num_inputs() != 1)
      fail("--image needs a model with one input, this one has ", interp.num_inputs());
    const host::TensorView in = interp.input(0);
    const host::Image img = host::read_image(a.image);
    const host::Normalization norm =
        a.normalize.empty() ? host::Normalization{} : host::parse_normalization(a.normalize);
    const auto bytes = with_context(a.image, [&] {
      return host::image_to_input(img, in.shape(), in.type(), host::parse_resize_mode(a.resize),
                                  norm);
    });
    interp.set_input(0, bytes);
    return;
  }
  size_t total = 0;
  for (size_t i = 0; i < interp.num_inputs(); ++i) total += interp.input(i).bytes;
  // A file of the wrong size is refused before it is read (it might be huge).
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(a.input, ec);
  if (!ec && size != total)
    fail(a.input, ": ", size, " bytes, but the model's inputs take ", total);
  const std::vector<uint8_t> raw =
      read_file(a.input, std::min<uint64_t>(total, limits::kMaxInputFileBytes));
  if (raw.size() != total)
    fail(a.input, ": ", raw.size(), " bytes, but the model's inputs take ", total);
  size_t at = 0;
  for (size_t i = 0; i < interp.num_inputs(); ++i) {
    const size_t n = interp.input(i).bytes;
    interp.set_input(i, std::span<const uint8_t>(raw).subspan(at, n));
    at += n;
  }
}

void run(RunArgs& a) {
  if (a.image.empty() == a.input.empty()) fail("give exactly one of --image IMG or --input RAW");
  if (a.top < 0) fail("--top must be >= 0");
  container::Model model = container::read_tflite_file(a.model);
  host::InterpreterOptions options = options_for_device(a, model);
  if (!a.trace.empty() && !(a.tpu && a.tpu->is_virtual()))
    fail("--trace needs the virtual Edge TPU (--device sim, or auto without a stick)");
  host::Interpreter interp = with_context(
      a.model, [&] { return host::Interpreter(std::move(model), std::move(options)); });
  host::Labels labels;
  if (!a.labels.empty()) labels = host::Labels::read(a.labels);
  set_inputs(interp, a);

  if (a.tpu) a.tpu->reset_counters();
  const uint64_t chip_ns_before = a.tpu ? a.tpu->simulated_chip_ns() : 0;
  const auto start = std::chrono::steady_clock::now();
  interp.invoke();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  // The host's share: wall time minus the time spent simulating the chip (0 on a real stick).
  const double chip_ms = a.tpu ? double(a.tpu->simulated_chip_ns() - chip_ns_before) / 1e6 : 0.0;

  if (trace_file) trace_file->finish();
  if (!a.output_file.empty()) {
    std::vector<uint8_t> all;
    for (size_t i = 0; i < interp.num_outputs(); ++i) {
      const auto b = interp.output_bytes(i);
      all.insert(all.end(), b.begin(), b.end());
    }
    write_file(a.output_file, all);
  }
  std::vector<size_t> best;
  std::vector<double> first;
  if (a.top > 0 && interp.num_outputs() > 0) {
    first = host::dequantized_values(interp.output(0));
    best = host::top_k(first, static_cast<size_t>(a.top));
  }
  if (a.json) {
    nlohmann::json j;
    j["device"] = a.device;
    j["rounding"] = a.rounding;
    j["outputs"] = nlohmann::json::array();
    for (size_t i = 0; i < interp.num_outputs(); ++i) {
      const host::TensorView t = interp.output(i);
      j["outputs"].push_back({{"name", t.name()},
                              {"shape", t.shape()},
                              {"dtype", container::tensor_type_name(t.type())},
                              {"scale", t.quantized() ? t.scale() : 0.0f},
                              {"zero_point", t.quantized() ? t.zero_point() : 0},
                              {"values", host::dequantized_values(t)}});
    }
    j["top"] = nlohmann::json::array();
    for (size_t i : best)
      j["top"].push_back(
          {{"index", i}, {"score", first[i]}, {"label", labels.at(static_cast<int64_t>(i))}});
    j["time_ms"] = ms;
    if (a.tpu) {
      const auto& c = a.tpu->counters();
      j["edgetpu"] = a.tpu->description();
      j["usb"] = {{"bulk_out_bytes", c.bulk_out_bytes},
                  {"bulk_in_bytes", c.bulk_in_bytes},
                  {"control_transfers", c.control_transfers}};
      j["host_time_us"] = (ms - chip_ms) * 1000.0;
      j["simulated_chip_time_ms"] = chip_ms;
      if (a.tpu->is_virtual() && a.sim_chip) j["simulator"] = chip_stats_json(a.sim_chip->stats());
      // The inference's program as a real stick would run it again and again (parameters
      // resident); the caching program's one-time cost apart, when it ran.
      const auto& last = a.tpu->last_run();
      if (a.tpu->is_virtual() && last.inference.ran) {
        j["modeled_stick_ms"] = stick_time_json(last.inference);
        if (last.caching.ran)
          j["modeled_stick_ms"]["parameter_caching"] = stick_time_json(last.caching);
      }
    }
    std::cout << j.dump() << "\n";
    check_stdout();
    return;
  }
  for (size_t i : best) {
    char score[32];
    std::snprintf(score, sizeof score, "%.6f", first[i]);
    std::cout << i << " " << score;
    const std::string label = labels.at(static_cast<int64_t>(i));
    if (!label.empty()) std::cout << " " << label;
    std::cout << "\n";
  }
  check_stdout();
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "run a TFLite model on an image or raw input bytes");
  cmd->add_option("model", args->model, "the .tflite model")->required();
  auto* image = cmd->add_option("--image", args->image,
                                "input image (BMP, PNG or JPEG), resized to the input");
  auto* input =
      cmd->add_option("--input", args->input, "raw bytes of every input tensor, in order");
  image->excludes(input);
  cmd->add_option("--device", args->device,
                  "where to run: auto (a stick if plugged in, else sim), usb, usb:N, sim, cpu")
      ->capture_default_str();
  cmd->add_option("--trace", args->trace,
                  "write every instruction the virtual Edge TPU executes to FILE");
  cmd->add_option("--firmware", args->firmware,
                  "path of apex_latest_single_ep.bin for a stick in bootloader mode");
  cmd->add_option("--rounding", args->rounding,
                  "CPU arithmetic: tflite (TFLite's) or edgetpu (the chip's)")
      ->capture_default_str();
  cmd->add_option("--top", args->top,
                  "print the K best classes of the first output: INDEX SCORE LABEL");
  cmd->add_option("--labels", args->labels, "labels file ('INDEX LABEL' or one label per line)");
  cmd->add_option("--output-file", args->output_file,
                  "write the raw bytes of every output, in order");
  cmd->add_flag("--json", args->json, "print outputs (dequantized), top classes and time as JSON");
  cmd->add_option("--resize", args->resize,
                  "bilinear (libcoral), bilinear-legacy, nearest (Pillow), none")
      ->capture_default_str();
  cmd->add_option("--normalize", args->normalize,
                  "SCALE,MEAN: v' = (v - MEAN) / SCALE, truncated to 0..255");
  cmd->callback([args] { run(*args); });
}

}  // namespace tinycoral::cli
