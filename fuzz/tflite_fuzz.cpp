// libFuzzer target: the TFLite reader and the *_edgetpu.tflite reader (custom-op options, packages,
// executables) must either parse or throw tinycoral::Error for any input; parsed models must also
// survive a write/read round trip. Seeds: tests/data/fuzz/tflite_fuzz/ (made by our writer).
#include <cstddef>
#include <cstdint>
#include <new>
#include <span>
#include <vector>

#include "common/error.h"
#include "container/edgetpu_model.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tinycoral::container;
  const std::span<const uint8_t> bytes(data, size);
  try {
    // What we read, we can write, and writing what that reads back gives the same bytes (bytes,
    // not operator==, so that NaN scales do not count as a difference).
    const std::vector<uint8_t> written = write_tflite(read_tflite(bytes));
    if (write_tflite(read_tflite(written)) != written) __builtin_trap();
  } catch (const tinycoral::Error&) {
  }
  try {
    (void)read_edgetpu_model(bytes);
  } catch (const tinycoral::Error&) {
  } catch (const std::bad_alloc&) {
  }
  return 0;
}
