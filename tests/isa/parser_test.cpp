// The assembly syntax (docs/isa.md): what the parser accepts and the line-numbered errors it gives.
#include <gtest/gtest.h>

#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

std::string error_of(std::string_view text) {
  try {
    parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(IsaParse, LoopNestsSetIncrementsCountsAndModes) {
  const auto p = parse("op tiles=0x3 seq=7 in=(4 x 8)(-28 x 2 m1) loops=(8)(2) mult=0.5 offset=-3");
  ASSERT_EQ(p.size(), 1u);
  const Instruction& in = p[0];
  EXPECT_EQ(in.value("in.inc0"), 4);
  EXPECT_EQ(in.value("in.cnt0"), 7);
  EXPECT_EQ(in.value("in.inc1"), -28);
  EXPECT_EQ(in.value("in.cnt1"), 1);
  EXPECT_EQ(in.value("in.mode1"), 1);
  EXPECT_EQ(in.value("in.cnt2"), 0);
  EXPECT_EQ(in.value("loop0"), 7);
  EXPECT_EQ(in.value("loop1"), 1);
  EXPECT_EQ(in.value("mult"), 0x3f000000);
  EXPECT_EQ(in.value("offset"), -3);
  EXPECT_EQ(print(in),
            "    0: op tiles=0x0003 seq=7 loops=(8)(2) in=(4 x 8)(-28 x 2 m1) mult=0.5 offset=-3");
}

TEST(IsaParse, AcceptsOffsetsCommentsHexAndBlankLines) {
  const auto p = parse(
      "; a comment\n\n  12: bundle s_op=0x2f s_x=1 imm=0xdeadbeef  ; reloc PARAMETER lo\n"
      "nop # another\n  sync tiles=0b11 seq=1 count=0x10\n");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].word_offset, 0u);  // the printed offset is informative only
  EXPECT_EQ(p[0].value("imm"), 0xdeadbeef);
  EXPECT_EQ(p[1].word_offset, 1u);
  EXPECT_EQ(p[2].value("tiles"), 3);
  EXPECT_EQ(p[2].value("count"), 16);
}

TEST(IsaParse, SignedFieldsTakeHexBitPatterns) {
  const auto p = parse("op in=(0x1ffff x 2)");
  EXPECT_EQ(p[0].value("in.inc0"), -1);
  EXPECT_EQ(p[0].value("in.cnt0"), 1);
}

TEST(IsaParse, ErrorsNameTheLine) {
  EXPECT_EQ(error_of("nop\nfrob x=1\n"), "line 2: unknown mnemonic 'frob'");
  EXPECT_EQ(error_of("halt\nhalt colour=3"), "line 2: halt has no field 'colour'");
  EXPECT_EQ(error_of("halt code=32"), "line 1: field code: 32 does not fit in 5 bits");
  EXPECT_EQ(error_of("halt code=-1"), "line 1: field code is unsigned: -1 is negative");
  EXPECT_EQ(error_of("halt code=four"), "line 1: field code: 'four' is not a number");
  EXPECT_EQ(error_of("halt code=1 code=2"), "line 1: field code is given twice");
  EXPECT_EQ(error_of("halt code"), "line 1: expected name=value, found 'code'");
  EXPECT_EQ(error_of("halt opcode=0x21"), "line 1: the opcode is given by the mnemonic");
  EXPECT_EQ(error_of("nop s_op=1"), "line 1: nop takes no fields");
  EXPECT_EQ(error_of("op in=(1 x 0)"), "line 1: in: a count must be at least 1");
  EXPECT_EQ(error_of("op in=(1 x 8"), "line 1: unbalanced parentheses");
  EXPECT_EQ(error_of("op in=(8)"), "line 1: in: expected (increment x count) in '(8)'");
  EXPECT_EQ(
      error_of("op in=(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)"),
      "line 1: in has 8 levels, '(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x 1)(1 x "
      "1)' gives more");
  EXPECT_EQ(error_of("op in=(1x8)"), "line 1: in: expected (increment x count) in '(1x8)'");
  EXPECT_EQ(error_of("op in=(1 x 8 q3)"),
            "line 1: in: expected m<mode> after the count in '(1 x 8 q3)'");
  EXPECT_EQ(error_of("op loops=(1 x 8)"), "line 1: loops: expected (count) in '(1 x 8)'");
  EXPECT_EQ(error_of("op in=(1 x 2) in.inc0=3"), "line 1: field in.inc0 is given twice");
  EXPECT_EQ(error_of("op in.inc0=65536"),
            "line 1: field in.inc0: 65536 does not fit in 17 signed bits");
  EXPECT_EQ(error_of("op mult=abc"), "line 1: field mult: 'abc' is not a float");
  EXPECT_EQ(error_of("ringprod dst=(1 x 1)"), "line 1: ringprod has no field 'dst'");
}

}  // namespace
}  // namespace tinycoral::isa
