// The operation log in edgetpu_compiler's format (operation_log.h).
#include "compiler/operation_log.h"

#include <iomanip>
#include <sstream>

#include "compiler/version.h"

namespace tinycoral::compiler {

std::vector<LogRow> log_rows(const Graph& graph, const Partition& partition) {
  std::vector<LogRow> rows;
  for (const OpDecision& d : partition.decisions) {
    const std::string& name = graph.ops.at(static_cast<size_t>(d.op)).name;
    bool found = false;
    for (LogRow& row : rows) {
      if (row.op == name && row.status == d.reason) {
        ++row.count;
        found = true;
        break;
      }
    }
    if (!found) rows.push_back(LogRow{name, 1, d.mapped, d.reason});
  }
  return rows;
}

std::string operator_table(const std::vector<LogRow>& rows) {
  std::ostringstream out;
  out << std::left << std::setw(31) << "Operator" << std::setw(11) << "Count"
      << "Status\n\n";
  for (const LogRow& row : rows) {
    out << std::left << std::setw(31) << row.op << std::setw(11) << row.count << row.status << "\n";
  }
  return out.str();
}

std::string operation_log(const std::string& input_path, const std::string& output_path,
                          const std::vector<LogRow>& rows) {
  std::ostringstream out;
  out << "Edge TPU Compiler version " << kCompilerVersion << "\n";
  out << "Input: " << input_path << "\n";
  out << "Output: " << output_path << "\n\n";
  out << operator_table(rows);
  return out.str();
}

}  // namespace tinycoral::compiler
