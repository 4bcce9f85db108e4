// The opcode table is the single source of truth: every opcode seen in real programs is there with
// its length, and the fields of each opcode tile its bits exactly (no gap, no overlap).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

TEST(IsaTable, HasEveryOpcodeSeenInRealProgramsWithItsLength) {
  // isa.md 1.2 and models.md (0x03/0x05 = 17 words, 0x22 = 1).
  const std::vector<std::pair<uint8_t, uint8_t>> lengths = {
      {0x01, 17}, {0x02, 17}, {0x03, 17}, {0x05, 17}, {0x10, 4}, {0x11, 4}, {0x12, 4},
      {0x13, 7},  {0x14, 7},  {0x15, 6},  {0x16, 6},  {0x17, 6}, {0x18, 6}, {0x19, 13},
      {0x1a, 1},  {0x20, 1},  {0x21, 1},  {0x22, 1},  {0x23, 1}, {0x24, 2}, {0x25, 2},
      {0x26, 4},  {0x27, 2},  {0x3e, 1},  {0x3f, 1}};
  for (const auto& [opcode, words] : lengths) {
    const OpcodeSpec* spec = find_opcode(opcode);
    ASSERT_NE(spec, nullptr) << "opcode " << int{opcode};
    EXPECT_EQ(spec->words, words) << spec->mnemonic;
    EXPECT_EQ(find_mnemonic(spec->mnemonic), spec);
  }
  EXPECT_EQ(opcode_table().size(), lengths.size());
  EXPECT_EQ(find_opcode(0x00), nullptr);
  EXPECT_EQ(find_opcode(0x3d), nullptr);
  EXPECT_EQ(find_opcode(200), nullptr);
}

TEST(IsaTable, FieldsTileEveryBitExactlyOnce) {
  for (const auto& spec : opcode_table()) {
    SCOPED_TRACE(std::string(spec.mnemonic));
    std::vector<int> owner(spec.bits(), -1);
    std::set<std::string_view> names;
    for (size_t i = 0; i < spec.fields.size(); ++i) {
      const FieldSpec& f = spec.fields[i];
      EXPECT_TRUE(names.insert(f.name).second) << "duplicate field " << f.name;
      ASSERT_GE(f.width, 1) << f.name;
      ASSERT_LE(f.width, 64) << f.name;
      ASSERT_LE(f.lo + f.width, spec.bits()) << f.name << " runs past the instruction";
      EXPECT_FALSE(f.meaning.empty()) << f.name;
      if (f.reserved()) {
        EXPECT_EQ(f.name, "rsv" + std::to_string(f.lo));
      }
      for (unsigned b = f.lo; b < f.lo + f.width; ++b) {
        EXPECT_EQ(owner[b], -1) << "bit " << b << " is in " << f.name << " and in "
                                << (owner[b] >= 0 ? spec.fields[owner[b]].name : "");
        owner[b] = static_cast<int>(i);
      }
    }
    for (unsigned b = 0; b < spec.bits(); ++b)
      EXPECT_NE(owner[b], -1) << "bit " << b << " has no field";
  }
}

TEST(IsaTable, EveryOpcodeHasThePredicationHeaderAndOpcodeField) {
  // isa.md 1.1: bits 0-5 predication, bits 6-11 opcode.
  for (const auto& spec : opcode_table()) {
    SCOPED_TRACE(std::string(spec.mnemonic));
    const std::vector<std::tuple<const char*, int, int>> header = {
        {"gate", 0, 1}, {"pred_reg", 1, 3}, {"pred_pol", 4, 1}, {"rsv5", 5, 1}, {"opcode", 6, 6}};
    for (const auto& [name, lo, width] : header) {
      const FieldSpec* f = spec.field(name);
      ASSERT_NE(f, nullptr) << name;
      EXPECT_EQ(f->lo, lo);
      EXPECT_EQ(f->width, width);
    }
  }
}

TEST(IsaTable, NamedOpcodesAreExactlyTheTablesOpcodes) {
  // isa::Opcode names each opcode once for code that dispatches on it: every enumerator has a
  // table entry and every table entry an enumerator.
  std::set<int> named;
  for (Opcode op : kOpcodes) {
    EXPECT_NE(find_opcode(op), nullptr) << "0x" << std::hex << int{op};
    EXPECT_TRUE(named.insert(op).second) << "0x" << std::hex << int{op} << " listed twice";
  }
  for (const auto& spec : opcode_table())
    EXPECT_EQ(named.count(spec.opcode), 1u) << spec.mnemonic << " has no isa::Opcode enumerator";
  EXPECT_EQ(named.size(), opcode_table().size());
}

TEST(IsaTable, SequencedOpcodesAreTheTileDispatchedOnes) {
  // isa.md 1.3: seq at 46-61 (ops, 0x19), 46-59 (ring/mesh/wide-narrow), 28-42 (0x1a).
  for (const auto& spec : opcode_table()) {
    SCOPED_TRACE(std::string(spec.mnemonic));
    EXPECT_EQ(spec.sequenced, spec.unit == Unit::kTile);
    EXPECT_EQ(spec.sequenced, spec.opcode < 0x20);
    if (!spec.sequenced) continue;
    ASSERT_NE(spec.field("tiles"), nullptr);
    EXPECT_EQ(spec.field("tiles")->lo, 12);
    EXPECT_EQ(spec.field("tiles")->width, 16);
    const FieldSpec* seq = spec.field("seq");
    ASSERT_NE(seq, nullptr);
    if (spec.opcode == 0x1a) {
      EXPECT_EQ(seq->lo, 28);
      EXPECT_EQ(seq->width, 15);
    } else if (spec.opcode >= 0x10 && spec.opcode <= 0x18) {
      EXPECT_EQ(seq->lo, 46);
      EXPECT_EQ(seq->width, 14);
    } else {
      EXPECT_EQ(seq->lo, 46);
      EXPECT_EQ(seq->width, 16);
    }
  }
}

TEST(IsaTable, OpTtusAreGeneratedSystematically) {
  // isa.md 2.1.1: in/out dims at 211/594 + 37k, par/psum at 973/1276 + 29k.
  const OpcodeSpec* op = find_opcode(0x01);
  ASSERT_NE(op, nullptr);
  for (int k = 0; k < 8; ++k) {
    const std::string n = std::to_string(k);
    EXPECT_EQ(op->field("in.inc" + n)->lo, 211 + 37 * k);
    EXPECT_TRUE(op->field("in.inc" + n)->is_signed);
    EXPECT_EQ(op->field("in.cnt" + n)->lo, 228 + 37 * k);
    EXPECT_EQ(op->field("in.mode" + n)->lo, 246 + 37 * k);
    EXPECT_EQ(op->field("out.inc" + n)->lo, 594 + 37 * k);
    EXPECT_EQ(op->field("par.cnt" + n)->lo, 986 + 29 * k);
    EXPECT_EQ(op->field("psum.mode" + n)->lo, 1303 + 29 * k);
    EXPECT_EQ(op->field("loop" + n)->lo, 62 + 14 * k);
  }
  std::set<std::string_view> nests;
  for (const auto& n : op->nests) nests.insert(n.name);
  EXPECT_EQ(nests, (std::set<std::string_view>{"loops", "in", "out", "par", "psum"}));
  for (const auto& n : op->nests) EXPECT_EQ(n.levels.size(), 8u) << n.name;
}

}  // namespace
}  // namespace tinycoral::isa
