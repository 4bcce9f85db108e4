// libFuzzer target for the instruction decoder: any bytes must decode or throw Error, and whatever
// decodes must check, print, parse back and re-encode to the same bytes, never crash or hang.
#include <cstdint>
#include <cstdlib>
#include <span>

#include "common/error.h"
#include "isa/isa.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tinycoral;
  const std::span<const uint8_t> bytes(data, size);
  std::vector<isa::Instruction> program;
  try {
    program = isa::decode(bytes);
  } catch (const Error&) {
    return 0;
  }
  (void)isa::check(program);
  if (isa::encode(program) != std::vector<uint8_t>(bytes.begin(), bytes.end())) std::abort();
  const std::string text = isa::print_program(program);
  const auto parsed = isa::parse(text);  // printed text must always parse: an Error is a bug
  if (isa::encode(parsed) != std::vector<uint8_t>(bytes.begin(), bytes.end())) std::abort();
  // The parser on arbitrary text must not crash either.
  try {
    (void)isa::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const Error&) {
  }
  return 0;
}
