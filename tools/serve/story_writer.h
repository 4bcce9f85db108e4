// The Write view's engine: a llama2.c checkpoint and its tokenizer, loaded once, writing one story
// at a time exactly as `tinycoral generate` does (same sampler, same seed rules, same pieces), so
// that a prompt and a seed give the same text in the browser and on the command line. Without a
// checkpoint it writes with a small random one made in memory (noise, and the page says so).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "llm/checkpoint.h"
#include "llm/thread_pool.h"
#include "llm/tokenizer.h"
#include "llm/transformer.h"

namespace tinycoral::serve {

struct StoryRequest {
  std::string prompt;
  float temperature = 1.0f, topp = 0.9f;
  uint64_t seed = 0;  // 0: the time (run.c's rule)
  int steps = 256;    // positions, prompt included; 0 or more than seq_len: seq_len
};

struct StoryResult {
  int tokens = 0;     // prompt and story, BOS included
  int positions = 0;  // forward passes run
  double tokens_per_second = 0;
  uint64_t seed = 0;
  bool stopped = false;  // the listener asked to stop
};

class StoryWriter {
 public:
  // `checkpoint` empty: a random one (fixed seed) with the tokenizer's vocabulary. `tokenizer`
  // empty: tokenizer.bin beside the checkpoint, else in the working directory.
  StoryWriter(const std::string& checkpoint, const std::string& tokenizer, int threads = 0);
  ~StoryWriter();

  bool random_checkpoint() const { return random_; }
  std::string description() const;  // the checkpoint's shapes
  int seq_len() const { return ck_.config.seq_len; }
  int threads() const { return threads_; }

  // Throws Error when the prompt does not fit in seq_len (checked before the request waits).
  void check_prompt(const std::string& prompt) const;

  // Writes a story; each piece of text goes to `piece` as it is made. When `piece` returns false
  // (the client went away) the story stops there. Throws Error for a prompt that does not fit.
  StoryResult write(const StoryRequest& request,
                    const std::function<bool(const std::string& piece)>& piece);

 private:
  llm::Checkpoint ck_;
  bool random_ = false;
  int threads_ = 1;
  std::unique_ptr<llm::Tokenizer> tokenizer_;
  std::unique_ptr<llm::ThreadPool> pool_;
  std::unique_ptr<llm::Transformer> model_;
};

// A llama2.c model with random weights (normal, scaled by fan-in) and small shapes: dim 64, two
// layers, grouped-query attention, `vocab_size` tokens, seq_len 256. The same seed gives the same
// weights.
llm::Checkpoint random_checkpoint(int vocab_size, uint64_t seed);

}  // namespace tinycoral::serve
