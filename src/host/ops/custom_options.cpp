// FlexBuffers options of custom operators (custom_options.h), read with the flexbuffers header of
// the installed flatbuffers package after verifying the buffer (a hostile model cannot make the
// reader run off the end).
#include "host/ops/custom_options.h"

#include <flatbuffers/flexbuffers.h>

#include <cmath>

#include "common/error.h"

namespace tinycoral::host::ops {

CustomOptions::CustomOptions(std::span<const uint8_t> flexbuffer, std::string op_name)
    : op_name_(std::move(op_name)) {
  if (flexbuffer.size() < 3) fail(op_name_, ": custom options are missing or too short");
  if (!flexbuffers::VerifyBuffer(flexbuffer.data(), flexbuffer.size()))
    fail(op_name_, ": custom options are not a valid FlexBuffers buffer");
  const flexbuffers::Reference root = flexbuffers::GetRoot(flexbuffer.data(), flexbuffer.size());
  if (!root.IsMap()) fail(op_name_, ": custom options are not a FlexBuffers map");
  const flexbuffers::Map map = root.AsMap();
  const flexbuffers::TypedVector keys = map.Keys();
  const flexbuffers::Vector values = map.Values();
  for (size_t i = 0; i < keys.size(); ++i) {
    const flexbuffers::Reference v = values[i];
    if (v.IsBool()) {
      values_[keys[i].AsKey()] = v.AsBool() ? 1.0 : 0.0;
    } else if (v.IsNumeric()) {
      values_[keys[i].AsKey()] = v.AsDouble();
    }
  }
}

double CustomOptions::number(const std::string& key) const {
  auto it = values_.find(key);
  if (it == values_.end()) fail(op_name_, ": custom option '", key, "' is missing");
  if (!std::isfinite(it->second)) fail(op_name_, ": custom option '", key, "' is not finite");
  return it->second;
}

double CustomOptions::number_or(const std::string& key, double fallback) const {
  return has(key) ? number(key) : fallback;
}

int32_t CustomOptions::integer(const std::string& key, int32_t lo, int32_t hi) const {
  const double v = number(key);
  if (v != std::floor(v) || v < lo || v > hi)
    fail(op_name_, ": custom option '", key, "' = ", v, " must be an integer in [", lo, ", ", hi,
         "]");
  return static_cast<int32_t>(v);
}

int32_t CustomOptions::integer_or(const std::string& key, int32_t fallback, int32_t lo,
                                  int32_t hi) const {
  return has(key) ? integer(key, lo, hi) : fallback;
}

}  // namespace tinycoral::host::ops
