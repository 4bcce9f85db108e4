// Assembly text -> instructions (syntax: docs/isa.md). One instruction per line:
// `[offset:] mnemonic name=value ... [; comment]`; fields not written are zero. Every mistake is an
// Error naming the line.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "isa/isa.h"
#include "isa/syntax.h"

namespace tinycoral::isa {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// Splits on blanks outside parentheses, so `in=(1x8) (4x2)` and `in=(1x8)(4x2)` are one token.
std::vector<std::string_view> tokenize(std::string_view line) {
  std::vector<std::string_view> tokens;
  size_t start = std::string_view::npos;
  int depth = 0;
  for (size_t i = 0; i <= line.size(); ++i) {
    const char c = i < line.size() ? line[i] : ' ';
    const bool blank = c == ' ' || c == '\t';
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (blank && depth == 0) {
      if (start != std::string_view::npos) tokens.push_back(line.substr(start, i - start));
      start = std::string_view::npos;
    } else if (start == std::string_view::npos) {
      start = i;
    }
  }
  if (depth != 0) fail("unbalanced parentheses");
  return tokens;
}

struct Number {
  bool negative = false;
  bool based = false;  // written in hex or binary: a raw bit pattern
  uint64_t magnitude = 0;
};

// `what` and `name` name the number in error messages (joined only when one is thrown: the emitter
// parses every instruction the placement search generates).
Number parse_number(std::string_view text, std::string_view what, std::string_view name = {}) {
  Number n;
  std::string_view s = text;
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) {
    n.negative = s.front() == '-';
    s.remove_prefix(1);
  }
  unsigned base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    base = 16;
    s.remove_prefix(2);
  } else if (s.size() > 2 && s[0] == '0' && (s[1] == 'b' || s[1] == 'B')) {
    base = 2;
    s.remove_prefix(2);
  }
  n.based = base != 10;
  if (s.empty()) fail(what, name, ": '", text, "' is not a number");
  for (char c : s) {
    unsigned digit;
    if (c >= '0' && c <= '9') {
      digit = static_cast<unsigned>(c - '0');
    } else if (c >= 'a' && c <= 'f') {
      digit = static_cast<unsigned>(c - 'a' + 10);
    } else if (c >= 'A' && c <= 'F') {
      digit = static_cast<unsigned>(c - 'A' + 10);
    } else {
      digit = 99;
    }
    if (digit >= base) fail(what, name, ": '", text, "' is not a number");
    if (n.magnitude > (UINT64_MAX - digit) / base) fail(what, name, ": '", text, "' is too large");
    n.magnitude = n.magnitude * base + digit;
  }
  return n;
}

