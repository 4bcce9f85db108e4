// The opcode table as markdown: docs/isa.md embeds this text verbatim (a test compares them), so
// the documentation cannot drift from the table the decoder uses.
#include <cstdio>

#include "isa/isa.h"

namespace tinycoral::isa {
namespace {

std::string hex2(uint8_t v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", unsigned{v});
  return buf;
}

// Markdown cells cannot hold a bare '|'.
std::string cell(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::string table_markdown() {
  std::string out =
      "| opcode | mnemonic | words | unit | seq | summary |\n|---|---|---|---|---|---|\n";
  for (const auto& spec : opcode_table()) {
    out += "| " + hex2(spec.opcode) + " | " + std::string(spec.mnemonic) + " | " +
           std::to_string(spec.words) + " | " + (spec.unit == Unit::kTile ? "tile" : "scalar") +
           " | " + (spec.sequenced ? "yes" : "no") + " | " + cell(spec.summary) + " |\n";
  }
  for (const auto& spec : opcode_table()) {
    out += "\n#### " + hex2(spec.opcode) + " " + std::string(spec.mnemonic) + " (" +
           std::to_string(spec.words) + " words)\n\n";
    for (const auto& nest : spec.nests) {
      out += "Loop nest `" + std::string(nest.name) + "`: " + std::to_string(nest.levels.size()) +
             " levels.\n";
    }
    if (!spec.nests.empty()) out += "\n";
    out += "| bits | field | signed | meaning |\n|---|---|---|---|\n";
    for (const auto& f : spec.fields) {
      out += "| " + std::to_string(f.lo);
      if (f.width > 1) out += "-" + std::to_string(f.lo + f.width - 1);
      out += " | " + std::string(f.name) + " | " + (f.is_signed ? "s" : "") + " | " +
             cell(f.meaning) + " |\n";
    }
  }
  return out;
}

}  // namespace tinycoral::isa
