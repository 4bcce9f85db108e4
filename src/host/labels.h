// Classification label files in both of Google's formats: "INDEX LABEL" per line (as the coral
// models ship, e.g. "0  background"), or one label per line (index = line number).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>

namespace tinycoral::host {

class Labels {
 public:
  Labels() = default;
  // A line that starts with a number followed by white space or ':' names its index; any other
  // non-empty line takes its (0-based) line number. Blank lines are skipped but counted.
  static Labels parse(const std::string& text);
  static Labels read(const std::filesystem::path& path);

  // The label of `index`, or "" when unknown.
  std::string at(int64_t index) const;
  size_t size() const { return labels_.size(); }
  const std::map<int64_t, std::string>& all() const { return labels_; }

 private:
  std::map<int64_t, std::string> labels_;
};

}  // namespace tinycoral::host
