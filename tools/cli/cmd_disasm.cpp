// `tinycoral disasm`: the assembly of every bitstream in a *_edgetpu.tflite (or of a raw
// bitstream), with relocated MOVI immediates marked; `--check` is the round-trip gate (decode ->
// encode and print -> parse -> encode must give the same bytes); `--table` prints the opcode table
// that docs/isa.md embeds.
#include <cstring>
#include <iostream>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "container/edgetpu_model.h"
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
  if (bytes.empty()) fail(path, ": empty file");
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

// Returns true if both round trips give the listing's bytes back. A bitstream that does not
// decode at all is bad input (an Error), not a round-trip difference.
bool round_trip(const Listing& listing) {
  const auto program = with_context(listing.label, [&] { return isa::decode(listing.bytes); });
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
      std::cout << isa::table_markdown();
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

std::string relocation_text(const container::FieldOffset& fo) {
  static const char* const kKinds[] = {"OUTPUT", "INPUT", "PARAMETER", "SCRATCH"};
  const auto kind = static_cast<int>(fo.meta.desc);
  std::string text = kind >= 0 && kind < 4 ? kKinds[kind] : cat("kind", kind);
  text += fo.meta.position == container::Half::kUpper32 ? " hi" : " lo";
  if (!fo.meta.name.empty()) text += " " + fo.meta.name;
  if (fo.meta.batch != 0) text += cat(" batch ", fo.meta.batch);
  return text;
}

// Every bitstream of every executable of every edgetpu op and package, executables numbered in
// that order; sequence numbers continue across the bitstreams of one executable (isa.md 1.3).
std::vector<Listing> tflite_listings(const std::string& path, std::span<const uint8_t> bytes,
                                     int only_executable) {
  const auto model = with_context(path, [&] { return container::read_edgetpu_model(bytes); });
  std::vector<Listing> out;
  int index = 0;
  for (const auto& op : model.edgetpu_ops) {
    for (const auto& package : op.options.packages) {
      for (const auto& exe : package.executables) {
        const int this_index = index++;
        if (only_executable >= 0 && this_index != only_executable) continue;
        uint32_t seq = 0;
        for (size_t b = 0; b < exe.bitstreams.size(); ++b) {
          Listing listing;
          listing.label = cat(path, ": executable ", this_index, " (",
                              container::executable_type_name(exe.type), "), bitstream ", b);
          listing.bytes = exe.bitstreams[b].data;
          for (const auto& fo : exe.bitstreams[b].field_offsets) {
            listing.relocations.emplace_back(fo.offset_bit, relocation_text(fo));
          }
          listing.first_seq = seq;
          try {
            seq += isa::count_sequenced(isa::decode(listing.bytes));
          } catch (const Error&) {
            // Reported when the listing is shown or checked.
          }
          out.push_back(std::move(listing));
        }
      }
    }
  }
  if (only_executable >= index) {
    fail(path, ": no executable ", only_executable, " (the file has ", index, ")");
  }
  if (out.empty() && only_executable < 0) fail(path, ": no Edge TPU executables in this model");
  return out;
}

}  // namespace

}  // namespace tinycoral::cli
