// The one exception type of tinycoral. Every error a user can cause (a malformed file, a wrong
// shape, a dead stick) is an Error whose message names the thing and what is wrong with it; the CLI
// prints it as one line and exits with code 2. Programming errors are not Errors.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "tinycoral/error.h"  // the class itself is public API

namespace tinycoral {

namespace detail {
// The stream cat() formats into, one per thread and reused: constructing an ostringstream (its
// locale) costs more than the few fields it formats, and the compiler's code generators call cat
// for every instruction. `busy`: a cat inside an argument's operator<< gets a stream of its own.
struct CatStream {
  std::ostringstream out;
  bool busy = false;
};
inline thread_local CatStream cat_stream;
}  // namespace detail

// Concatenates its arguments with operator<< (GCC 12 has no <format>), from a fresh stream's
// formatting state (decimal, precision 6, no width, blank fill) however the last call left it.
template <typename... Args>
std::string cat(Args&&... args) {
  detail::CatStream& s = detail::cat_stream;
  if (s.busy) {
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    return out.str();
  }
  struct Release {
    detail::CatStream& s;
    ~Release() { s.busy = false; }
  } release{s};
  s.busy = true;
  s.out.str(std::string());
  s.out.clear();
  s.out.flags(std::ios_base::dec | std::ios_base::skipws);
  s.out.precision(6);
  s.out.width(0);
  s.out.fill(' ');
  (s.out << ... << std::forward<Args>(args));
  return s.out.str();
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
