// The small declarative language the opcode table is written in (table_*.cpp): one Layout per
// opcode lists every field once (name, first bit, width, signedness, meaning); loop nests are
// generated from a one-line description. opcodes.cpp turns the declarations into the OpcodeSpecs of
// isa.h. Internal to src/isa/.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "isa/isa.h"

namespace tinycoral::isa::detail {

struct FieldDecl {
  std::string name;
  uint16_t lo = 0;
  uint16_t width = 0;
  bool is_signed = false;
  std::string meaning;
  FieldSpec::Format format = FieldSpec::Format::kDec;
};

// A loop nest by field names, innermost level first; "" = that part is absent.
struct NestDecl {
  std::string name;
  std::vector<std::array<std::string, 3>> levels;  // {inc, count, mode}
};

struct OpcodeDecl {
  uint8_t opcode = 0;
  std::string mnemonic;
  uint8_t words = 0;
  Unit unit = Unit::kScalar;
  bool sequenced = false;
  std::string summary;
  std::vector<FieldDecl> fields;
  std::vector<NestDecl> nests;
};

// Geometry of a regular loop nest: level k's increment is at inc_lo + k*stride, its count at
// cnt_lo + k*stride, its mode (if mode_width > 0) at mode_lo + k*stride.
struct NestGeometry {
  uint16_t inc_lo = 0;
  uint8_t inc_width = 0;
  uint16_t cnt_lo = 0;
  uint8_t cnt_width = 0;
  uint16_t mode_lo = 0;
  uint8_t mode_width = 0;
  uint16_t stride = 0;
  int levels = 0;
};

class Layout {
 public:
  // Every opcode starts with the predication header (bits 0-5) and the opcode (bits 6-11),
  // isa.md 1.1.
  Layout(uint8_t opcode, std::string mnemonic, uint8_t words, Unit unit, bool sequenced,
         std::string summary);

  Layout& u(std::string name, uint16_t lo, uint16_t width, std::string meaning);    // unsigned
  Layout& s(std::string name, uint16_t lo, uint16_t width, std::string meaning);    // signed
  Layout& hex(std::string name, uint16_t lo, uint16_t width, std::string meaning);  // mask/address
  Layout& f32(std::string name, uint16_t lo, std::string meaning);                  // float32 bits
  // Bits of unknown meaning: fields rsv<lo> of at most 64 bits each.
  Layout& rsv(uint16_t lo, uint16_t width);
  // Tile mask at 12-27, reserved bits up to seq_lo, then the sequence number (isa.md 1.3).
  Layout& tile_header(uint16_t seq_lo, uint16_t seq_width);
  // Fields <prefix>inc<k>, <prefix>cnt<k>, <prefix>mode<k> and the nest `name` over them.
  Layout& nest(std::string name, std::string prefix, const NestGeometry& g, std::string unit);
  // A count-only nest over existing fields (e.g. the main loop of 0x01).
  Layout& nest_of(std::string name, std::vector<std::array<std::string, 3>> levels);

  OpcodeDecl take() { return std::move(decl_); }

 private:
  Layout& add(std::string name, uint16_t lo, uint16_t width, bool is_signed, std::string meaning,
              FieldSpec::Format format);
  OpcodeDecl decl_;
};

// One function per opcode group; opcodes.cpp calls them in order.
void add_tile_op_opcodes(std::vector<OpcodeDecl>& out);  // table_op.cpp: 0x01-0x05, 0x19
void add_dma_opcodes(std::vector<OpcodeDecl>& out);      // table_dma.cpp: 0x10-0x18
void add_scalar_opcodes(
    std::vector<OpcodeDecl>& out);  // table_scalar.cpp: 0x1a, 0x20-0x27, 0x3e, 0x3f

}  // namespace tinycoral::isa::detail
