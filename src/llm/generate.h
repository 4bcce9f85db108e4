// run.c's generation loop: encode the prompt (BOS first), feed its tokens one position at a time
// while forcing the next prompt token, then sample; stop after `steps` positions or when the model
// produces BOS. Each new token's text is handed to `emit` as soon as it exists.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "llm/sampler.h"
#include "llm/tokenizer.h"
#include "llm/transformer.h"

namespace tinycoral::llm {

struct GenerateResult {
  std::vector<int> tokens;       // every token fed or produced, BOS first
  int prompt_tokens = 0;         // BOS included
  int positions = 0;             // forward passes run
  double tokens_per_second = 0;  // run.c's figure: (positions - 1) / time after the first pass
};

// Called after every forward pass with the position, the logits (before sampling touches them)
// and the token chosen next; returns the token to continue with (normally `next`: the tests use
// it to step over a near tie and keep comparing the rest of a run).
using StepObserver = std::function<int(int pos, std::span<const float> logits, int next)>;

// `steps` is run.c's -n after its rules: 0 or more than seq_len mean seq_len. Throws if the
// prompt does not fit in seq_len.
GenerateResult generate(Transformer& model, const Tokenizer& tokenizer, Sampler& sampler,
                        std::string_view prompt, int steps,
                        const std::function<void(const std::string&)>& emit,
                        const StepObserver& observe = nullptr);

}  // namespace tinycoral::llm
