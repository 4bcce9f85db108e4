// libFuzzer target: the DWN1 package reader (Package -> MultiExecutable -> Executables) and the
// bare executable reader must either parse or throw tinycoral::Error for any input; parsed packages
// must survive a write/read round trip. Seeds: tests/data/fuzz/package_fuzz/ (made by our writer).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"
#include "container/package.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tinycoral::container;
  const std::span<const uint8_t> bytes(data, size);
  try {
    // Compared as bytes, not with operator==, so that NaN floats do not count as a difference.
    const std::vector<uint8_t> written = write_package(read_package(bytes));
    if (write_package(read_package(written)) != written) __builtin_trap();
  } catch (const tinycoral::Error&) {
  }
  try {
    (void)read_executable(bytes);
  } catch (const tinycoral::Error&) {
  }
  return 0;
}