// Converts a written value to the field's raw bits, checking that it fits.
uint64_t field_bits(const FieldSpec& f, std::string_view text) {
  if (f.format == FieldSpec::Format::kF32 &&
      !(text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X'))) {
    const std::string s(text);
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(s.c_str(), &end);
    if (s.empty() || end != s.c_str() + s.size())
      fail("field ", f.name, ": '", text, "' is not a float");
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    return bits;
  }
  const Number n = parse_number(text, "field ", f.name);
  const unsigned w = f.width;
  const uint64_t mask = w >= 64 ? ~uint64_t{0} : (uint64_t{1} << w) - 1;
  if (n.based || !f.is_signed) {
    // Unsigned fields and hex/binary patterns: the magnitude is the bit pattern.
    if (n.negative && !f.is_signed) fail("field ", f.name, " is unsigned: ", text, " is negative");
    if (n.negative) {
      if (w < 64 && n.magnitude > (uint64_t{1} << (w - 1))) {
        fail("field ", f.name, ": ", text, " does not fit in ", w, " signed bits");
      }
      return (~n.magnitude + 1) & mask;
    }
    if (n.magnitude & ~mask) fail("field ", f.name, ": ", text, " does not fit in ", w, " bits");
    return n.magnitude;
  }
  // Signed decimal.
  const uint64_t limit = w >= 64 ? (uint64_t{1} << 63) : (uint64_t{1} << (w - 1));
  if (n.negative ? n.magnitude > limit : n.magnitude >= limit) {
    fail("field ", f.name, ": ", text, " does not fit in ", w, " signed bits");
  }
  return (n.negative ? ~n.magnitude + 1 : n.magnitude) & mask;
}

// `(INC x N)` / `(INC x N mMODE)` / `(N)` levels, innermost first.
void parse_nest(Instruction& in, const LoopNestSpec& nest, std::string_view text,
                std::vector<bool>& assigned) {
  const auto& fields = in.spec->fields;
  for (const auto& level : nest.levels) {
    for (int16_t f : {level.inc, level.count, level.mode}) {
      if (f < 0) continue;
      if (assigned[static_cast<size_t>(f)]) {
        fail("field ", fields[static_cast<size_t>(f)].name, " is given twice");
      }
      assigned[static_cast<size_t>(f)] = true;
    }
  }
  size_t k = 0;
  std::string_view s = text;
  while (!s.empty()) {
    if (s.front() != '(') fail(nest.name, ": expected '(' in '", text, "'");
    const size_t close = s.find(')');
    if (close == std::string_view::npos) fail(nest.name, ": missing ')' in '", text, "'");
    std::string_view body = trim(s.substr(1, close - 1));
    s = trim(s.substr(close + 1));
    if (k >= nest.levels.size()) {
      fail(nest.name, " has ", nest.levels.size(), " levels, '", text, "' gives more");
    }
    const LoopLevel& level = nest.levels[k++];
    // Words of the level: `INC x COUNT [mMODE]`, or `COUNT` for a count-only nest.
    std::vector<std::string_view> words;
    for (size_t i = 0; i < body.size();) {
      while (i < body.size() && (body[i] == ' ' || body[i] == '\t')) ++i;
      size_t j = i;
      while (j < body.size() && body[j] != ' ' && body[j] != '\t') ++j;
      if (j > i) words.push_back(body.substr(i, j - i));
      i = j;
    }
    std::string_view count_text, mode_text;
    if (level.inc >= 0) {
      if (words.size() < 3 || words.size() > 4 || words[1] != "x") {
        fail(nest.name, ": expected (increment x count) in '", text, "'");
      }
      const FieldSpec& inc = fields[static_cast<size_t>(level.inc)];
      in.set_raw(inc, field_bits(inc, words[0]));
      count_text = words[2];
      if (words.size() == 4) mode_text = words[3];
    } else {
      if (words.size() != 1) fail(nest.name, ": expected (count) in '", text, "'");
      count_text = words[0];
    }
    if (!mode_text.empty()) {
      if (level.mode < 0) fail(nest.name, " levels have no mode");
      if (mode_text.size() < 2 || mode_text.front() != 'm') {
        fail(nest.name, ": expected m<mode> after the count in '", text, "'");
      }
      mode_text.remove_prefix(1);
    }
    const FieldSpec& cnt = fields[static_cast<size_t>(level.count)];
    const Number n = parse_number(count_text, nest.name, " count");
    if (n.negative || n.magnitude == 0) fail(nest.name, ": a count must be at least 1");
    if (cnt.width < 64 && n.magnitude - 1 >= (uint64_t{1} << cnt.width)) {
      fail(nest.name, ": count ", count_text, " exceeds ", uint64_t{1} << cnt.width);
    }
    in.set_raw(cnt, n.magnitude - 1);
    if (level.mode >= 0 && !mode_text.empty()) {
      const FieldSpec& mode = fields[static_cast<size_t>(level.mode)];
      in.set_raw(mode, field_bits(mode, mode_text));
    }
  }
}

Instruction parse_line(std::string_view line, uint32_t word_offset) {
  auto tokens = tokenize(line);
  size_t t = 0;
  // An optional `<word offset>:` prefix (as printed) is ignored.
  if (!tokens.empty() && tokens[0].back() == ':') {
    parse_number(tokens[0].substr(0, tokens[0].size() - 1), "word offset");
    ++t;
  }
  if (t >= tokens.size()) fail("expected a mnemonic");
  const std::string_view mnemonic = tokens[t++];
  const OpcodeSpec* spec =
      mnemonic == detail::kNopMnemonic ? find_opcode(0x20) : find_mnemonic(mnemonic);
  if (!spec) fail("unknown mnemonic '", mnemonic, "'");
  Instruction in = make_instruction(*spec, word_offset);
  if (mnemonic == detail::kNopMnemonic && t < tokens.size()) fail("nop takes no fields");
  std::vector<bool> assigned(spec->fields.size(), false);
  for (; t < tokens.size(); ++t) {
    const std::string_view token = tokens[t];
    const size_t eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) fail("expected name=value, found '", token, "'");
    const std::string_view name = token.substr(0, eq);
    const std::string_view value = trim(token.substr(eq + 1));
    if (value.empty()) fail("field ", name, " has no value");
    bool is_nest = false;
    for (const auto& nest : spec->nests) {
      if (nest.name == name) {
        parse_nest(in, nest, value, assigned);
        is_nest = true;
        break;
      }
    }
    if (is_nest) continue;
    const FieldSpec* f = spec->field(name);
    if (!f) fail(spec->mnemonic, " has no field '", name, "'");
    if (name == "opcode") fail("the opcode is given by the mnemonic");
    const auto index = static_cast<size_t>(f - spec->fields.data());
    if (assigned[index]) fail("field ", name, " is given twice");
    assigned[index] = true;
    in.set_raw(*f, field_bits(*f, value));
  }
  return in;
}

}  // namespace

std::vector<Instruction> parse(std::string_view text) {
  std::vector<Instruction> program;
  uint64_t word = 0;
  size_t line_number = 0;
  while (!text.empty()) {
    ++line_number;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view{} : text.substr(nl + 1);
    if (const size_t c = line.find_first_of(";#"); c != std::string_view::npos) {
      line = line.substr(0, c);
    }
    line = trim(line);
    if (line.empty()) continue;
    if (word > UINT32_MAX) fail("line ", line_number, ": program too long");
    try {
      program.push_back(parse_line(line, static_cast<uint32_t>(word)));
    } catch (const Error& e) {
      fail("line ", line_number, ": ", e.what());
    }
    word += program.back().spec->words;
  }
  return program;
}

}  // namespace tinycoral::isa
