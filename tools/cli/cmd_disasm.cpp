// `tinycoral disasm`: the assembly of every bitstream in a *_edgetpu.tflite (or of a raw
// bitstream), with relocated MOVI immediates marked; `--check` is the round-trip gate (decode ->
// encode and print -> parse -> encode must give the same bytes); `--table` prints the opcode table
// that docs/isa.md embeds.
#include <cstring>
#include <iostream>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "isa/isa.h"
#include "isa/relocate.h"

namespace tinycoral::cli {
namespace {

// One bitstream to show or check, with what the file says about it.
struct Listing {
  std::string label;  // e.g. "model.tflite: executable 1 (EXECUTION_ONLY), bitstream 0"
  std::vector<uint8_t> bytes;
  std::vector<std::pair<int64_t, std::string>> relocations;  // offset_bit, description
  uint32_t first_seq = 0;
};

bool is_tflite(std::span<const uint8_t> bytes) {
  return bytes.size() >= 8 && std::memcmp(bytes.data() + 4, "TFL3", 4) == 0;
}

std::vector<Listing> tflite_listings(const std::string& path, std::span<const uint8_t> bytes,
                                     int only_executable);

std::vector<Listing> collect(const std::string& path, int only_executable) {
  const std::vector<uint8_t> bytes = read_file(path);
  if (is_tflite(bytes)) return tflite_listings(path, bytes, only_executable);
  if (only_executable > 0) fail(path, ": a raw bitstream has only executable 0");
  return {Listing{path + ": raw bitstream", bytes, {}, 0}};
}

std::vector<isa::Annotation> relocation_notes(const Listing& listing,
                                              std::span<const isa::Instruction> program) {
  std::vector<isa::Annotation> notes;
  for (const auto& [bit, text] : listing.relocations) {
    const auto where = isa::locate_bit(program, bit);
    if (!where) {
      notes.push_back({0, cat("reloc ", text, " at bit ", bit, " is outside the bitstream")});
      continue;
    }
    const auto& in = program[where->instruction];
    if (isa::is_movi_immediate(program, bit)) {
      notes.push_back({in.word_offset, "reloc " + text});
    } else {
      notes.push_back({in.word_offset, cat("reloc ", text, " at ", where->field->name, " bit ",
                                           where->bit_in_field, " (not a MOVI immediate)")});
    }
  }
  return notes;
}

void disassemble(const Listing& listing) {
  const auto program = with_context(listing.label, [&] { return isa::decode(listing.bytes); });
  std::cout << "; " << listing.label << ": " << listing.bytes.size() / isa::kWordBytes << " words, "
            << program.size() << " instructions\n";
  std::cout << isa::print_program(program, relocation_notes(listing, program));
  for (const auto& d : isa::check(program, listing.first_seq)) {
    std::cout << "; check: word " << d.word_offset << ": " << d.message << "\n";
  }
}

// Returns true if both round trips give the listing's bytes back.
bool round_trip(const Listing& listing) {
  std::vector<isa::Instruction> program;
  try {
    program = isa::decode(listing.bytes);
  } catch (const Error& e) {
    std::cout << listing.label << ": does not decode: " << e.what() << "\n";
    return false;
  }
  bool ok = true;
  if (isa::encode(program) != listing.bytes) {
    std::cout << listing.label << ": decode -> encode differs\n";
    ok = false;
  }
  try {
    if (isa::encode(isa::parse(isa::print_program(program))) != listing.bytes) {
      std::cout << listing.label << ": print -> parse -> encode differs\n";
      ok = false;
    }
  } catch (const Error& e) {
    std::cout << listing.label << ": printed text does not parse: " << e.what() << "\n";
    ok = false;
  }
  for (const auto& d : isa::check(program, listing.first_seq)) {
    std::cout << listing.label << ": word " << d.word_offset << ": " << d.message << "\n";
  }
  return ok;
}

void print_table() {
  std::cout << "| opcode | mnemonic | words | unit | seq | summary |\n|---|---|---|---|---|---|\n";
  for (const auto& spec : isa::opcode_table()) {
    char op[8];
    std::snprintf(op, sizeof op, "0x%02x", unsigned{spec.opcode});
    std::cout << "| " << op << " | " << spec.mnemonic << " | " << unsigned{spec.words} << " | "
              << (spec.unit == isa::Unit::kTile ? "tile" : "scalar") << " | "
              << (spec.sequenced ? "yes" : "no") << " | " << spec.summary << " |\n";
  }
  for (const auto& spec : isa::opcode_table()) {
    char op[8];
    std::snprintf(op, sizeof op, "0x%02x", unsigned{spec.opcode});
    std::cout << "\n#### " << op << " " << spec.mnemonic << " (" << unsigned{spec.words}
              << " words)\n\n| bits | field | s | meaning |\n|---|---|---|---|\n";
    for (const auto& f : spec.fields) {
      std::cout << "| " << f.lo;
      if (f.width > 1) std::cout << "-" << f.lo + f.width - 1;
      std::cout << " | " << f.name << " | " << (f.is_signed ? "s" : "") << " | " << f.meaning
                << " |\n";
    }
  }
}

}  // namespace

void add_disasm_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> files;
    int executable = -1;
    bool check = false;
    bool table = false;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand(
      "disasm", "Disassemble the Edge TPU programs in *_edgetpu.tflite files or raw bitstreams");
  cmd->add_option("files", opts->files, "*_edgetpu.tflite files or raw bitstreams");
  cmd->add_option("--executable", opts->executable,
                  "only executable N (counted over the file's edgetpu ops and packages)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--check", opts->check,
                "round-trip every bitstream (decode->encode, print->parse->encode); exit 1 on any "
                "difference");
  cmd->add_flag("--table", opts->table, "print the opcode and field table (markdown)");
  cmd->callback([opts] {
    if (opts->table) {
      print_table();
      return;
    }
    if (opts->files.empty()) fail("disasm: give at least one file");
    if (!opts->check) {
      for (const auto& file : opts->files) {
        for (const auto& listing : collect(file, opts->executable)) disassemble(listing);
      }
      return;
    }
    size_t total = 0, identical = 0;
    for (const auto& file : opts->files) {
      for (const auto& listing : collect(file, opts->executable)) {
        ++total;
        identical += round_trip(listing) ? 1 : 0;
      }
    }
    std::cout << total << " bitstreams, " << identical << " byte-identical\n";
    if (identical != total) exit_code = 1;
  });
}

namespace {

std::vector<Listing> tflite_listings(const std::string& path, std::span<const uint8_t>, int) {
  fail(path, ": reading TFLite models is not wired in yet; give a raw bitstream");
}

}  // namespace

}  // namespace tinycoral::cli
