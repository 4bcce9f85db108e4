// Structural checks every real program passes (isa.md 1.3-1.4, models.md 1.2): contiguous
// instruction lengths, the start/halt/nop/end frame, start's length field and the running
// sequence number over tile-dispatched instructions.
#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

constexpr size_t kTailNops = 4;  // halt; nop x4; end (isa.md 1.4)

}  // namespace

uint32_t count_sequenced(std::span<const Instruction> program) {
  uint32_t n = 0;
  for (const auto& in : program) n += in.spec->sequenced ? 1 : 0;
  return n;
}

std::vector<Diagnostic> check(std::span<const Instruction> program, uint32_t first_seq) {
  std::vector<Diagnostic> out;
  const auto report = [&out](uint32_t word, auto&&... parts) {
    out.push_back({word, cat(parts...)});
  };
  if (program.empty()) {
    report(0, "empty program: expected start ... halt, 4 nops, end");
    return out;
  }

  // Lengths: each instruction starts where the previous one ended.
  uint64_t words = 0;
  for (const auto& in : program) {
    if (in.word_offset != words) {
      report(in.word_offset, in.spec->mnemonic, " starts at word ", in.word_offset,
             " but the previous instruction ends at word ", words);
    }
    words = uint64_t{in.word_offset} + in.spec->words;
  }

  // Frame: start first, then halt, 4 nops, end; start/end nowhere else.
  const Instruction& first = program.front();
  const Instruction& last = program.back();
  if (first.spec->opcode != 0x3e) {
    report(first.word_offset, "first instruction is ", first.spec->mnemonic, ", not start");
  } else {
    const uint64_t expected = 128 * (words >= 2 ? words - 2 : 0);
    const auto length = static_cast<uint64_t>(first.value("length_bits"));
    if (length != expected) {
      report(first.word_offset, "start length_bits is ", length, " but the program has ", words,
             " words: expected 128 x (", words, " - 2) = ", expected);
    }
  }
  if (last.spec->opcode != 0x3f) {
    report(last.word_offset, "last instruction is ", last.spec->mnemonic, ", not end");
  } else if (last.value("length_bits") != 128) {
    report(last.word_offset, "end length_bits is ", last.value("length_bits"), ", expected 128");
  }
  if (program.size() < kTailNops + 3) {
    report(last.word_offset, "program of ", program.size(),
           " instructions is too short for start, halt, 4 nops, end");
  } else {
    const size_t halt_index = program.size() - kTailNops - 2;
    const Instruction& halt = program[halt_index];
    if (halt.spec->opcode != 0x21) {
      report(halt.word_offset, "expected halt before the 4 closing nops, found ",
             halt.spec->mnemonic);
    } else if (const int64_t code = halt.value("code"); code != 4 && code != 1) {
      report(halt.word_offset, "halt code ", code,
             ": expected 4 (program end) or 1 (continues in the next bitstream)");
    }
    for (size_t i = halt_index + 1; i + 1 < program.size(); ++i) {
      if (!is_nop(program[i])) {
        report(program[i].word_offset, "expected a nop between halt and end, found ",
               program[i].spec->mnemonic);
      }
    }
  }
  for (size_t i = 1; i + 1 < program.size(); ++i) {
    const uint8_t op = program[i].spec->opcode;
    if (op == 0x3e || op == 0x3f) {
      report(program[i].word_offset, program[i].spec->mnemonic, " inside the program");
    }
  }

  // Sequence numbers (isa.md 1.3): one running count over all tile-dispatched instructions. After
  // a mismatch, continue from the number found so one slip gives one diagnostic.
  uint64_t expected_seq = first_seq;
  for (const auto& in : program) {
    if (!in.spec->sequenced) continue;
    const FieldSpec* seq = in.spec->field("seq");
    const uint64_t mask = (uint64_t{1} << seq->width) - 1;
    const uint64_t found = in.raw(*seq);
    if (found != (expected_seq & mask)) {
      report(in.word_offset, in.spec->mnemonic, " has seq ", found, ", expected ",
             expected_seq & mask);
      expected_seq = found;
    }
    ++expected_seq;
  }
  return out;
}

}  // namespace tinycoral::isa
