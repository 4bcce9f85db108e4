// The one exception type of tinycoral. Every error a user can cause (a malformed file, a wrong
// shape, a dead stick) is an Error whose message names the thing and what is wrong with it; the CLI
// prints it as one line and exits with code 2. Programming errors are not Errors.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "tinycoral/error.h"  // the class itself is public API

namespace tinycoral {

// Concatenates its arguments with operator<< (GCC 12 has no <format>).
template <typename... Args>
std::string cat(Args&&... args) {
  std::ostringstream out;
  (out << ... << std::forward<Args>(args));
  return out.str();
}

template <typename... Args>
[[noreturn]] void fail(Args&&... args) {
  throw Error(cat(std::forward<Args>(args)...));
}

// Re-throws an Error with a context prefix such as the file name: "model.tflite: tensor 3: ...".
template <typename F>
auto with_context(const std::string& context, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const Error& e) {
    throw Error(context + ": " + e.what());
  }
}

}  // namespace tinycoral
