// Looking the pre-decoders' fields up in the ISA table (field_bits.h).
#include "chip/field_bits.h"

#include <stdexcept>
#include <string>

#include "isa/isa.h"

namespace tinycoral::chip {

Field::Field(uint8_t opcode, std::string_view name) {
  const isa::OpcodeSpec* spec = isa::find_opcode(opcode);
  const isa::FieldSpec* field = spec ? spec->field(name) : nullptr;
  if (!field)
    throw std::logic_error("the ISA table has no field " + std::string(name) + " for opcode " +
                           std::to_string(opcode));
  lo = field->lo;
  width = field->width;
}

WalkFields::WalkFields(uint8_t opcode, std::string_view prefix, int levels_) : levels(levels_) {
  for (int k = 0; k < levels; ++k) {
    const std::string level = std::to_string(k);
    inc[k] = Field(opcode, std::string(prefix) + "inc" + level);
    cnt[k] = Field(opcode, std::string(prefix) + "cnt" + level);
  }
}

}  // namespace tinycoral::chip
