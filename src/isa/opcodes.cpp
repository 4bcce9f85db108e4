// The opcode table of isa.h, built once from the declarations in table_*.cpp: fields sorted by
// bit position, loop nests resolved to field indices, lookup by opcode and mnemonic.
#include <algorithm>
#include <array>
#include <stdexcept>

#include "isa/isa.h"
#include "isa/table_builder.h"

namespace tinycoral::isa {
namespace {

struct Table {
  std::vector<detail::OpcodeDecl> decls;  // owns every string the specs view
  std::vector<std::vector<FieldSpec>> fields;
  std::vector<std::vector<LoopNestSpec>> nests;
  std::vector<OpcodeSpec> specs;
  std::array<int16_t, 64> by_opcode{};

  Table() {
    detail::add_tile_op_opcodes(decls);
    detail::add_dma_opcodes(decls);
    detail::add_scalar_opcodes(decls);
    std::sort(decls.begin(), decls.end(),
              [](const auto& a, const auto& b) { return a.opcode < b.opcode; });
    fields.resize(decls.size());
    nests.resize(decls.size());
    by_opcode.fill(-1);
    for (size_t i = 0; i < decls.size(); ++i) {
      auto& d = decls[i];
      std::stable_sort(d.fields.begin(), d.fields.end(),
                       [](const auto& a, const auto& b) { return a.lo < b.lo; });
      for (const auto& f : d.fields) {
        fields[i].push_back(
            {f.name, f.lo, static_cast<uint8_t>(f.width), f.is_signed, f.meaning, f.format});
      }
      for (const auto& n : d.nests) {
        LoopNestSpec nest{n.name, {}};
        for (const auto& level : n.levels) {
          LoopLevel out;
          int16_t* slots[3] = {&out.inc, &out.count, &out.mode};
          for (int part = 0; part < 3; ++part) {
            if (level[part].empty()) continue;
            *slots[part] = index_of(d, level[part]);
          }
          nest.levels.push_back(out);
        }
        nests[i].push_back(std::move(nest));
      }
      if (by_opcode[d.opcode] >= 0) throw std::logic_error("isa table: opcode declared twice");
      by_opcode[d.opcode] = static_cast<int16_t>(i);
    }
    for (size_t i = 0; i < decls.size(); ++i) {
      const auto& d = decls[i];
      specs.push_back(
          {d.opcode, d.mnemonic, d.words, d.unit, d.sequenced, fields[i], d.summary, nests[i]});
    }
  }

  static int16_t index_of(const detail::OpcodeDecl& d, const std::string& name) {
    for (size_t k = 0; k < d.fields.size(); ++k) {
      if (d.fields[k].name == name) return static_cast<int16_t>(k);
    }
    throw std::logic_error("isa table: loop nest names an unknown field " + name);
  }
};

const Table& table() {
  static const Table t;
  return t;
}

}  // namespace

const FieldSpec* OpcodeSpec::field(std::string_view name) const {
  for (const auto& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::span<const OpcodeSpec> opcode_table() { return table().specs; }

const OpcodeSpec* find_opcode(uint8_t opcode) {
  if (opcode >= 64) return nullptr;
  const int16_t i = table().by_opcode[opcode];
  return i < 0 ? nullptr : &table().specs[static_cast<size_t>(i)];
}

const OpcodeSpec* find_mnemonic(std::string_view mnemonic) {
  for (const auto& spec : table().specs) {
    if (spec.mnemonic == mnemonic) return &spec;
  }
  return nullptr;
}

}  // namespace tinycoral::isa
