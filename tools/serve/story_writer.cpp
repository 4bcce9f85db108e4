#include "story_writer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <random>
#include <thread>

#include "common/error.h"
#include "llm/generate.h"
#include "llm/sampler.h"

namespace tinycoral::serve {

namespace {

// The Llama 2 tokenizer's size: a random checkpoint matches tokenizer.bin without reading it twice.
constexpr int kLlamaVocab = 32000;

// `tinycoral generate`'s default --calibration: the same ranges give the same int8 text.
constexpr int kCalibrationPositions = 64;

// Thrown from the piece callback to leave llm::generate when the listener is gone.
struct Stopped {};

std::string find_tokenizer(const std::string& checkpoint, const std::string& given) {
  if (!given.empty()) return given;
  if (!checkpoint.empty()) {
    const auto beside = std::filesystem::path(checkpoint).parent_path() / "tokenizer.bin";
    if (std::filesystem::exists(beside)) return beside.string();
  }
  return "tokenizer.bin";
}

}  // namespace

llm::Checkpoint random_checkpoint(int vocab_size, uint64_t seed) {
  llm::Checkpoint ck;
  llm::Config& c = ck.config;
  c = {.dim = 64,
       .hidden_dim = 172,
       .n_layers = 2,
       .n_heads = 8,
       .n_kv_heads = 4,
       .vocab_size = vocab_size,
       .seq_len = 256,
       .shared_classifier = true};
  std::mt19937_64 rng(seed);
  const auto random = [&](size_t n, int fan_in) {
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(float(fan_in)));
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  const auto gains = [&](size_t n) {
    std::normal_distribution<float> normal(1.0f, 0.1f);
    std::vector<float> v(n);
    for (float& x : v) x = normal(rng);
    return v;
  };
  const size_t dim = size_t(c.dim), hidden = size_t(c.hidden_dim), kv = size_t(c.kv_dim());
  ck.token_embedding = random(size_t(vocab_size) * dim, 100);  // small: the layers dominate
  for (int l = 0; l < c.n_layers; ++l) {
    llm::LayerWeights w;
    w.rms_att = gains(dim);
    w.rms_ffn = gains(dim);
    w.wq = random(dim * dim, c.dim);
    w.wk = random(kv * dim, c.dim);
    w.wv = random(kv * dim, c.dim);
    w.wo = random(dim * dim, c.dim);
    w.w1 = random(hidden * dim, c.dim);
    w.w3 = random(hidden * dim, c.dim);
    w.w2 = random(dim * hidden, c.hidden_dim);
    ck.layers.push_back(std::move(w));
  }
  ck.rms_final = gains(dim);
  return ck;
}

StoryWriter::StoryWriter(const std::string& checkpoint, const std::string& tokenizer, int threads,
                         const std::string& device, DeviceAccess access)
    : default_device_(device), access_(std::move(access)) {
  runtime::parse_device(device);  // a bad --device is a startup error
  if (checkpoint.empty()) {
    ck_ = serve::random_checkpoint(kLlamaVocab, 1);
    random_ = true;
  } else {
    ck_ = llm::load_checkpoint(checkpoint);
  }
  const std::string tok_path = find_tokenizer(checkpoint, tokenizer);
  if (!std::filesystem::exists(tok_path))
    fail("no tokenizer: ", tok_path, " does not exist (give -z tokenizer.bin, llama2.c's)");
  tokenizer_ =
      std::make_unique<llm::Tokenizer>(llm::Tokenizer::load(tok_path, ck_.config.vocab_size));
  threads_ = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  pool_ = std::make_unique<llm::ThreadPool>(threads_);
  model_ = std::make_unique<llm::Transformer>(ck_, *pool_);
}

StoryWriter::~StoryWriter() = default;

std::string StoryWriter::description() const {
  return (random_ ? std::string("random weights, ") : std::string()) + llm::describe(ck_);
}

void StoryWriter::check_prompt(const std::string& prompt) const {
  const size_t tokens = tokenizer_->encode(prompt).size();
  if (tokens > size_t(seq_len()))
    fail("the prompt is ", tokens, " tokens, more than the checkpoint's seq_len ", seq_len());
}

void StoryWriter::release() {
  chip_model_.reset();  // before the device it runs on
  tpu_.reset();
  tpu_spec_.clear();
  use_chip_ = false;
}

std::string StoryWriter::open(const std::string& device) {
  const std::string spec = device.empty() ? default_device_ : device;
  runtime::DeviceChoice choice = runtime::parse_device(spec);
  if (choice.kind == runtime::DeviceChoice::Kind::kAuto)  // generate's rule: a stick, else the CPU
    choice.kind = access_.stick_present() ? runtime::DeviceChoice::Kind::kUsb
                                          : runtime::DeviceChoice::Kind::kCpu;
  use_chip_ = choice.kind != runtime::DeviceChoice::Kind::kCpu;
  if (!use_chip_) return "cpu";
  const std::string key = choice.kind == runtime::DeviceChoice::Kind::kSim ? "sim"
                          : choice.index < 0                               ? "usb"
                                             : cat("usb:", choice.index);
  if (tpu_ && tpu_spec_ == key) return device_name(tpu_.get());
  release();
  try {
    if (!calibration_)
      calibration_ =
          std::make_unique<llm::Calibration>(llm::calibrate(ck_, *pool_, kCalibrationPositions));
    tpu_ = access_.open(choice, {});
    if (!tpu_) fail("no Edge TPU for device '", spec, "'");
    chip_model_ = std::make_unique<llm::ChipTransformer>(ck_, *pool_, *calibration_, *tpu_);
  } catch (const Error& e) {
    release();
    fail("cannot open ", spec, " for stories: ", e.what());
  }
  tpu_spec_ = key;
  use_chip_ = true;
  return device_name(tpu_.get());
}

StoryResult StoryWriter::write(const StoryRequest& request,
                               const std::function<bool(const std::string& piece)>& piece) {
  StoryResult result;
  // `tinycoral generate`'s rules: seed 0 is the time.
  result.seed = request.seed == 0 ? static_cast<unsigned>(std::time(nullptr)) : request.seed;
  llm::Sampler sampler(request.temperature, request.topp, result.seed);
  llm::Transformer& model = use_chip_ ? *chip_model_ : *model_;
  model.set_argmax_only(sampler.temperature() == 0.0f);
  result.device = use_chip_ ? device_name(tpu_.get()) : "cpu";
  // The chip path's counters run on over the session: the story's share is the difference.
  llm::ChipPathStats before;
  if (use_chip_) before = chip_model_->stats();
  const auto start = std::chrono::steady_clock::now();
  try {
    const llm::GenerateResult r =
        llm::generate(model, *tokenizer_, sampler, request.prompt,
                      request.steps < 0 ? 0 : request.steps, [&](const std::string& text) {
                        if (!piece(text)) throw Stopped{};
                      });
    result.tokens = static_cast<int>(r.tokens.size());
    result.positions = r.positions;
    result.tokens_per_second = r.tokens_per_second;
  } catch (const Stopped&) {
    result.stopped = true;
    return result;
  } catch (const Error& e) {
    if (!use_chip_) throw;
    // A stick pulled out, a chip fault: the session is closed and the next story opens it again.
    const std::string what = result.device == "usb" ? "the stick" : "the virtual Edge TPU";
    release();
    fail(what, " failed: ", e.what());
  }
  if (use_chip_) {
    const double wall_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const llm::ChipPathStats& after = chip_model_->stats();
    result.matmuls_on_chip = after.chip_matmuls;
    result.matmuls_on_host = after.host_matmuls;
    const double stick_s = (after.modeled.total_ms_high() - before.modeled.total_ms_high()) / 1e3;
    if (tpu_->is_virtual() && stick_s > 0 && result.positions > 0) {
      const double host_s = std::max(0.0, wall_s - (after.chip_wall_s - before.chip_wall_s));
      result.modeled_stick_tokens_per_second = result.positions / stick_s;
      result.modeled_tokens_per_second_with_host = result.positions / (stick_s + host_s);
    }
  }
  return result;
}

}  // namespace tinycoral::serve
