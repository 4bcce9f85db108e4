#include "story_writer.h"

#include <algorithm>
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

StoryWriter::StoryWriter(const std::string& checkpoint, const std::string& tokenizer, int threads) {
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

StoryResult StoryWriter::write(const StoryRequest& request,
                               const std::function<bool(const std::string& piece)>& piece) {
  StoryResult result;
  // `tinycoral generate`'s rules: seed 0 is the time.
  result.seed = request.seed == 0 ? static_cast<unsigned>(std::time(nullptr)) : request.seed;
  llm::Sampler sampler(request.temperature, request.topp, result.seed);
  model_->set_argmax_only(sampler.temperature() == 0.0f);
  try {
    const llm::GenerateResult r =
        llm::generate(*model_, *tokenizer_, sampler, request.prompt,
                      request.steps < 0 ? 0 : request.steps, [&](const std::string& text) {
                        if (!piece(text)) throw Stopped{};
                      });
    result.tokens = static_cast<int>(r.tokens.size());
    result.positions = r.positions;
    result.tokens_per_second = r.tokens_per_second;
  } catch (const Stopped&) {
    result.stopped = true;
  }
  return result;
}

}  // namespace tinycoral::serve
