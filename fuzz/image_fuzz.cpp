// libFuzzer target: the image decoders (our BMP reader, stb's PNG/JPEG/GIF/PNM/...) and the input
// preparation after them. Any bytes must give an image within the pixel limit or an Error, never
// a crash, an out-of-bounds access or gigabytes. The first byte picks a header template the rest
// of the input completes, so that every format's body is reached without seed files.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "host/image.h"

namespace {

std::vector<uint8_t> templated(uint8_t pick, std::span<const uint8_t> rest) {
  static const std::vector<std::vector<uint8_t>> kHeads = {
      {},                                                      // raw bytes
      {'B', 'M', 0, 0, 0, 0, 0, 0, 0, 0, 54, 0, 0, 0, 40, 0},  // BMP (the rest sets the fields)
      {'P', '6', '\n'},                                        // PPM
      {'P', '5', '\n'},                                        // PGM
      {'G', 'I', 'F', '8', '9', 'a'},                          // GIF
      {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R'},  // PNG
      {0xff, 0xd8, 0xff},                                                              // JPEG
      {0xff, 0xd8, 0xff, 0xc4},  // JPEG from a Huffman table (stb's table builder)
  };
  std::vector<uint8_t> bytes = kHeads[pick % kHeads.size()];
  bytes.insert(bytes.end(), rest.begin(), rest.end());
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tinycoral;
  if (size < 2) return 0;
  const std::vector<uint8_t> bytes = templated(data[0], std::span(data + 2, size - 2));
  try {
    const host::Image img = host::decode_image(bytes);
    if (img.width <= 0 || img.height <= 0 ||
        int64_t{img.width} * img.height > limits::kMaxImagePixels ||
        img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(img.channels))
      __builtin_trap();
    // Into a small input, with each resize mode and a normalization.
    const int side = 1 + data[1] % 8;
    const auto mode = static_cast<host::ResizeMode>((data[1] >> 3) % 3);
    const auto type =
        (data[1] & 0x80) ? container::TensorType::kFloat32 : container::TensorType::kUInt8;
    (void)host::image_to_input(img, {1, side, side, 3}, type, mode, host::Normalization{127.5f, 1});
  } catch (const Error&) {
  }
  return 0;
}
