// The readable comment the disassembly adds to scalar bundles (isa.md 2.11).
#include <gtest/gtest.h>

#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

std::string reading(std::string_view text) { return describe_bundle(parse(text).at(0)); }

TEST(IsaBundleText, AluImmediateRegisterAndMove) {
  EXPECT_EQ(reading("bundle s_op=0x21 s_x=4 s_y=4 imm=1"), "s4 = s4 + 0x1");
  EXPECT_EQ(reading("bundle s_op=0x02 s_x=3 s_y=1 imm=2"), "s3 = s1 - s2");
  EXPECT_EQ(reading("bundle s_op=0x2f s_x=1 imm=0x40"), "s1 = 0x40");
}

TEST(IsaBundleText, ComparesWriteAPredicateAndGatedBundlesShowIt) {
  EXPECT_EQ(reading("bundle s_op=0x2a s_x=2 s_y=5 imm=0"), "p2 = s5 != 0x0");
  EXPECT_EQ(reading("bundle gate=1 pred_pol=0 pred_reg=3 s_op=0x2f s_x=1 imm=7"), "[!p3] s1 = 0x7");
}

TEST(IsaBundleText, DescriptorStoresAndOtherOpcodesAreEmpty) {
  EXPECT_EQ(reading("bundle v_op=0xa vs_reg=5 v_offset=1"), "desc[1] = s5");
  EXPECT_EQ(reading("bundle v_op=0x06 v_offset=40 vs_reg=6"), "smem[s8++] = s6");
  EXPECT_EQ(reading("bundle v_op=0x02 v_offset=254 v_cmd=15 vs_reg=4"), "smem[0xffe] = s4");
  EXPECT_EQ(reading("bundle enable_vector=1 vs_reg_v1=4 imm_size=0xfff"), "s4 = smem[0xfff]");
  EXPECT_EQ(reading("bundle"), "");
  EXPECT_EQ(reading("nop"), "");
}

TEST(IsaBundleText, DisassemblyCarriesTheReadingAndStillParses) {
  const auto program = parse("bundle s_op=0x21 s_x=4 s_y=4 imm=1\n");
  const std::string text = print_program(program);
  EXPECT_NE(text.find("; s4 = s4 + 0x1"), std::string::npos) << text;
  EXPECT_EQ(encode(parse(text)), encode(program));
}

}  // namespace
}  // namespace tinycoral::isa
