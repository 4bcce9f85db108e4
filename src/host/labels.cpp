// Label file parsing (labels.h).
#include "host/labels.h"

#include <cctype>
#include <sstream>

#include "common/error.h"
#include "common/file.h"

namespace tinycoral::host {

namespace {

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  while (a < b && std::isspace(static_cast<unsigned char>(s[a]))) ++a;
  while (b > a && std::isspace(static_cast<unsigned char>(s[b - 1]))) --b;
  return s.substr(a, b - a);
}

}  // namespace

Labels Labels::parse(const std::string& text) {
  Labels out;
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  for (; std::getline(in, line); ++number) {
    const std::string t = trim(line);
    if (t.empty()) continue;
    size_t digits = 0;
    while (digits < t.size() && digits < 18 && std::isdigit(static_cast<unsigned char>(t[digits])))
      ++digits;
    if (digits > 0 && digits < t.size() &&
        (std::isspace(static_cast<unsigned char>(t[digits])) || t[digits] == ':')) {
      size_t rest = digits;
      while (rest < t.size() &&
             (std::isspace(static_cast<unsigned char>(t[rest])) || t[rest] == ':'))
        ++rest;
      out.labels_[std::stoll(t.substr(0, digits))] = t.substr(rest);
    } else {
      out.labels_[number] = t;
    }
  }
  return out;
}

Labels Labels::read(const std::filesystem::path& path) {
  const auto bytes = read_file(path, limits::kMaxTextFileBytes);
  return parse(std::string(bytes.begin(), bytes.end()));
}

std::string Labels::at(int64_t index) const {
  auto it = labels_.find(index);
  return it == labels_.end() ? std::string() : it->second;
}

}  // namespace tinycoral::host
