// TINYCORAL_ASAN is defined when the tests run under AddressSanitizer (CI's clang build, about ten
// times slower): tests that sweep whole models repeat less there, and the normal build checks
// every repetition.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define TINYCORAL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TINYCORAL_ASAN 1
#endif
#endif
