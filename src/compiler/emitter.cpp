// The named-field instruction builder (emitter.h).
#include "compiler/emitter.h"

#include <bit>
#include <charconv>
#include <string>

#include "common/error.h"

namespace tinycoral::compiler {

std::string nest(std::initializer_list<std::pair<int64_t, int64_t>> levels) {
  std::string out;
  for (const auto& [inc, count] : levels) out += cat("(", inc, " x ", count, ")");
  return out;
}

std::string f32_bits(float value) { return hex(std::bit_cast<uint32_t>(value)); }

std::string hex(uint64_t value) {
  char buf[24] = {'0', 'x'};
  return std::string(buf, std::to_chars(buf + 2, buf + sizeof buf, value, 16).ptr);
}

void Emitter::add(const std::string& mnemonic, const std::string& fields) {
  const isa::OpcodeSpec* spec = isa::find_mnemonic(mnemonic);
  if (spec == nullptr) fail("emitter: unknown mnemonic ", mnemonic);
  // (Only a fence can be dropped, so only a fence's fields are kept: copying every
  // instruction's text would cost the counting emitter's callers.)
  last_mnemonic_ = mnemonic;
  if (mnemonic == kDroppable) {
    // (Every fence names its tiles first: empty fields are a Fields that built nothing.)
    if (fields.rfind("tiles=", 0) != 0) fail("emitter: a ", kDroppable, " without its tiles");
    check_droppable_text(fields);
    last_fields_ = fields;
  } else {
    last_fields_.clear();
  }
  last_seqs_ = spec->sequenced ? 1 : 0;
  last_parsed_ = 0;
  if (counting_) {  // (an instruction's words follow from its mnemonic alone)
    seq_ += spec->sequenced ? 1 : 0;
    words_ += spec->words;
    last_words_ = spec->words;
    return;
  }
  std::string line = mnemonic;
  if (spec->sequenced) line += " seq=" + std::to_string(seq_++);
  if (!fields.empty()) {
    line += ' ';
    line += fields;
  }
  std::vector<isa::Instruction> parsed;
  try {
    parsed = isa::parse(line);
  } catch (const Error& e) {
    fail("emitter: ", line, ": ", e.what());
  }
  last_words_ = 0;
  last_parsed_ = parsed.size();
  for (isa::Instruction& in : parsed) {
    in.word_offset = words_;
    words_ += in.spec->words;
    last_words_ += in.spec->words;
    body_.push_back(std::move(in));
  }
}

void Emitter::check_droppable_text(std::string_view fields) {
  for (const char c : fields)
    if (static_cast<unsigned char>(c) < 0x20)
      fail("emitter: a ", kDroppable, "'s fields as a Fields key, not text (drop_last compares ",
           "text)");
}

bool Emitter::drop_last(const std::string& mnemonic, const std::string& fields) {
  if (mnemonic != kDroppable) fail("emitter: drop_last of ", mnemonic, " (only ", kDroppable, ")");
  if (last_mnemonic_.empty() || last_mnemonic_ != mnemonic || last_fields_ != fields) return false;
  body_.resize(body_.size() - last_parsed_);
  words_ -= last_words_;
  seq_ -= last_seqs_;
  last_mnemonic_.clear();
  last_parsed_ = 0;  // (mark() then refuses: the instruction it would name is gone)
  return true;
}

void Emitter::add_counted(const Emitter& counted) {
  if (!counting_ || !counted.counting_) fail("emitter: add_counted needs two counting emitters");
  words_ += counted.words_ - 1;  // (both start after the start word)
  seq_ += counted.seq_;
  if (counted.last_mnemonic_.empty()) return;
  last_mnemonic_ = counted.last_mnemonic_;
  last_fields_ = counted.last_fields_;
  last_words_ = counted.last_words_;
  last_seqs_ = counted.last_seqs_;
  last_parsed_ = 0;
}

void Emitter::reloc_movi(int reg, container::BufferKind kind, container::Half half,
                         const std::string& layer_name) {
  const isa::OpcodeSpec* bundle = isa::find_mnemonic("bundle");
  const isa::FieldSpec* imm = bundle->field("imm");
  container::FieldOffset fo;
  fo.meta.desc = kind;
  fo.meta.position = half;
  fo.meta.name = layer_name;
  fo.offset_bit = static_cast<int32_t>(words_ * 128 + imm->lo);
  relocations_.push_back(fo);
  add("bundle", reg == 0 ? "s_op=0x2f" : cat("s_op=0x2f s_x=", reg));
  last_mnemonic_.clear();  // (its relocation points into it)
}

void Emitter::mark(std::string_view field) {
  if (counting_) return;
  if (last_parsed_ != 1) fail("emitter: mark(", field, ") after ", last_parsed_, " instructions");
  const isa::Instruction& in = body_.back();
  const isa::FieldSpec* f = in.spec->field(field);
  if (f == nullptr) fail("emitter: ", in.spec->mnemonic, " has no field ", field);
  // (The start word comes first in the bitstream too: word_offset counts it.)
  marks_.push_back({int64_t{in.word_offset} * 128 + f->lo, f->width, in.value(*f)});
}

container::Bitstream Emitter::finish() {
  if (counting_) fail("emitter: finish() on an emitter that only counts");
  body_words_ = words_;
  add("halt", "code=4");
  for (int i = 0; i < 4; ++i) add("bundle");
  add("end", "length_bits=128");
  const uint32_t total = words_;
  std::vector<isa::Instruction> program;
  program.reserve(body_.size() + 1);
  isa::Instruction start = isa::make_instruction(*isa::find_mnemonic("start"), 0);
  start.set("length_bits", static_cast<int64_t>(128) * (total - 2));
  program.push_back(std::move(start));
  for (isa::Instruction& in : body_) program.push_back(std::move(in));
  container::Bitstream out;
  out.data = isa::encode(program);
  out.field_offsets = relocations_;
  return out;
}

void Emitter::part(std::string name) {
  if (counting_) return;
  if (!parts_.empty() && parts_.back().second == words_) parts_.pop_back();  // nothing in it
  parts_.emplace_back(std::move(name), words_);
}

std::vector<std::pair<std::string, uint64_t>> Emitter::part_bytes() const {
  if (body_words_ == 0) fail("emitter: part_bytes() before finish()");
  std::vector<std::pair<std::string, uint64_t>> out;
  const auto add = [&](const std::string& name, uint64_t words) {
    if (words == 0) return;
    for (auto& [n, b] : out)
      if (n == name) {
        b += 16 * words;
        return;
      }
    out.emplace_back(name, 16 * words);
  };
  add("start", parts_.empty() ? body_words_ : parts_.front().second);
  for (size_t i = 0; i < parts_.size(); ++i)
    add(parts_[i].first,
        (i + 1 < parts_.size() ? parts_[i + 1].second : body_words_) - parts_[i].second);
  add("end", words_ - body_words_);
  return out;
}

uint64_t Emitter::finished_bytes() const {
  // The halt, four bundles and the end after the body (finish()).
  uint64_t words = words_;
  for (const char* m : {"halt", "bundle", "bundle", "bundle", "bundle", "end"})
    words += isa::find_mnemonic(m)->words;
  return words * 16;
}

}  // namespace tinycoral::compiler
