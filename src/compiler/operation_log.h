// edgetpu_compiler's operation log: the header lines and the operator table (operator, count,
// status), one row per operator type and status, where the status of a CPU operator is the reason
// it was not mapped. `tinycoral compile` writes it to NAME_edgetpu.log and prints it with -s.
#pragma once

#include <string>
#include <vector>

#include "compiler/graph.h"
#include "compiler/partition.h"

namespace tinycoral::compiler {

struct LogRow {
  std::string op;
  int count = 0;
  bool mapped = false;
  std::string status;  // kMapped or the reason
};

// Rows in the order of each (operator, status) pair's first appearance in the graph.
std::vector<LogRow> log_rows(const Graph& graph, const Partition& partition);

// The whole log: version line, input and output paths, then the table.
std::string operation_log(const std::string& input_path, const std::string& output_path,
                          const std::vector<LogRow>& rows);

// Just the table, as `-s` prints it.
std::string operator_table(const std::vector<LogRow>& rows);

}  // namespace tinycoral::compiler
