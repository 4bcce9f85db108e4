// Relocations: a 32-bit little-endian bit-field insert at any bit offset (driver.md 5.5), and
// finding the instruction and field a relocation lands in.
#include "isa/relocate.h"

#include <gtest/gtest.h>

#include "common/bits.h"
#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

TEST(IsaRelocate, InsertsAt32BitFieldAtAnyBitOffset) {
  std::vector<uint8_t> bytes(32, 0xff);
  apply_field_offset(bytes, 70, 0x12345678);
  EXPECT_EQ(get_bits(bytes, 70, 32), 0x12345678u);
  EXPECT_EQ(get_bits(bytes, 64, 6), 0x3fu);  // neighbours kept
  EXPECT_EQ(get_bits(bytes, 102, 26), 0x3ffffffu);
  apply_field_offset(bytes, 0, 0);
  EXPECT_EQ(get_bits(bytes, 0, 32), 0u);
  apply_field_offset(bytes, 224, 0xa5a5a5a5);  // the last 32 bits
  EXPECT_EQ(bytes[31], 0xa5);
  EXPECT_THROW(apply_field_offset(bytes, 225, 1), Error);
  EXPECT_THROW(apply_field_offset(bytes, -1, 1), Error);
}

TEST(IsaRelocate, LocatesBitsAndRecognisesMoviImmediates) {
  const auto program = parse(
      "start length_bits=384\n"
      "bundle s_op=0x2f s_x=1\n"
      "scsync tiles=0xffff\n"
      "bundle s_op=0x21 s_x=2\n"
      "end length_bits=128\n");
  ASSERT_EQ(program.size(), 5u);
  const auto where = locate_bit(program, 128 + 70);
  ASSERT_TRUE(where.has_value());
  EXPECT_EQ(where->instruction, 1u);
  EXPECT_EQ(where->field->name, "imm");
  EXPECT_EQ(where->bit_in_field, 0u);
  EXPECT_TRUE(is_movi_immediate(program, 128 + 70));
  EXPECT_FALSE(is_movi_immediate(program, 128 + 71));        // not the field's start
  EXPECT_FALSE(is_movi_immediate(program, 4 * 128 + 70));    // an ADDI, not a MOVI
  const auto in_scsync = locate_bit(program, 3 * 128 + 12);  // second word of the scsync
  ASSERT_TRUE(in_scsync.has_value());
  EXPECT_EQ(in_scsync->instruction, 2u);
  EXPECT_EQ(in_scsync->field->name, "thr2");
  EXPECT_EQ(in_scsync->bit_in_field, 140u - 125u);
  EXPECT_FALSE(locate_bit(program, 6 * 128).has_value());
  EXPECT_FALSE(locate_bit(program, -5).has_value());
}

// A field narrower than 32 bits between other fields (a w2n's 16-bit narrow address, its first
// loop's increment right after it) is written alone: the program decodes with that field changed
// and every other field as it was; a value too wide for it, or a field past the end, is refused.
TEST(IsaRelocate, WritesOneFieldOfItsOwnWidth) {
  const std::vector<Instruction> program = parse(
      "start length_bits=896\n"
      "w2n seq=0 tiles=0x0010 w.addr=0x20 w=(1 x 1) n.addr=0x105 n=(64 x 8) n.lvl_mask=0x01\n"
      "end length_bits=128\n");
  std::vector<uint8_t> bytes = encode(program);
  const Instruction& w2n = program.at(1);
  const FieldSpec* addr = w2n.spec->field("n.addr");
  ASSERT_NE(addr, nullptr);
  ASSERT_LT(addr->width, 32);
  const int64_t at = int64_t{w2n.word_offset} * 128 + addr->lo;
  write_field(bytes, at, addr->width, 0xbeef);
  const std::vector<Instruction> patched = decode(bytes);
  ASSERT_EQ(patched.size(), program.size());
  EXPECT_EQ(patched[1].value("n.addr"), 0xbeef);
  for (const FieldSpec& f : w2n.spec->fields) {
    if (f.name == "n.addr") continue;
    EXPECT_EQ(patched[1].value(f), w2n.value(f)) << f.name;
  }
  EXPECT_EQ(patched[0].value("length_bits"), program[0].value("length_bits"));
  EXPECT_THROW(write_field(bytes, at, addr->width, uint64_t{1} << addr->width), Error);
  EXPECT_THROW(write_field(bytes, int64_t(bytes.size()) * 8 - 15, 16, 1), Error);
  EXPECT_THROW(write_field(bytes, -1, 16, 1), Error);
  write_field(bytes, at, addr->width, 0x105);
  EXPECT_EQ(bytes, encode(program));
}

}  // namespace
}  // namespace tinycoral::isa
