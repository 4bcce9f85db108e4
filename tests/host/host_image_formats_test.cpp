// The formats decoded through stb (PNG, JPEG, PPM/PGM) on files written by stb_image_write, and
// the hostile bytes refused before stb sees them (docs/host.md "Images").
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "host/image.h"
#include "support/error_of.h"

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wdouble-promotion"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#define STB_IMAGE_WRITE_IMPLEMENTATION
#define STBI_WRITE_NO_STDIO
#include <stb/stb_image_write.h>
#pragma GCC diagnostic pop

namespace tinycoral::host {
namespace {

constexpr int kWidth = 24, kHeight = 16;

// A smooth RGB gradient (JPEG keeps it within a few levels).
std::vector<uint8_t> gradient() {
  std::vector<uint8_t> px;
  for (int y = 0; y < kHeight; ++y)
    for (int x = 0; x < kWidth; ++x)
      for (int c = 0; c < 3; ++c) px.push_back(static_cast<uint8_t>(40 + 4 * x + 6 * y + 30 * c));
  return px;
}

void append(void* context, void* data, int size) {
  auto* out = static_cast<std::vector<uint8_t>*>(context);
  const auto* bytes = static_cast<const uint8_t*>(data);
  out->insert(out->end(), bytes, bytes + size);
}

std::vector<uint8_t> png_of(const std::vector<uint8_t>& px) {
  std::vector<uint8_t> out;
  EXPECT_NE(stbi_write_png_to_func(append, &out, kWidth, kHeight, 3, px.data(), kWidth * 3), 0);
  return out;
}

std::vector<uint8_t> jpeg_of(const std::vector<uint8_t>& px) {
  std::vector<uint8_t> out;
  EXPECT_NE(stbi_write_jpg_to_func(append, &out, kWidth, kHeight, 3, px.data(), 95), 0);
  return out;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  return testing::error_of([&] { decode_image(bytes); });
}

// The file decoded, its pixels only when it has the gradient's size and channels.
std::vector<uint8_t> pixels_of(const std::vector<uint8_t>& file) {
  const Image img = decode_image(file);
  EXPECT_EQ(img.width, kWidth);
  EXPECT_EQ(img.height, kHeight);
  EXPECT_EQ(img.channels, 3);
  return img.width == kWidth && img.height == kHeight && img.channels == 3 ? img.pixels
                                                                           : std::vector<uint8_t>{};
}

TEST(HostImageFormats, PngDecodesToTheSamePixels) {
  const std::vector<uint8_t> px = gradient();
  EXPECT_EQ(pixels_of(png_of(px)), px);
}

TEST(HostImageFormats, JpegDecodesCloseToTheSamePixels) {
  const std::vector<uint8_t> px = gradient();
  const std::vector<uint8_t> decoded = pixels_of(jpeg_of(px));
  ASSERT_EQ(decoded.size(), px.size());
  // Lossy (and its colours subsampled), but the same picture.
  int worst = 0, sum = 0;
  for (size_t i = 0; i < px.size(); ++i) {
    worst = std::max(worst, std::abs(decoded[i] - px[i]));
    sum += std::abs(decoded[i] - px[i]);
  }
  EXPECT_LE(worst, 16);
  EXPECT_LE(sum, 3 * static_cast<int>(px.size()));
}

// Debian's stb writes past a Huffman table's arrays when its 16 counts sum past 256 symbols
// (image_fuzz found it): such a table is refused, named, before stb builds it.
TEST(HostImageFormats, JpegHuffmanTableOfTooManySymbolsIsAnError) {
  // The fuzzer's input: a DHT segment right after the start of image, counts 0xdb and 0x5b.
  const std::vector<uint8_t> found = {0xff, 0xd8, 0xff, 0xc4, 0xc4, 0xc4, 0x00, 0xdb, 0x5b};
  EXPECT_NE(error_of(found).find("Huffman table of 310 symbols"), std::string::npos)
      << error_of(found);
  // A real file whose first table claims one symbol too many per code length.
  std::vector<uint8_t> jpeg = jpeg_of(gradient());
  size_t dht = 0;
  for (size_t i = 2; i + 1 < jpeg.size() && !dht; ++i)
    if (jpeg[i] == 0xff && jpeg[i + 1] == 0xc4) dht = i;
  ASSERT_NE(dht, 0u);
  for (size_t i = 0; i < 16; ++i) jpeg[dht + 5 + i] = 17;  // 16 x 17 = 272
  EXPECT_NE(error_of(jpeg).find("Huffman table of 272 symbols"), std::string::npos)
      << error_of(jpeg);
}

TEST(HostImageFormats, FormatsNotReadAreNamedErrors) {
  const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
  EXPECT_NE(error_of(gif).find("tinycoral reads BMP, PNG, JPEG, PPM and PGM"), std::string::npos)
      << error_of(gif);
  // An uncompressed 1x1 TGA (stb would read it if its decoder were compiled in).
  const std::vector<uint8_t> tga = {0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 24, 0, 1, 2, 3};
  EXPECT_NE(error_of(tga).find("tinycoral reads"), std::string::npos) << error_of(tga);
}

}  // namespace
}  // namespace tinycoral::host
