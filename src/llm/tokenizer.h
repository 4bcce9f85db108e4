// llama2.c's tokenizer.bin and its byte-pair encoding, with run.c's behaviour: the file is a uint32
// max_token_length, then per token a float32 merge score, a uint32 length and that many bytes. It
// does not store its vocabulary size: the checkpoint's vocab_size says how many tokens there must
// be, and a file with fewer or more is refused. Encoding prepends BOS (1) and a dummy " " prefix,
// splits the text into UTF-8 code points (bytes of unknown ones become <0xNN> tokens, id byte + 3),
// then merges the best-scoring adjacent pair until none is in the vocabulary.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tinycoral::llm {

constexpr int kBos = 1;
constexpr int kEos = 2;

class Tokenizer {
 public:
  // Parses tokenizer.bin's bytes for a model with `vocab_size` tokens.
  static Tokenizer parse(std::span<const uint8_t> bytes, int vocab_size);
  static Tokenizer load(const std::filesystem::path& path, int vocab_size);

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int max_token_length() const { return max_token_length_; }
  const std::string& piece(int id) const { return pieces_.at(static_cast<size_t>(id)); }

  // BOS, then the text's tokens (run.c's encode with bos=1, eos=0). Throws if the vocabulary lacks
  // what the text needs (the " " prefix token, a byte token).
  std::vector<int> encode(std::string_view text) const;
  // What run.c prints for `token` after `prev`: a leading space is dropped after BOS, <0xNN> pieces
  // become that byte, and a lone byte that is neither printable nor whitespace prints nothing.
  std::string decode(int prev, int token) const;

 private:
  int lookup(const std::string& s) const;
  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> ids_;
  int max_token_length_ = 0;
};

}  // namespace tinycoral::llm
