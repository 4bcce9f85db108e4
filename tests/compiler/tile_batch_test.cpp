// TileBatch's sequences (a part's bias load and ops): equal instructions on other tiles go out
// once, within a sequence and across sequences, and never ahead of an instruction on their own
// tiles.
#include "compiler/tile_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "compiler/fields.h"
#include "isa/isa.h"

namespace tinycoral::compiler {
namespace {

// The tile instructions of `e`'s program: (mnemonic, tiles), the frame left out.
std::vector<std::pair<std::string, int64_t>> tile_instructions(Emitter& e) {
  const container::Bitstream program = e.finish();
  std::vector<std::pair<std::string, int64_t>> out;
  for (const isa::Instruction& in : isa::decode(program.data))
    if (in.spec->field("tiles") != nullptr)
      out.emplace_back(std::string(in.spec->mnemonic), in.value("tiles"));
  return out;
}

const std::string kLoad = "w.addr=0x1bc8 w=(1 x 2) n=(1 x 32)(33 x 2) mode=2 fill_size=64";
const std::string kFive = "n.addr=0x10 n=(1 x 64) w.addr=0x2078 w=(1 x 5) w.rows=1";
const std::string kSix = "n.addr=0x10 n=(1 x 64) w.addr=0x2078 w=(1 x 6) w.rows=1";
const std::string kOther = "n.addr=0x20 n=(1 x 64) w.addr=0x2078 w=(1 x 6) w.rows=1";

TEST(TileBatch, EqualInstructionsOfOneSequenceOnOtherTilesGoOutOnce) {
  Emitter e;
  {
    TileBatch batch(e);
    batch.begin_sequence();
    batch.add(0x7, "w2n", kLoad);
    batch.add(0x1, "n2w", kFive);  // bands of two heights alternating over the tiles
    batch.add(0x2, "n2w", kSix);
    batch.add(0x4, "n2w", kFive);
    batch.end_sequence();
  }
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"w2n", 0x7}, {"n2w", 0x5}, {"n2w", 0x2}};
  EXPECT_EQ(tile_instructions(e), expected);
}

TEST(TileBatch, AnInstructionDoesNotJoinOnePastAnInstructionOnItsTiles) {
  Emitter e;
  {
    TileBatch batch(e);
    batch.begin_sequence();
    batch.add(0x1, "n2w", kFive);
    batch.add(0x6, "n2w", kSix);
    batch.add(0x2, "n2w", kFive);  // after tile 1's kSix: stays after it
    batch.add(0x1, "n2w", kFive);  // tile 0's second one: joins tile 1's, not its own first
    batch.end_sequence();
  }
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"n2w", 0x1}, {"n2w", 0x6}, {"n2w", 0x3}};
  EXPECT_EQ(tile_instructions(e), expected);
}

TEST(TileBatch, AnInstructionOfASequenceJoinsAnEqualOneOfAnEarlierSequence) {
  Emitter e;
  {
    TileBatch batch(e);
    batch.begin_sequence();  // one output group on tiles 0-1: its bias load and ops
    batch.add(0x3, "w2n", kLoad);
    batch.add(0x1, "n2w", kFive);
    batch.add(0x2, "n2w", kSix);
    batch.end_sequence();
    batch.begin_sequence();  // another on tiles 2-3: the same load, other ops
    batch.add(0xc, "w2n", kLoad);
    batch.add(0xc, "n2w", kOther);
    batch.end_sequence();
    batch.begin_sequence();  // tile 0 again: its load must stay after its op
    batch.add(0x1, "w2n", kLoad);
    batch.end_sequence();
  }
  const std::vector<std::pair<std::string, int64_t>> expected = {
      {"w2n", 0xf}, {"n2w", 0x1}, {"n2w", 0x2}, {"n2w", 0xc}, {"w2n", 0x1}};
  EXPECT_EQ(tile_instructions(e), expected);
}

// Emitter::drop_last compares a fence's fields with text in both forms: a counting batch's fence
// built as a Fields key, or a counting emitter's fence built through Fields (nothing), is refused
// where it is added, not left to count differently from the emitted program.
TEST(TileBatch, AFenceBuiltAsAKeyOrAsNothingIsRefused) {
  Emitter counting = Emitter::counting();
  TileBatch batch(counting);
  std::string key = std::move(Fields(batch)("units=").hex(0x3ff)).take();
  EXPECT_THROW(batch.add(0x1, Emitter::kDroppable, key), Error);
  batch.add(0x1, "n2w", std::move(key));  // (other instructions' keys are what batches compare)
  batch.add(0x1, Emitter::kDroppable, "units=0x3ff");
  EXPECT_THROW(counting.add(Emitter::kDroppable, std::move(Fields(counting)("tiles=0x1")).take()),
               Error);
  counting.add(Emitter::kDroppable, "tiles=0x1 units=0x3ff");
  EXPECT_TRUE(counting.drop_last(Emitter::kDroppable, "tiles=0x1 units=0x3ff"));
}

}  // namespace
}  // namespace tinycoral::compiler
