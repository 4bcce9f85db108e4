// The simulator's pre-decoders (src/chip/program.cpp, op_decode.cpp) read fields by their ISA
// table names (src/isa defines the positions). Decoding every bitstream of Google's
// compiled models (both compiler generations) with FieldBits::reads set, every range a decoder
// reads must lie inside one field of the table for that instruction's opcode.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "chip/field_bits.h"
#include "chip/program.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "isa/isa.h"
#include "support/testdata.h"

namespace tinycoral::chip {
namespace {

TEST(DecoderFields, EveryRangeTheDecodersReadIsATableField) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::vector<FieldRead> reads;
  FieldBits::reads = &reads;
  int bitstreams = 0;
  for (const char* gen : {"gen2020", "gen2021"})
    for (const auto& entry : std::filesystem::directory_iterator(dir / gen)) {
      const std::string name = entry.path().filename().string();
      if (!name.ends_with("_edgetpu.tflite")) continue;
      const auto model = container::read_edgetpu_model_file(entry.path());
      for (const auto& op : model.edgetpu_ops)
        for (const auto& package : op.options.packages)
          for (const auto& exe : package.executables)
            for (const auto& bs : exe.bitstreams) {
              Program::decode(bs.data);
              ++bitstreams;
            }
    }
  FieldBits::reads = nullptr;
  ASSERT_GT(bitstreams, 10);
  ASSERT_FALSE(reads.empty());

  std::set<uint8_t> opcodes;
  for (const FieldRead& r : reads) opcodes.insert(r.opcode);
  for (uint8_t opcode : {0x01, 0x10, 0x11, 0x13, 0x14, 0x15, 0x20, 0x23, 0x25, 0x26, 0x27})
    EXPECT_TRUE(opcodes.count(opcode)) << "no field of opcode " << int{opcode} << " was read";

  std::set<std::tuple<uint8_t, uint32_t, uint32_t>> outside;
  for (const FieldRead& r : reads) {
    const isa::OpcodeSpec* spec = isa::find_opcode(r.opcode);
    ASSERT_NE(spec, nullptr);
    bool inside = false;
    for (const isa::FieldSpec& f : spec->fields)
      inside |= f.lo <= r.lo && r.lo + r.width <= uint32_t{f.lo} + f.width;
    if (!inside) outside.insert({r.opcode, r.lo, r.width});
  }
  std::ostringstream list;
  for (const auto& [opcode, lo, width] : outside)
    list << "\n  opcode 0x" << std::hex << int{opcode} << std::dec << " bits " << lo << "+"
         << width;
  EXPECT_TRUE(outside.empty()) << "ranges the decoders read that are not inside one table field:"
                               << list.str();
}

}  // namespace
}  // namespace tinycoral::chip
