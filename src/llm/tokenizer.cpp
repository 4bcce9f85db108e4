#include "llm/tokenizer.h"

#include <cstring>

#include "common/error.h"
#include "common/file.h"

namespace tinycoral::llm {

Tokenizer Tokenizer::parse(std::span<const uint8_t> bytes, int vocab_size) {
  if (vocab_size <= 0) fail("tokenizer: vocab_size must be positive, not ", vocab_size);
  Tokenizer t;
  size_t at = 0;
  auto u32 = [&](const char* what, int index) {
    if (bytes.size() - at < 4)
      fail("tokenizer: truncated at byte ", at, " (", what, " of token ", index,
           "); the model's vocabulary has ", vocab_size, " tokens");
    uint32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    at += 4;
    return v;
  };
  const uint32_t max_len = u32("max_token_length", -1);
  if (max_len == 0 || max_len > (1u << 16)) fail("tokenizer: bad max_token_length ", max_len);
  t.max_token_length_ = static_cast<int>(max_len);
  t.pieces_.reserve(static_cast<size_t>(vocab_size));
  t.scores_.reserve(static_cast<size_t>(vocab_size));
  for (int i = 0; i < vocab_size; ++i) {
    const uint32_t score_bits = u32("score", i);
    float score;
    std::memcpy(&score, &score_bits, 4);
    const uint32_t len = u32("length", i);
    if (len > max_len)
      fail("tokenizer: token ", i, " is ", len, " bytes, longer than max_token_length ", max_len);
    if (bytes.size() - at < len)
      fail("tokenizer: truncated inside token ", i, " (", len, " bytes, ", bytes.size() - at,
           " left); the model's vocabulary has ", vocab_size, " tokens");
    t.pieces_.emplace_back(reinterpret_cast<const char*>(bytes.data() + at), len);
    t.scores_.push_back(score);
    at += len;
  }
  if (at != bytes.size())
    fail("tokenizer: ", bytes.size() - at, " bytes follow the model's ", vocab_size,
         " tokens (the tokenizer's vocabulary does not match the checkpoint's)");
  // run.c looks pieces up with a binary search; pieces are unique in real tokenizers, and for a
  // repeated one we keep the first id.
  t.ids_.reserve(t.pieces_.size());
  for (int i = 0; i < vocab_size; ++i) t.ids_.emplace(t.pieces_[static_cast<size_t>(i)], i);
  return t;
}

Tokenizer Tokenizer::load(const std::filesystem::path& path, int vocab_size) {
  const std::vector<uint8_t> bytes = read_file(path);
  return with_context(path.string(), [&] { return parse(bytes, vocab_size); });
}

int Tokenizer::lookup(const std::string& s) const {
  const auto it = ids_.find(s);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::encode(std::string_view text) const {
  std::vector<int> tokens{kBos};
  if (!text.empty()) {
    const int space = lookup(" ");
    if (space < 0) fail("tokenizer: the vocabulary has no \" \" token for the prompt's prefix");
    tokens.push_back(space);
  }
  // Code points: a lead byte (or ASCII) and up to 3 continuation bytes, as run.c groups them.
  std::string cp;
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if ((byte & 0xC0) != 0x80) cp.clear();
    cp.push_back(static_cast<char>(byte));
    const bool next_continues =
        i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
    if (next_continues && cp.size() < 4) continue;
    const int id = lookup(cp);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char c : cp) {
        const int byte_id = static_cast<unsigned char>(c) + 3;
        if (byte_id >= vocab_size())
          fail("tokenizer: no token for byte ", static_cast<int>(static_cast<unsigned char>(c)),
               " of the prompt (byte tokens need a vocabulary of at least 259)");
        tokens.push_back(byte_id);
      }
    }
    cp.clear();
  }
  // Merge the adjacent pair whose merged piece scores best (the first one on a tie).
  for (;;) {
    float best_score = -1e10f;
    int best_id = -1;
    size_t best_at = 0;
    for (size_t i = 0; i + 1 < tokens.size(); ++i) {
      const int id = lookup(piece(tokens[i]) + piece(tokens[i + 1]));
      if (id >= 0 && scores_[static_cast<size_t>(id)] > best_score) {
        best_score = scores_[static_cast<size_t>(id)];
        best_id = id;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    tokens[best_at] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  return tokens;
}

namespace {

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::string Tokenizer::decode(int prev, int token) const {
  std::string_view p = piece(token);
  if (prev == kBos && !p.empty() && p[0] == ' ') p.remove_prefix(1);
  // "<0xNN>": one raw byte (one or two hex digits, as run.c's sscanf reads them).
  if (p.size() >= 4 && p.substr(0, 3) == "<0x" && hex_digit(p[3]) >= 0) {
    int value = hex_digit(p[3]);
    if (p.size() >= 5 && hex_digit(p[4]) >= 0) value = value * 16 + hex_digit(p[4]);
    p = std::string_view();
    const char byte = static_cast<char>(value);
    const bool shown =
        (value >= 0x20 && value < 0x7f) || value == ' ' || (value >= 9 && value <= 13);
    return value != 0 && shown ? std::string(1, byte) : std::string();
  }
  // run.c prints C strings: a piece ends at its first NUL byte.
  p = p.substr(0, p.find('\0'));
  if (p.size() == 1) {
    const auto b = static_cast<unsigned char>(p[0]);
    if (!((b >= 0x20 && b < 0x7f) || (b >= 9 && b <= 13))) return std::string();
  }
  return std::string(p);
}

}  // namespace tinycoral::llm
