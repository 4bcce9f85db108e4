// libFuzzer target: llama2.c's checkpoint reader (versions 0, 1, 2) and tokenizer reader must parse
// or throw tinycoral::Error for any input, never read outside it. The first byte picks the reader;
// for the tokenizer the next two give the vocabulary size. A parsed tokenizer must encode and
// decode a short prompt without going out of bounds.
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/error.h"
#include "llm/checkpoint.h"
#include "llm/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const std::span<const uint8_t> rest(data + 3, size - 3);
  try {
    if (data[0] & 1) {
      const tinycoral::llm::Checkpoint ck = tinycoral::llm::parse_checkpoint(rest);
      if (ck.wcls().size() != size_t(ck.config.vocab_size) * size_t(ck.config.dim))
        __builtin_trap();
    } else {
      const int vocab = 1 + (data[1] | (data[2] << 8));
      const auto t = tinycoral::llm::Tokenizer::parse(rest, vocab);
      for (int id : t.encode("Once upon a time \xe2\x80\x94 \xff!"))
        if (id < 0 || id >= vocab) __builtin_trap();
      for (int id = 0; id < vocab; ++id) (void)t.decode(1, id);
    }
  } catch (const tinycoral::Error&) {
  }
  return 0;
}
