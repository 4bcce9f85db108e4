// The scalar entries of a custom operator's FlexBuffers options map (PosenetDecoderOp,
// TFLite_Detection_PostProcess), read once at load time. Malformed maps throw Error.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>

namespace tinycoral::host::ops {

class CustomOptions {
 public:
  // `op_name` prefixes every error message.
  CustomOptions(std::span<const uint8_t> flexbuffer, std::string op_name);

  bool has(const std::string& key) const { return values_.count(key) != 0; }
  // The value of `key`; throws Error when absent (required) ...
  double number(const std::string& key) const;
  // ... or returns `fallback` (optional).
  double number_or(const std::string& key, double fallback) const;
  // An integer key within [lo, hi].
  int32_t integer(const std::string& key, int32_t lo, int32_t hi) const;
  int32_t integer_or(const std::string& key, int32_t fallback, int32_t lo, int32_t hi) const;

 private:
  std::string op_name_;
  std::map<std::string, double> values_;  // numbers and booleans (true = 1)
};

}  // namespace tinycoral::host::ops
