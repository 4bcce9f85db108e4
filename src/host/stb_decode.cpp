// The one translation unit that compiles stb_image (header-only library from /usr/include/stb).
// Its own warnings are silenced here so -Werror stays on for our code. Only the formats we
// advertise are compiled in (PNG, JPEG, PPM/PGM; BMP is ours): every other decoder of Debian's
// 2022 stb snapshot is code that reads hostile bytes and that we do not fuzz. This file is built
// with -fwrapv (src/CMakeLists.txt): stb's arithmetic on corrupt data (a JPEG's DC sums, ...)
// then wraps, which is defined, instead of being signed overflow.
#include "host/stb_decode.h"

#include <climits>

#include "common/error.h"
#include "common/limits.h"

#pragma GCC diagnostic push
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wunknown-warning-option"
#endif
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wconversion"
#define STB_IMAGE_IMPLEMENTATION
#define STBI_NO_STDIO
#define STBI_FAILURE_USERMSG
#define STBI_MAX_DIMENSIONS (1 << 16)
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_PNM
#include <stb/stb_image.h>
#pragma GCC diagnostic pop

namespace tinycoral::host {
namespace {

// stb reads a PNM header's numbers into an int without a bound (signed overflow past 2^31, which
// UBSan reports and the fuzzer found). Read them the way stb does (whitespace and '#' comment
// lines between them) and refuse one of more than 9 digits before stb sees it.
void check_pnm_numbers(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '6')) return;
  auto space = [](uint8_t c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
  };
  size_t at = 2;
  for (const char* name : {"width", "height", "maximum value"}) {
    for (;;) {
      while (at < bytes.size() && space(bytes[at])) ++at;
      if (at >= bytes.size() || bytes[at] != '#') break;
      while (at < bytes.size() && bytes[at] != '\n' && bytes[at] != '\r') ++at;
    }
    size_t digits = 0;
    for (; at < bytes.size() && bytes[at] >= '0' && bytes[at] <= '9'; ++at) ++digits;
    if (digits > 9) fail("PNM: the header's ", name, " has ", digits, " digits");
  }
}

// Debian's stb builds a JPEG Huffman table from its 16 code counts without checking that they sum
// to at most 256 symbols, and writes past the table's arrays when they do (image_fuzz found it:
// stb 2.28 added the check). Walk the file's markers as stb does - segments, fill bytes, and after
// each scan its entropy-coded data up to the next marker - and check every DHT table first.
void check_jpeg_huffman_tables(std::span<const uint8_t> bytes) {
  if (bytes.size() < 2 || bytes[0] != 0xff || bytes[1] != 0xd8) return;
  auto at = [&](size_t i) -> unsigned { return i < bytes.size() ? bytes[i] : 0; };  // stb reads 0
  size_t pos = 2;
  while (pos < bytes.size()) {
    if (bytes[pos] != 0xff) {  // between segments stb skips any byte that is not a marker
      ++pos;
      continue;
    }
    while (pos < bytes.size() && bytes[pos] == 0xff) ++pos;
    if (pos >= bytes.size()) return;
    const unsigned marker = bytes[pos++];
    if (marker == 0xd9) return;  // end of image
    if (marker == 0x00 || marker == 0xd8 || (marker >= 0xd0 && marker <= 0xd7)) continue;
    const size_t length = at(pos) << 8 | at(pos + 1);  // includes itself
    if (marker == 0xc4) {
      size_t table = pos + 2;
      for (long left = long(length) - 2; left > 0;) {
        unsigned symbols = 0;
        for (size_t i = 1; i <= 16; ++i) symbols += at(table + i);
        if (symbols > 256)
          fail("JPEG: a Huffman table of ", symbols, " symbols (at most 256), at byte ", table);
        table += 17 + symbols;
        left -= long(17 + symbols);
      }
    }
    pos += length;
    if (marker != 0xda) continue;
    // A scan: its entropy-coded data runs to the next marker, an 0xff followed by neither a
    // stuffed 0 nor a restart marker.
    auto in_data = [](unsigned next) { return next == 0 || (next >= 0xd0 && next <= 0xd7); };
    while (pos + 1 < bytes.size() && !(bytes[pos] == 0xff && !in_data(bytes[pos + 1]))) ++pos;
  }
}

}  // namespace

StbImage stb_decode(std::span<const uint8_t> bytes) {
  if (bytes.empty()) fail("empty image file");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) fail("image file too large");
  check_pnm_numbers(bytes);
  check_jpeg_huffman_tables(bytes);
  int w = 0, h = 0, c = 0;
  // The header's size first: a few bytes of PNG or PPM can claim gigapixels.
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c))
    fail("unreadable image (tinycoral reads BMP, PNG, JPEG, PPM and PGM): ",
         stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
  if (w <= 0 || h <= 0 || int64_t{w} * h > limits::kMaxImagePixels)
    fail("image of ", w, "x", h, " pixels, more than the limit of ", limits::kMaxImagePixels);
  // PPM/PGM (P5/P6) pixels are stored raw: a file shorter than them is truncated (stb would
  // return the missing part as zeros).
  if (bytes.size() >= 2 && bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6') &&
      bytes.size() < static_cast<uint64_t>(w) * static_cast<uint64_t>(h) * static_cast<uint64_t>(c))
    fail("PNM: pixel data truncated (", bytes.size(), " bytes for ", w, "x", h, "x", c, ")");
  stbi_uc* data =
      stbi_load_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c, 0);
  if (!data)
    fail("unreadable image: ", stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
  StbImage out;
  out.width = w;
  out.height = h;
  out.channels = c;
  out.pixels.assign(
      data, data + static_cast<size_t>(w) * static_cast<size_t>(h) * static_cast<size_t>(c));
  stbi_image_free(data);
  return out;
}

}  // namespace tinycoral::host
