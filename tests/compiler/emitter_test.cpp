// The emitter's counting form (Emitter::counting), which the CONV_2D generator prices layouts and
// chooses hand-over schedules with: it must count the words and bytes the real emitter encodes.
#include "compiler/emitter.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>

#include "common/error.h"
#include "compiler/tile_batch.h"

namespace tinycoral::compiler {
namespace {

// Instructions of several lengths, sequenced and not, and a relocated MOVI.
void some_program(Emitter& e) {
  e.reloc_movi(1, container::BufferKind::kParameter, container::Half::kLower32);
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");
  e.add("ringcons0", "tiles=0x3 addr=0x2000 dst=(1 x 1) cbuf=1 slots=1 mode=3 s_id=0x2b");
  e.add("w2n", "tiles=0x1 w.addr=0x2000 w=(0 x 3) w.rows=1 n.addr=0x10 n=(1 x 64)");
  e.add("n2w", "tiles=0x4 n.addr=0x10 n=(1 x 64) w.addr=0x2078 w=(1 x 1) w.rows=1");
  e.add("ringprod", "tiles=0x4 addr=0x2078 src=(1 x 1) dest=0x3");
}

TEST(Emitter, CountingCountsTheWordsAndBytesOfTheRealProgram) {
  Emitter real;
  Emitter count = Emitter::counting();
  some_program(real);
  some_program(count);
  EXPECT_EQ(count.words(), real.words());
  EXPECT_GT(real.words(), 6u);  // (several instructions are longer than one word)
  const uint64_t bytes = real.finished_bytes();
  EXPECT_EQ(real.finish().data.size(), bytes);
  EXPECT_EQ(count.finished_bytes(), bytes);
}

TEST(Emitter, CountingStillRejectsAnUnknownMnemonicAndHasNoProgram) {
  Emitter count = Emitter::counting();
  EXPECT_THROW(count.add("no_such_op"), Error);
  EXPECT_THROW(count.finish(), Error);
}

// drop_last (a fence that the next one makes redundant): only the instruction added last, only
// with exactly the fields it was added with, only a fence (anything else is refused: a relocated
// MOVI's relocation points into it); the program is then the one built without it (sequence
// numbers and words too), in both forms of the emitter, also where a TileBatch added the fence
// (the counting emitter gets a batch's other instructions without their fields).
TEST(Emitter, DropLastRemovesOnlyTheExactLastInstruction) {
  for (const bool counting : {false, true}) {
    Emitter with = counting ? Emitter::counting() : Emitter();
    Emitter without = counting ? Emitter::counting() : Emitter();
    some_program(with);
    some_program(without);
    with.add("sync", "tiles=0xffff counters=0x1ffff units=0x3ff");
    EXPECT_FALSE(with.drop_last("sync", "tiles=0xffff units=0x3ff"));
    EXPECT_THROW(with.drop_last("scsync", "tiles=0xffff counters=0x1ffff units=0x3ff"), Error);
    EXPECT_TRUE(with.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff"));
    EXPECT_FALSE(with.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff"))
        << "(only the last instruction, once)";
    {
      TileBatch batch(with);
      batch.add(0xffff, "sync", "counters=0x1ffff units=0x3ff");
    }
    EXPECT_TRUE(with.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff"));
    EXPECT_EQ(with.words(), without.words());
    for (Emitter* e : {&with, &without}) e->add("sync", "tiles=0xffff units=0x3ff signal=1");
    EXPECT_EQ(with.finished_bytes(), without.finished_bytes());
    if (!counting) {
      EXPECT_EQ(with.finish().data, without.finish().data);
    }
    Emitter movi = counting ? Emitter::counting() : Emitter();
    movi.reloc_movi(2, container::BufferKind::kScratch, container::Half::kUpper32);
    EXPECT_THROW(movi.drop_last("bundle", "s_op=0x2f s_x=2"), Error);
    movi.add("sync", "tiles=0xffff units=0x3ff");
    movi.reloc_movi(3, container::BufferKind::kScratch, container::Half::kLower32);
    EXPECT_FALSE(movi.drop_last("sync", "tiles=0xffff units=0x3ff")) << "(the MOVI came last)";
  }
}

// add_counted (a hand-over round counted in two trial forms, the chosen one's count taken over):
// the words and bytes are those of adding the instructions here (and of the real program of
// them), a fence it ends with can still be dropped, and a real emitter on either side is refused.
TEST(Emitter, AddCountedCountsAsIfTheInstructionsWereAddedHere) {
  Emitter whole = Emitter::counting(), head = Emitter::counting(), tail = Emitter::counting();
  for (Emitter* e : {&whole, &head}) some_program(*e);
  for (Emitter* e : {&whole, &tail}) {
    some_program(*e);
    e->add("sync", "tiles=0xffff counters=0x1ffff units=0x3ff");
  }
  head.add_counted(tail);
  EXPECT_EQ(head.words(), whole.words());
  EXPECT_GT(head.words(), tail.words());
  EXPECT_TRUE(head.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff"));
  EXPECT_TRUE(whole.drop_last("sync", "tiles=0xffff counters=0x1ffff units=0x3ff"));
  for (Emitter* e : {&whole, &head}) e->add("sync", "tiles=0xffff units=0x3ff signal=1");
  EXPECT_EQ(head.words(), whole.words());
  EXPECT_EQ(head.finished_bytes(), whole.finished_bytes());
  Emitter real;
  some_program(real);
  some_program(real);
  real.add("sync", "tiles=0xffff units=0x3ff signal=1");
  EXPECT_EQ(real.finished_bytes(), head.finished_bytes());
  const Emitter empty = Emitter::counting();
  const uint32_t before = head.words();
  head.add_counted(empty);
  EXPECT_EQ(head.words(), before);
  Emitter real_too;
  EXPECT_THROW(real_too.add_counted(tail), Error);
  EXPECT_THROW(head.add_counted(real_too), Error);
}

// The instruction text is built with cat() and hex(), which append integers without a stream
// (std::to_chars): the text must be what a stream and printf print, or the programs would change.
TEST(Emitter, PartBytesSplitTheFinishedBitstreamByName) {
  Emitter e;
  e.add("bundle", "s_op=0x0f s_x=5 imm=11");  // "start"
  e.part("a");
  some_program(e);
  e.part("empty");  // nothing in it: not listed
  e.part("b");
  e.add("bundle", "s_op=0x0f s_x=4 imm=10");
  e.part("a");  // a second part of the same name adds to the first
  e.add("w2n", "tiles=0x1 w.addr=0x2000 w=(0 x 3) w.rows=1 n.addr=0x10 n=(1 x 64)");
  Emitter counted = Emitter::counting();
  some_program(counted);
  const uint64_t program = counted.finished_bytes() - Emitter::counting().finished_bytes();
  const container::Bitstream b = e.finish();
  const auto parts = e.part_bytes();
  ASSERT_EQ(parts.size(), 4u);
  EXPECT_EQ(parts[0].first, "start");
  EXPECT_EQ(parts[0].second, 32u);  // the start word and the first bundle
  EXPECT_EQ(parts[1].first, "a");
  EXPECT_EQ(parts[2].first, "b");
  EXPECT_EQ(parts[2].second, 16u);
  EXPECT_EQ(parts[3].first, "end");
  uint64_t w2n = 0;
  {
    Emitter one = Emitter::counting();
    one.add("w2n", "tiles=0x1 w.addr=0x2000 w=(0 x 3) w.rows=1 n.addr=0x10 n=(1 x 64)");
    w2n = one.finished_bytes() - Emitter::counting().finished_bytes();
  }
  EXPECT_EQ(parts[1].second, program + w2n);
  uint64_t sum = 0;
  for (const auto& [name, bytes] : parts) sum += bytes;
  EXPECT_EQ(sum, b.data.size());
}

TEST(Emitter, CatAndHexPrintIntegersAsAStreamAndPrintfDo) {
  const int64_t values[] = {0,
                            1,
                            -1,
                            9,
                            -10,
                            4095,
                            -65536,
                            std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()};
  for (const int64_t v : values) {
    std::ostringstream stream;
    stream << "(" << v << " x " << static_cast<int>(v % 1000) << ")" << 'm' << std::string("s")
           << static_cast<uint32_t>(v) << static_cast<uint64_t>(v);
    EXPECT_EQ(cat("(", v, " x ", static_cast<int>(v % 1000), ")", 'm', std::string("s"),
                  static_cast<uint32_t>(v), static_cast<uint64_t>(v)),
              stream.str());
    char printed[32];
    std::snprintf(printed, sizeof printed, "0x%llx",
                  static_cast<unsigned long long>(static_cast<uint64_t>(v)));
    EXPECT_EQ(hex(static_cast<uint64_t>(v)), printed);
  }
  // The integer types a stream prints as characters or words, and the other widths, with text
  // alone (the direct path when every argument is direct): as the stream prints them.
  EXPECT_EQ(cat("x", uint8_t{65}, int8_t{66}, 'C'), "xABC");
  EXPECT_EQ(cat("b", true, false), "b10");
  EXPECT_EQ(cat(short{-7}, ' ', static_cast<unsigned short>(65535), ' ', -3LL, ' ', size_t{1} << 40,
                ' ', 12L),
            "-7 65535 -3 1099511627776 12");
  // (Other types still go through the stream: a float prints as a stream prints it.)
  EXPECT_EQ(cat("f=", 0.5f, " b=", true), "f=0.5 b=1");
}

}  // namespace
}  // namespace tinycoral::compiler
