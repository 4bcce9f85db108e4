// `tinycoral asm FILE.s -o OUT.bin`: assemble the text syntax of docs/isa.md into a raw bitstream.
// Structural findings of isa::check (frame, lengths, sequence numbers) are printed as warnings:
// fragments and experiments are legitimate, but a program the chip runs must pass them.
#include <iostream>
#include <string>

#include "commands.h"
#include "common/error.h"
#include "common/file.h"
#include "isa/isa.h"

namespace tinycoral::cli {

void add_asm_command(CLI::App& app) {
  struct Options {
    std::string input;
    std::string output;
  };
  auto opts = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("asm", "Assemble Edge TPU assembly text into a raw bitstream");
  cmd->add_option("file", opts->input, "assembly source (.s)")->required();
  cmd->add_option("-o,--output", opts->output, "bitstream to write")->required();
  cmd->callback([opts] {
    const std::vector<uint8_t> source = read_file(opts->input, limits::kMaxTextFileBytes);
    const std::string_view text(reinterpret_cast<const char*>(source.data()), source.size());
    const auto program = with_context(opts->input, [&] { return isa::parse(text); });
    if (program.empty()) fail(opts->input, ": no instructions");
    for (const auto& d : isa::check(program)) {
      std::cerr << opts->input << ": warning: word " << d.word_offset << ": " << d.message << "\n";
    }
    write_file(opts->output, isa::encode(program));
  });
}

}  // namespace tinycoral::cli
