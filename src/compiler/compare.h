// Compares two compiled models executable by executable: instruction by instruction (the first
// differing instruction, with the ISA table's names of the fields that differ), then the
// relocations and the parameters byte by byte. `tinycoral compare A B` prints the report; the
// tests use it to demand byte identity with edgetpu_compiler.
#pragma once

#include <string>
#include <vector>

#include "container/edgetpu_model.h"

namespace tinycoral::compiler {

struct ExecutableDiff {
  int package = 0, executable = 0;
  std::string type;
  bool instructions_equal = true;
  bool relocations_equal = true;
  bool parameters_equal = true;
  std::vector<std::string> notes;  // what differs, one finding per line
};

struct CompareReport {
  std::vector<ExecutableDiff> executables;
  std::vector<std::string> notes;  // model-level differences (executable counts, ...)
  bool identical() const;
  std::string text() const;
};

CompareReport compare_models(const container::EdgeTpuModel& a, const container::EdgeTpuModel& b);

}  // namespace tinycoral::compiler
