// Executable-by-executable comparison of two compiled models (compare.h).
#include "compiler/compare.h"

#include <algorithm>
#include <sstream>

#include "common/error.h"
#include "isa/isa.h"

namespace tinycoral::compiler {

namespace {

// The fields of two instructions of the same opcode whose values differ, "name: a vs b".
std::string field_diffs(const isa::Instruction& a, const isa::Instruction& b) {
  std::string out;
  for (const isa::FieldSpec& f : a.spec->fields) {
    const int64_t va = a.value(f), vb = b.value(f);
    if (va != vb) out += cat(out.empty() ? "" : ", ", f.name, " ", va, " vs ", vb);
  }
  return out;
}

void compare_bitstream(const container::Bitstream& a, const container::Bitstream& b, int index,
                       ExecutableDiff& d) {
  if (a.data == b.data) {
    if (a.field_offsets != b.field_offsets) {
      d.relocations_equal = false;
      d.notes.push_back(cat("bitstream ", index, ": relocations differ"));
    }
    return;
  }
  d.instructions_equal = false;
  const auto pa = isa::decode(a.data);
  const auto pb = isa::decode(b.data);
  const size_t n = std::min(pa.size(), pb.size());
  if (pa.size() != pb.size() || a.data.size() != b.data.size()) {
    d.notes.push_back(cat("bitstream ", index, ": ", a.data.size() / isa::kWordBytes, " vs ",
                          b.data.size() / isa::kWordBytes, " words, ", pa.size(), " vs ", pb.size(),
                          " instructions"));
  }
  for (size_t i = 0; i < n; ++i) {
    if (pa[i].bytes == pb[i].bytes) continue;
    // The start word only states the length (reported above); look for the first real difference.
    if (i == 0 && pa[i].spec == pb[i].spec && pa[i].spec->mnemonic == "start") continue;
    if (pa[i].spec != pb[i].spec) {
      d.notes.push_back(cat("bitstream ", index, ": first difference at instruction ", i, " (word ",
                            pa[i].word_offset, "): ", pa[i].spec->mnemonic, " vs ",
                            pb[i].spec->mnemonic));
    } else {
      d.notes.push_back(cat("bitstream ", index, ": first difference at instruction ", i, " (word ",
                            pa[i].word_offset, ", ", pa[i].spec->mnemonic,
                            "): ", field_diffs(pa[i], pb[i])));
    }
    d.notes.push_back("  A: " + isa::print(pa[i]));
    d.notes.push_back("  B: " + isa::print(pb[i]));
    return;
  }
  d.notes.push_back(cat("bitstream ", index, ": equal up to the shorter program"));
}

void compare_parameters(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                        ExecutableDiff& d) {
  if (a == b) return;
  d.parameters_equal = false;
  size_t first = 0, count = 0;
  const size_t n = std::min(a.size(), b.size());
  bool found = false;
  for (size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) {
      if (!found) first = i;
      found = true;
      ++count;
    }
  }
  d.notes.push_back(cat("parameters: ", a.size(), " vs ", b.size(), " bytes, ", count,
                        " differing bytes", found ? cat(", first at byte ", first) : ""));
}

}  // namespace

bool CompareReport::identical() const {
  if (!notes.empty()) return false;
  return std::all_of(executables.begin(), executables.end(), [](const ExecutableDiff& d) {
    return d.instructions_equal && d.relocations_equal && d.parameters_equal && d.notes.empty();
  });
}

std::string CompareReport::text() const {
  std::ostringstream out;
  for (const std::string& n : notes) out << n << "\n";
  for (const ExecutableDiff& d : executables) {
    out << "package " << d.package << " executable " << d.executable << " (" << d.type
        << "): " << (d.instructions_equal ? "instructions identical" : "instructions differ")
        << ", " << (d.parameters_equal ? "parameters identical" : "parameters differ") << "\n";
    for (const std::string& n : d.notes) out << "  " << n << "\n";
  }
  out << (identical() ? "identical\n" : "different\n");
  return out.str();
}

CompareReport compare_models(const container::EdgeTpuModel& a, const container::EdgeTpuModel& b) {
  CompareReport r;
  if (a.edgetpu_ops.size() != b.edgetpu_ops.size()) {
    r.notes.push_back(cat("edgetpu ops: ", a.edgetpu_ops.size(), " vs ", b.edgetpu_ops.size()));
  }
  const size_t ops = std::min(a.edgetpu_ops.size(), b.edgetpu_ops.size());
  int package_index = 0;
  for (size_t o = 0; o < ops; ++o) {
    const auto& pa = a.edgetpu_ops[o].options.packages;
    const auto& pb = b.edgetpu_ops[o].options.packages;
    if (pa.size() != pb.size())
      r.notes.push_back(cat("op ", o, ": packages ", pa.size(), " vs ", pb.size()));
    for (size_t p = 0; p < std::min(pa.size(), pb.size()); ++p, ++package_index) {
      const auto& ea = pa[p].executables;
      const auto& eb = pb[p].executables;
      if (ea.size() != eb.size()) {
        r.notes.push_back(
            cat("package ", package_index, ": executables ", ea.size(), " vs ", eb.size()));
      }
      for (size_t e = 0; e < std::min(ea.size(), eb.size()); ++e) {
        ExecutableDiff d;
        d.package = package_index;
        d.executable = static_cast<int>(e);
        d.type = container::executable_type_name(ea[e].type);
        if (ea[e].type != eb[e].type) {
          d.notes.push_back(
              cat("type ", d.type, " vs ", container::executable_type_name(eb[e].type)));
        }
        if (ea[e].bitstreams.size() != eb[e].bitstreams.size()) {
          d.instructions_equal = false;
          d.notes.push_back(
              cat("bitstreams: ", ea[e].bitstreams.size(), " vs ", eb[e].bitstreams.size()));
        }
        for (size_t s = 0; s < std::min(ea[e].bitstreams.size(), eb[e].bitstreams.size()); ++s) {
          compare_bitstream(ea[e].bitstreams[s], eb[e].bitstreams[s], static_cast<int>(s), d);
        }
        compare_parameters(ea[e].parameters, eb[e].parameters, d);
        if (ea[e].dma_hints != eb[e].dma_hints) d.notes.push_back("DMA hints differ");
        if (ea[e].input_layers != eb[e].input_layers) d.notes.push_back("input layers differ");
        if (ea[e].output_layers != eb[e].output_layers) d.notes.push_back("output layers differ");
        if (ea[e].used_narrow_memory_bytes_per_tile != eb[e].used_narrow_memory_bytes_per_tile) {
          d.notes.push_back(cat("narrow bytes per tile: ", ea[e].used_narrow_memory_bytes_per_tile,
                                " vs ", eb[e].used_narrow_memory_bytes_per_tile));
        }
        r.executables.push_back(std::move(d));
      }
    }
  }
  return r;
}

}  // namespace tinycoral::compiler
