// Every compiled program in Google's test data through the library: decodes, re-encodes
// byte-identically (also when each instruction is rebuilt from its named fields alone, which proves
// no bit a compiler sets lies in a reserved range), passes check() with sequence numbers continued
// across the bitstreams of an executable, and every relocation lands on (and patches) a MOVI
// immediate (models.md 1.2).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>

#include "container/edgetpu_model.h"
#include "isa/isa.h"
#include "isa/relocate.h"
#include "support/testdata.h"

namespace tinycoral::isa {
namespace {

// The instruction rebuilt from its named fields alone: an all-zero instruction of the same opcode
// with every non-reserved field set to the decoded value. Reserved bits stay zero, so the rebuilt
// bytes equal the original only if every bit a real program sets belongs to a named field.
Instruction from_named_fields(const Instruction& decoded) {
  Instruction out = make_instruction(*decoded.spec, decoded.word_offset);
  for (const FieldSpec& f : decoded.spec->fields)
    if (!f.reserved()) out.set_raw(f, decoded.raw(f));
  return out;
}

TEST(IsaRealPrograms, DecodeCheckAndRelocateEveryTestModel) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  size_t bitstreams = 0, relocations = 0, halts_continuing = 0;
  std::map<std::string, size_t> reserved_set;  // "mnemonic.rsvN" -> instructions setting it
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (!e.path().filename().string().ends_with("_edgetpu.tflite")) continue;
    SCOPED_TRACE(e.path().string());
    const auto model = container::read_edgetpu_model_file(e.path());
    for (const auto& op : model.edgetpu_ops) {
      for (const auto& package : op.options.packages) {
        for (const auto& exe : package.executables) {
          uint32_t seq = 0;
          for (size_t b = 0; b < exe.bitstreams.size(); ++b) {
            const auto& bs = exe.bitstreams[b];
            const auto program = decode(bs.data);
            ++bitstreams;
            EXPECT_EQ(encode(program), bs.data);
            std::vector<Instruction> rebuilt;
            rebuilt.reserve(program.size());
            for (const auto& in : program) {
              rebuilt.push_back(from_named_fields(in));
              if (rebuilt.back().bytes == in.bytes) continue;
              for (const FieldSpec& f : in.spec->fields)
                if (f.reserved() && in.raw(f) != 0)
                  ++reserved_set[std::string(in.spec->mnemonic) + "." + std::string(f.name)];
            }
            EXPECT_TRUE(encode(rebuilt) == bs.data)
                << "bitstream " << b << " differs when rebuilt from its named fields";
            for (const auto& d : check(program, seq)) {
              ADD_FAILURE() << "bitstream " << b << " word " << d.word_offset << ": " << d.message;
            }
            seq += count_sequenced(program);
            // Only the last bitstream of an executable ends the program (halt code 4).
            const int64_t code = program[program.size() - 6].value("code");
            EXPECT_EQ(code, b + 1 == exe.bitstreams.size() ? 4 : 1);
            halts_continuing += code == 1 ? 1 : 0;
            std::vector<uint8_t> patched = bs.data;
            for (const auto& fo : bs.field_offsets) {
              ++relocations;
              EXPECT_TRUE(is_movi_immediate(program, fo.offset_bit)) << "bit " << fo.offset_bit;
              apply_field_offset(patched, fo.offset_bit, 0x80000000u + fo.offset_bit);
            }
            const auto after = decode(patched);
            for (const auto& fo : bs.field_offsets) {
              const auto where = locate_bit(after, fo.offset_bit);
              ASSERT_TRUE(where.has_value());
              EXPECT_EQ(after[where->instruction].value("imm"), 0x80000000u + fo.offset_bit);
            }
          }
        }
      }
    }
  }
  for (const auto& [field, count] : reserved_set)
    ADD_FAILURE() << field << " is set in " << count << " instructions: a field the table lacks";
  if (bitstreams == 0) GTEST_SKIP() << "no *_edgetpu.tflite under " << dir;
  EXPECT_GT(relocations, 0u);
  RecordProperty("bitstreams", static_cast<int>(bitstreams));
  RecordProperty("relocations", static_cast<int>(relocations));
  RecordProperty("continued_bitstreams", static_cast<int>(halts_continuing));
}

}  // namespace
}  // namespace tinycoral::isa
