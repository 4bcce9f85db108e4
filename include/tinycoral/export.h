// TINYCORAL_API marks what libtinycoral exports: the public C++ classes and functions and the C
// API. Everything else in the library is built with hidden visibility.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TINYCORAL_API __attribute__((visibility("default")))
#else
#define TINYCORAL_API
#endif
