#include "llm/generate.h"

#include <chrono>

#include "common/error.h"

namespace tinycoral::llm {

GenerateResult generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                        std::string_view prompt, int steps,
                        const std::function<void(const std::string&)>& emit,
                        const StepObserver& observe) {
  const int seq_len = model.config().seq_len;
  if (steps <= 0 || steps > seq_len) steps = seq_len;
  // Every token covers at most max_token_length bytes of " " + prompt: refuse hopeless prompts
  // before the quadratic merge loop sees them.
  const size_t fits = size_t(seq_len) * size_t(tokenizer.max_token_length());
  if (prompt.size() >= fits)
    fail("the prompt (", prompt.size(), " bytes) cannot fit in seq_len ", seq_len, " tokens");
  GenerateResult r;
  r.tokens = tokenizer.encode(prompt);
  r.prompt_tokens = static_cast<int>(r.tokens.size());
  if (r.prompt_tokens > seq_len)
    fail("the prompt is ", r.prompt_tokens, " tokens with BOS, more than seq_len ", seq_len);
  std::vector<float> copy;
  using Clock = std::chrono::steady_clock;
  Clock::time_point start;
  int token = r.tokens[0];
  int pos = 0;
  while (pos < steps) {
    std::span<float> logits = model.forward(token, pos);
    if (observe) copy.assign(logits.begin(), logits.end());
    int next = pos < r.prompt_tokens - 1 ? r.tokens[size_t(pos) + 1] : sampler.sample(logits);
    if (observe) next = observe(pos, copy, next);
    ++pos;
    if (next == kBos) break;
    if (pos >= r.prompt_tokens) r.tokens.push_back(next);
    emit(tokenizer.decode(token, next));
    token = next;
    if (pos == 1) start = Clock::now();
  }
  r.positions = pos;
  if (pos > 1) {
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    r.tokens_per_second = s > 0 ? (pos - 1) / s : 0;
  }
  return r;
}

}  // namespace tinycoral::llm
