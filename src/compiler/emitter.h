// Builds a bitstream instruction by instruction from the ISA table's named fields. Each line is an
// instruction in the assembler's syntax (docs/isa.md: `mnemonic name=value ...`, loop nests as
// `n=(1 x 16)(-15 x 1)`), so every field is addressed by its table name and encoded by src/isa;
// the emitter adds the running sequence number of tile instructions, the start/end frame and the
// relocation marks (the word offsets of MOVIs the runtime patches).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "container/executable.h"
#include "isa/isa.h"
#include "isa/relocate.h"

namespace tinycoral::compiler {

// "(inc x count)(inc x count)...": a loop nest token, innermost level first.
std::string nest(std::initializer_list<std::pair<int64_t, int64_t>> levels);
// A float32 field value as its exact bit pattern ("0x42fc0001").
std::string f32_bits(float value);
// Hex for masks and addresses ("0x00ff").
std::string hex(uint64_t value);

class Emitter {
 public:
  Emitter() = default;
  // An emitter that only counts words (pricing a program, or choosing between forms of a part of
  // one): add() checks the mnemonic but neither parses nor keeps the instruction; finish() fails.
  static Emitter counting() {
    Emitter e;
    e.counting_ = true;
    return e;
  }
  // Appends one instruction; `fields` is the text after the mnemonic, without `seq`.
  void add(const std::string& mnemonic, const std::string& fields = "");
  // Removes the instruction added last if it is `mnemonic` with exactly `fields` (as add() got
  // them), and says whether it did (a fence that the next one makes redundant). Only a `sync` can
  // be dropped (kDroppable; anything else fails): a counting emitter gets a TileBatch's
  // instructions without their fields, so the two forms would disagree on other instructions.
  static constexpr const char* kDroppable = "sync";
  bool drop_last(const std::string& mnemonic, const std::string& fields);
  // Fails unless a droppable instruction's `fields` are text: drop_last compares them with the text
  // its caller formats, so they must not be a Fields key (its tag bytes are below 0x20). add()
  // checks a droppable's fields (also that they name tiles: a counting emitter's Fields builds
  // nothing), TileBatch::add the fields it will add.
  static void check_droppable_text(std::string_view fields);
  // A MOVI of 0 into scalar register `reg` that the runtime patches with half of a buffer address.
  void reloc_movi(int reg, container::BufferKind kind, container::Half half,
                  const std::string& layer_name = "");
  // Marks field `field` (the ISA table's name) of the instruction added last, which must be one
  // instruction: its place in the finished bitstream and its value join marks() (a field the
  // program's user rewrites in place, isa::write_field). A counting emitter marks nothing.
  void mark(std::string_view field);
  const std::vector<isa::EncodedField>& marks() const { return marks_; }
  // Counts, after this emitter's instructions, those of `counted` (both only counting: a part
  // counted in trial forms is not counted again once one is chosen). `counted` must not end in a
  // dropped instruction (drop_last): its last instruction becomes this emitter's.
  void add_counted(const Emitter& counted);
  // Whether this emitter only counts (callers may skip building fields it would not read).
  bool only_counts() const { return counting_; }
  // Names the part of the program that starts with the next instruction, for a breakdown of its
  // bytes (part_bytes); it runs up to the next part's start. A counting emitter names nothing.
  void part(std::string name);
  // Bytes a part name takes in the finished bitstream, summed over that name's parts, in the order
  // the names first came; the instructions before the first part are "start", the frame finish()
  // adds "end". Call after finish().
  std::vector<std::pair<std::string, uint64_t>> part_bytes() const;
  // The word offset the next instruction gets (branch targets are word offsets).
  uint32_t words() const { return words_; }
  // Frames the program (start with its length, halt, four nops, end) and encodes it.
  container::Bitstream finish();
  // The bytes finish() would return (also of a counting emitter).
  uint64_t finished_bytes() const;

 private:
  std::vector<isa::Instruction> body_;
  std::vector<container::FieldOffset> relocations_;
  std::vector<isa::EncodedField> marks_;
  std::vector<std::pair<std::string, uint32_t>> parts_;  // (name, first word)
  uint32_t body_words_ = 0;                              // words_ before finish()'s frame
  uint32_t words_ = 1;                                   // the start word comes first
  bool counting_ = false;
  uint32_t seq_ = 0;
  // The instruction added last, as add() got it, and what it added (drop_last).
  std::string last_mnemonic_, last_fields_;
  uint32_t last_words_ = 0, last_seqs_ = 0;
  size_t last_parsed_ = 0;
};

}  // namespace tinycoral::compiler
