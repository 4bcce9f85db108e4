// check(): a well-formed program passes; every kind of broken frame, length or sequence number is
// reported with its word offset.
#include <gtest/gtest.h>

#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

// start, sync_init-like fence, two tile instructions, halt, 4 nops, end: 1+1+17+4+1+4+1 = 29 words.
constexpr std::string_view kProgram = R"(
start length_bits=3456
sync tiles=0xffff seq=0 counters=0x7ffff units=0x3ff signal=1
op tiles=0x0001 seq=1 loops=(8)(2) in=(4 x 8)(-28 x 2)
ringcons0 tiles=0x000f seq=2 addr=0x2078 dst=(1 x 1)
halt code=4
nop
nop
nop
nop
end length_bits=128
)";

std::vector<std::string> messages(const std::vector<Diagnostic>& ds) {
  std::vector<std::string> out;
  for (const auto& d : ds) out.push_back(std::to_string(d.word_offset) + ": " + d.message);
  return out;
}

TEST(IsaCheck, WellFormedProgramPasses) {
  const auto program = parse(kProgram);
  ASSERT_EQ(program.size(), 10u);
  EXPECT_EQ(program.back().word_offset, 28u);
  EXPECT_TRUE(check(program).empty()) << ::testing::PrintToString(messages(check(program)));
  EXPECT_EQ(count_sequenced(program), 3u);
}

TEST(IsaCheck, SequenceContinuesAcrossBitstreams) {
  auto program = parse(kProgram);
  program[1].set("seq", 10);
  program[2].set("seq", 11);
  program[3].set("seq", 12);
  EXPECT_TRUE(check(program, 10).empty());
  EXPECT_EQ(messages(check(program, 0)),
            std::vector<std::string>{"1: sync has seq 10, expected 0"});
}

TEST(IsaCheck, ReportsASkippedSequenceNumberOnce) {
  auto program = parse(kProgram);
  program[2].set("seq", 5);
  program[3].set("seq", 6);
  EXPECT_EQ(messages(check(program)), std::vector<std::string>{"2: op has seq 5, expected 1"});
}

TEST(IsaCheck, ReportsWrongStartAndEndLengths) {
  auto program = parse(kProgram);
  program[0].set("length_bits", 128);
  program.back().set("length_bits", 256);
  EXPECT_EQ(messages(check(program)),
            (std::vector<std::string>{
                "0: start length_bits is 128 but the program has 29 words: expected 128 x (29 - 2) "
                "= 3456",
                "28: end length_bits is 256, expected 128"}));
}

TEST(IsaCheck, ReportsBrokenTail) {
  auto program = parse(kProgram);
  program[4].set("code", 3);
  program[6].set("s_op", 0x21);
  EXPECT_EQ(messages(check(program)),
            (std::vector<std::string>{
                "23: halt code 3: expected 4 (program end) or 1 (continues in the next bitstream)",
                "25: expected a nop between halt and end, found bundle"}));
  program = parse(kProgram);
  program.erase(program.begin() + 4);  // drop halt: nop count and lengths break
  const auto m = messages(check(program));
  ASSERT_FALSE(m.empty());
  EXPECT_NE(m[0].find("starts at word"), std::string::npos) << m[0];
}

TEST(IsaCheck, ReportsMissingFrame) {
  auto program = parse(kProgram);
  std::swap(program.front(), program.back());  // both one word: the lengths still add up
  std::swap(program.front().word_offset, program.back().word_offset);
  const auto m = messages(check(program));
  EXPECT_NE(std::find(m.begin(), m.end(), "0: first instruction is end, not start"), m.end());
  EXPECT_NE(std::find(m.begin(), m.end(), "28: last instruction is start, not end"), m.end());
  EXPECT_EQ(messages(check({})),
            std::vector<std::string>{"0: empty program: expected start ... halt, 4 nops, end"});
}

}  // namespace
}  // namespace tinycoral::isa
