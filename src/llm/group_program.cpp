// A group's program rewritten to one of its positions (group_program.h).
#include "llm/group_program.h"

#include <cstdint>

#include "common/error.h"
#include "compiler/fc_codegen.h"
#include "compiler/fc_value_write.h"

namespace tinycoral::llm {

const std::shared_ptr<runtime::Program>& at_position(const GroupProgram& g, int pos) {
  // Across groups the column's tiles and wide addresses differ too: not a field rewrite.
  if (pos < 0 || pos / 64 != g.made_at / 64)
    fail("position ", pos, " is outside the group of the program made at ", g.made_at);
  for (const isa::EncodedField& f : g.columns)
    g.program->patch_field(0, f.offset_bit, f.width, uint64_t(f.value + pos % 64 - g.made_at % 64));
  for (const isa::EncodedField& f : g.rows)
    g.program->patch_field(0, f.offset_bit, f.width,
                           uint64_t(f.value + compiler::fc_weight_row_unit(pos) -
                                    compiler::fc_weight_row_unit(g.made_at)));
  for (const isa::EncodedField& f : g.landings)
    g.program->patch_field(0, f.offset_bit, f.width,
                           uint64_t(f.value + compiler::fc_value_slot_word(pos) -
                                    compiler::fc_value_slot_word(g.made_at)));
  return g.program;
}

}  // namespace tinycoral::llm
