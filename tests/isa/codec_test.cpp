// Decoding and encoding: field values of known instructions match isa.md, random field values
// round-trip through encode/decode and print/parse for every opcode, and bad bitstreams are Errors.
#include <gtest/gtest.h>

#include <random>

#include "common/bits.h"
#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

// 128-bit words whose upper 64 bits are zero (all the scalar words tested here).
std::vector<uint8_t> words_to_bytes(std::initializer_list<uint64_t> words) {
  std::vector<uint8_t> out;
  for (auto w : words) {
    for (int i = 0; i < 16; ++i) out.push_back(i < 8 ? static_cast<uint8_t>(w >> (8 * i)) : 0);
  }
  return out;
}

TEST(IsaDecode, KnownScalarWordsMatchIsaMd) {
  // isa.md 1.4: halt 0x10840 (code 4) / 0x4840 (code 1), nop 0x800, end 0x4000fc0 (length 128).
  const auto bytes = words_to_bytes({0x10840, 0x4840, 0x800, 0x4000fc0});
  const auto program = decode(bytes);
  ASSERT_EQ(program.size(), 4u);
  EXPECT_EQ(program[0].spec->mnemonic, "halt");
  EXPECT_EQ(program[0].value("code"), 4);
  EXPECT_EQ(program[1].value("code"), 1);
  EXPECT_EQ(program[2].opcode(), 0x20);
  EXPECT_EQ(program[2].word_offset, 2u);
  EXPECT_EQ(program[3].spec->mnemonic, "end");
  EXPECT_EQ(program[3].value("length_bits"), 128);
  EXPECT_EQ(encode(program), bytes);
  EXPECT_EQ(print(program[2]), "    2: nop");
  EXPECT_EQ(print(program[0]), "    0: halt code=4");
}

TEST(IsaDecode, StartLengthLoopAndBranchFields) {
  // start: length_bits at 19-50 = 128 * (nwords - 2) (isa.md 1.4); 10627-word program.
  const uint64_t start = 0x3e << 6 | uint64_t{128u * 10625u} << 19;
  // loop: 0x8C0 | count<<12 | body<<28; branch: 0x880 | 0x11<<12 | off<<17 | 1<<33 (isa.md 2.11).
  const uint64_t loop = 0x8C0 | 7u << 12 | uint64_t{3} << 28;
  const uint64_t branch = 0x880 | 0x11u << 12 | uint64_t{0x7fb8} << 17 | uint64_t{1} << 33;
  const auto program = decode(words_to_bytes({start, loop, branch}));
  EXPECT_EQ(program[0].value("length_bits"), 128 * 10625);
  EXPECT_EQ(program[1].spec->mnemonic, "loop");
  EXPECT_EQ(program[1].value("count"), 7);
  EXPECT_EQ(program[1].value("body"), 3);
  EXPECT_EQ(program[2].spec->mnemonic, "branch");
  EXPECT_EQ(program[2].value("offset"), -72);
}

TEST(IsaDecode, SequenceNumberPositions) {
  // 0x1a: seq at 28-42; ring 0x10: 46-59; op 0x01: 46-61 (isa.md 1.3).
  Instruction sync = make_instruction(*find_opcode(0x1a));
  sync.set("seq", 0x5555);
  EXPECT_EQ(get_bits(sync.bytes, 28, 15), 0x5555u);
  Instruction ring = make_instruction(*find_opcode(0x10));
  ring.set("seq", 0x2abc);
  EXPECT_EQ(get_bits(ring.bytes, 46, 14), 0x2abcu);
  Instruction op = make_instruction(*find_opcode(0x01));
  op.set("seq", 437);
  op.set("tiles", 0x8001);
  EXPECT_EQ(get_bits(op.bytes, 46, 16), 437u);
  EXPECT_EQ(get_bits(op.bytes, 12, 16), 0x8001u);
  EXPECT_EQ(get_bits(op.bytes, 6, 6), 0x01u);
}

