// What the printer and the parser of the assembly syntax (docs/isa.md) share: which fields a loop
// nest covers and the spelling of float fields. Internal to src/isa/.
#pragma once

#include <string>
#include <vector>

#include "isa/isa.h"

namespace tinycoral::isa::detail {

// For each field of `spec`: the index of the loop nest that covers it, or -1.
std::vector<int> nest_membership(const OpcodeSpec& spec);

// The nop alias: a 0x20 bundle with every field zero (isa.md 1.4).
inline constexpr std::string_view kNopMnemonic = "nop";

}  // namespace tinycoral::isa::detail
