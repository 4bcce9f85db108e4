// The one exception type of tinycoral. Every error a user can cause (a malformed file, a wrong
// shape, a dead stick) is an Error whose message names the thing and what is wrong with it; the CLI
// prints it as one line and exits with code 2. Programming errors are not Errors.
#pragma once

#include <charconv>
#include <concepts>
#include <sstream>
#include <string>
#include <string_view>
#include <type_traits>
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

// Arguments cat() appends without a stream, exactly as operator<< would print them: text, a
// char, and integers other than bool and the character types (decimal, as a fresh stream).
template <typename T>
concept CatText = std::is_convertible_v<const T&, std::string_view>;
template <typename T>
concept CatInteger = std::integral<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
                     !std::is_same_v<T, signed char> && !std::is_same_v<T, unsigned char> &&
                     !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> &&
                     !std::is_same_v<T, char16_t> && !std::is_same_v<T, char32_t>;
template <typename T>
concept CatDirect = CatText<std::remove_cvref_t<T>> || CatInteger<std::remove_cvref_t<T>> ||
    (std::is_same_v<std::remove_cvref_t<T>, char>);

inline void cat_append(std::string& out, std::string_view text) { out.append(text); }
inline void cat_append(std::string& out, char c) { out.push_back(c); }
// An upper bound of what cat_append adds (cat reserves it once: a code generator's instruction
// grows past the short-string buffer, and each regrowth is an allocation).
inline size_t cat_size(std::string_view text) { return text.size(); }
inline size_t cat_size(char) { return 1; }
template <CatInteger T>
size_t cat_size(T) {
  return 24;
}
template <CatInteger T>
void cat_append(std::string& out, T value) {
  static_assert(sizeof(T) <= 8, "24 characters hold a 64-bit integer's decimal digits");
  char buf[24];
  out.append(buf, std::to_chars(buf, buf + sizeof buf, value).ptr);
}
}  // namespace detail

// Concatenates its arguments with operator<< (GCC 12 has no <format>), from a fresh stream's
// formatting state (decimal, precision 6, no width, blank fill) however the last call left it.
// (Text, chars and integers alone are appended directly: the code generators' instruction
// fields, a large share of a compile through a stream.)
template <typename... Args>
std::string cat(Args&&... args) {
  if constexpr ((detail::CatDirect<Args> && ...)) {
    std::string out;
    out.reserve((detail::cat_size(args) + ... + 0));
    (detail::cat_append(out, args), ...);
    return out;
  }
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