TEST(IsaDecode, MoviImmediateAtBit70) {
  // Relocations patch bit 70 of MOVI bundles (s_op 0x2f at 54-59), driver.md 5.5.
  Instruction movi = make_instruction(*find_opcode(0x20));
  movi.set("s_op", 0x2f);
  movi.set("s_x", 1);
  movi.set("imm", 0xdeadbeef);
  EXPECT_EQ(get_bits(movi.bytes, 54, 6), 0x2fu);
  EXPECT_EQ(get_bits(movi.bytes, 70, 32), 0xdeadbeefu);
}

TEST(IsaDecode, SignedFieldsSignExtendAndRangeCheck) {
  Instruction op = make_instruction(*find_opcode(0x01));
  op.set("in.inc1", -28);
  EXPECT_EQ(op.value("in.inc1"), -28);
  EXPECT_EQ(op.raw(*op.spec->field("in.inc1")), (1u << 17) - 28);
  EXPECT_THROW(op.set("in.inc1", 1 << 16), Error);
  EXPECT_THROW(op.set("in.cnt1", -1), Error);
  EXPECT_THROW(op.set("in.cnt1", 1 << 18), Error);
  EXPECT_THROW(op.set("no_such_field", 1), Error);
  EXPECT_THROW((void)op.value("no_such_field"), Error);
}

TEST(IsaDecode, RejectsMalformedBitstreams) {
  const auto throws_with = [](std::vector<uint8_t> bytes, const std::string& needle) {
    try {
      decode(bytes);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  throws_with(std::vector<uint8_t>(17, 0), "not a whole number of 16-byte words");
  throws_with(words_to_bytes({0x800, 0x0}), "word 1: unknown opcode 0x0");
  throws_with(words_to_bytes({0x800, 0x01 << 6, 0x800}), "word 1: op (0x1) needs 17 words");
  EXPECT_TRUE(decode({}).empty());
}

// Random values for every field of every opcode: encode -> decode -> same values, and
// print -> parse -> same bytes.
TEST(IsaRoundTrip, EveryOpcodeWithRandomFieldValues) {
  std::mt19937_64 rng(12345);
  for (const auto& spec : opcode_table()) {
    SCOPED_TRACE(std::string(spec.mnemonic));
    for (int trial = 0; trial < 20; ++trial) {
      Instruction in = make_instruction(spec, 3);
      std::vector<uint64_t> expected;
      for (const auto& f : spec.fields) {
        uint64_t v = rng();
        if (f.width < 64) v &= (uint64_t{1} << f.width) - 1;
        if (trial % 4 == 1) v &= 1;  // many zeros: exercises the omitted fields and levels
        if (f.name == "opcode") v = spec.opcode;
        in.set_raw(f, v);
        expected.push_back(v);
      }
      const auto bytes = encode(std::vector<Instruction>{in});
      const auto back = decode(bytes);
      ASSERT_EQ(back.size(), 1u);
      ASSERT_EQ(back[0].spec, &spec);
      for (size_t i = 0; i < spec.fields.size(); ++i) {
        ASSERT_EQ(back[0].raw(spec.fields[i]), expected[i]) << spec.fields[i].name;
      }
      const std::string text = print(back[0]);
      const auto parsed = parse(text);
      ASSERT_EQ(parsed.size(), 1u) << text;
      EXPECT_EQ(parsed[0].bytes, bytes) << text;
    }
  }
}

TEST(IsaRoundTrip, AllZeroAndAllOnesInstructions) {
  for (const auto& spec : opcode_table()) {
    SCOPED_TRACE(std::string(spec.mnemonic));
    Instruction zero = make_instruction(spec);
    EXPECT_EQ(parse(print(zero))[0].bytes, zero.bytes) << print(zero);
    Instruction ones = make_instruction(spec);
    for (auto& b : ones.bytes) b = 0xff;
    ones.set_raw(*spec.field("opcode"), spec.opcode);
    EXPECT_EQ(parse(print(ones))[0].bytes, ones.bytes) << print(ones);
  }
}

}  // namespace
}  // namespace tinycoral::isa
