// The message of the Error that `f` throws, or "" when it throws none: what the bad-input tests
// compare with the clear error they demand.
#pragma once

#include <functional>
#include <string>

#include "common/error.h"

namespace tinycoral::testing {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace tinycoral::testing
