// The Layout builder behind the declarative opcode table (table_builder.h).
#include "isa/table_builder.h"

#include <algorithm>

namespace tinycoral::isa::detail {

using Format = FieldSpec::Format;

Layout::Layout(uint8_t opcode, std::string mnemonic, uint8_t words, Unit unit, bool sequenced,
               std::string summary) {
  decl_.opcode = opcode;
  decl_.mnemonic = std::move(mnemonic);
  decl_.words = words;
  decl_.unit = unit;
  decl_.sequenced = sequenced;
  decl_.summary = std::move(summary);
  // isa.md 1.1: every opcode carries the predication header; only 0x20 bundles use it.
  u("gate", 0, 1, "1 = execute only if predicate p[pred_reg] equals pred_pol");
  u("pred_reg", 1, 3, "predicate register tested when gate = 1");
  u("pred_pol", 4, 1, "predicate value required when gate = 1");
  rsv(5, 1);
  hex("opcode", 6, 6, "operation code; fixes the instruction length");
}

Layout& Layout::add(std::string name, uint16_t lo, uint16_t width, bool is_signed,
                    std::string meaning, Format format) {
  decl_.fields.push_back({std::move(name), lo, width, is_signed, std::move(meaning), format});
  return *this;
}

Layout& Layout::u(std::string name, uint16_t lo, uint16_t width, std::string meaning) {
  return add(std::move(name), lo, width, false, std::move(meaning), Format::kDec);
}
Layout& Layout::s(std::string name, uint16_t lo, uint16_t width, std::string meaning) {
  return add(std::move(name), lo, width, true, std::move(meaning), Format::kDec);
}
Layout& Layout::hex(std::string name, uint16_t lo, uint16_t width, std::string meaning) {
  return add(std::move(name), lo, width, false, std::move(meaning), Format::kHex);
}
Layout& Layout::f32(std::string name, uint16_t lo, std::string meaning) {
  return add(std::move(name), lo, 32, false, std::move(meaning), Format::kF32);
}

Layout& Layout::rsv(uint16_t lo, uint16_t width) {
  while (width > 0) {
    const uint16_t chunk = std::min<uint16_t>(width, 64);
    add("rsv" + std::to_string(lo), lo, chunk, false, "reserved: meaning unknown", Format::kHex);
    lo = static_cast<uint16_t>(lo + chunk);
    width = static_cast<uint16_t>(width - chunk);
  }
  return *this;
}

Layout& Layout::tile_header(uint16_t seq_lo, uint16_t seq_width) {
  hex("tiles", 12, 16, "tile mask: bit t = tile t executes it");
  if (seq_lo > 28)
    hex("x28", 28, static_cast<uint16_t>(seq_lo - 28),
        "0 except in two LSTM instructions sent to no tile (tiles 0): 0x4c0, 0x4c7; "
        "register-indirect: bit 10 on, bits 5-9 the scalar register holding the tile mask, 0-4 "
        "the one holding the narrow address (0: none); the simulator models both (docs/chip.md)");
  return u("seq", seq_lo, seq_width,
           "sequence number: running count of tile-dispatched instructions (isa.md 1.3)");
}

Layout& Layout::nest(std::string name, std::string prefix, const NestGeometry& g,
                     std::string unit) {
  NestDecl nest{name, {}};
  for (int k = 0; k < g.levels; ++k) {
    const auto off = static_cast<uint16_t>(k * g.stride);
    const std::string level = std::to_string(k);
    std::array<std::string, 3> names{prefix + "inc" + level, prefix + "cnt" + level, ""};
    s(names[0], static_cast<uint16_t>(g.inc_lo + off), g.inc_width,
      name + " level " + level + ": signed increment (" + unit + ")");
    u(names[1], static_cast<uint16_t>(g.cnt_lo + off), g.cnt_width,
      name + " level " + level + ": iterations - 1");
    if (g.mode_width > 0) {
      names[2] = prefix + "mode" + level;
      u(names[2], static_cast<uint16_t>(g.mode_lo + off), g.mode_width,
        name + " level " + level + ": mode (low bits of the next level's increment)");
    }
    nest.levels.push_back(std::move(names));
  }
  decl_.nests.push_back(std::move(nest));
  return *this;
}

Layout& Layout::nest_of(std::string name, std::vector<std::array<std::string, 3>> levels) {
  decl_.nests.push_back({std::move(name), std::move(levels)});
  return *this;
}

}  // namespace tinycoral::isa::detail
