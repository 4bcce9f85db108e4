// Fields: an instruction's fields built once for every reader, in the form it reads. An emitter
// that emits parses their text; a TileBatch on an emitter that only counts compares them to join
// tiles, and gets a key that is equal where the texts would be (numbers and walks as their binary
// values, not formatted); an emitter that only counts reads nothing of them. The placement search
// prices layouts by counting, and the walks of its hand-overs were most of the text it formatted.
// The rule that keeps the two forms in step: within a batch, every instruction of one mnemonic
// builds its fields through one shape (the same calls in the same order, only values differing).
// Then equal keys mean equal texts and the reverse; `tiles=16` as text in one and as dec(16) in
// another would be equal texts with unequal keys, so a counting batch would join fewer
// instructions than the emitted one (not checked: comparing shapes would cost the counting path).
// What is checked: a fence's (sync's) fields are never a key or empty (Emitter::add,
// TileBatch::add), since Emitter::drop_last compares them with text in both forms.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compiler/emitter.h"
#include "compiler/program_parts.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler {

class Fields {
 public:
  enum class Form { kText, kKey, kNone };
  explicit Fields(Form form) : form_(form) {
    if (form_ != Form::kNone) out_.reserve(320);  // (a hand-over's fields in one allocation)
  }
  // What `e` reads of an instruction it gets (a counting emitter: nothing but a fence's, and
  // fences are written as text: Emitter::drop_last).
  explicit Fields(const Emitter& e) : Fields(e.only_counts() ? Form::kNone : Form::kText) {}
  // What `batch` compares and passes on.
  explicit Fields(const TileBatch& batch)
      : Fields(batch.only_counts() ? Form::kKey : Form::kText) {}

  // Text as it is in text and key (the key's tag bytes below never occur in it).
  Fields& operator()(std::string_view text) {
    if (form_ != Form::kNone) out_ += text;
    return *this;
  }
  Fields& dec(int64_t value) {
    if (form_ == Form::kText) append_decimal(out_, value);
    return bits(kDecimal, value);
  }
  Fields& hex(uint64_t value) {
    if (form_ == Form::kText) out_ += compiler::hex(value);
    return bits(kHex, static_cast<int64_t>(value));
  }
  // strided_walk's nest; in a key, the increments and counts it prints.
  Fields& walk(const std::vector<std::pair<int64_t, int64_t>>& stride_count, int levels,
               std::string_view last_mode = "") {
    if (form_ == Form::kText) append_strided_walk(out_, stride_count, levels, last_mode);
    if (form_ != Form::kKey) return *this;
    bits(kWalk, levels);  // (the level count and an end mark keep the key readable one way)
    for_each_walk_level(stride_count, levels, [&](int64_t inc, int64_t count) {
      append_bits(inc);
      append_bits(count);
    });
    out_ += last_mode;
    out_ += kWalkEnd;
    return *this;
  }
  // narrow_walk's nest (the same text as the walk of one level of `words` words).
  Fields& narrow_walk(int words) { return walk({{1, words}}, 6); }

  std::string take() && { return std::move(out_); }

 private:
  static constexpr char kDecimal = '\x01', kHex = '\x02', kWalk = '\x03', kWalkEnd = '\x04';
  // A key's tagged number (nothing in the other forms).
  Fields& bits(char tag, int64_t value) {
    if (form_ != Form::kKey) return *this;
    out_ += tag;
    append_bits(value);
    return *this;
  }
  void append_bits(int64_t value) {
    char raw[sizeof value];
    std::memcpy(raw, &value, sizeof value);
    out_.append(raw, sizeof raw);
  }
  Form form_;
  std::string out_;
};

}  // namespace tinycoral::compiler
