// What `tinycoral compile` says it is: the version line of its log and the compiler_version string
// it stores in every package (Google's 16.0 stores "cl/").
#pragma once

namespace tinycoral::compiler {

inline constexpr const char* kCompilerVersion =
    "tinycoral 0.1.0 (edgetpu_compiler 16.0 compatible)";
inline constexpr const char* kPackageCompilerVersion = "cl/";

}  // namespace tinycoral::compiler
