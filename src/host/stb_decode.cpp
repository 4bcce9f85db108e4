// The one translation unit that compiles stb_image (header-only library from /usr/include/stb).
// Its own warnings are silenced here so -Werror stays on for our code.
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

}  // namespace

StbImage stb_decode(std::span<const uint8_t> bytes) {
  if (bytes.empty()) fail("empty image file");
  if (bytes.size() > static_cast<size_t>(INT_MAX)) fail("image file too large");
  check_pnm_numbers(bytes);
  int w = 0, h = 0, c = 0;
  // The header's size first: a few bytes of PNG, GIF or PPM can claim gigapixels.
  if (!stbi_info_from_memory(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &c))
    fail("unreadable image: ", stbi_failure_reason() ? stbi_failure_reason() : "unknown format");
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
