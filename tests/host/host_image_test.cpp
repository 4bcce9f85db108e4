// Image decoding, resizing and normalization as Google's suites prepare inputs
// (reference google_expectations.md section 1), and label files.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/file.h"
#include "host/image.h"
#include "host/labels.h"
#include "support/testdata.h"

namespace tinycoral::host {
namespace {

// A tiny 24-bit bottom-up BMP: 2x2, rows padded to 8 bytes.
std::vector<uint8_t> make_bmp(int w, int h, int bpp, const std::vector<uint8_t>& rows_bottom_up) {
  std::vector<uint8_t> b(54 + rows_bottom_up.size(), 0);
  b[0] = 'B', b[1] = 'M';
  auto put32 = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) b[at + static_cast<size_t>(i)] = static_cast<uint8_t>(v >> (8 * i));
  };
  put32(10, 54);
  put32(14, 40);
  put32(18, static_cast<uint32_t>(w));
  put32(22, static_cast<uint32_t>(h));
  b[26] = 1;
  b[28] = static_cast<uint8_t>(bpp);
  for (size_t i = 0; i < rows_bottom_up.size(); ++i) b[54 + i] = rows_bottom_up[i];
  put32(2, static_cast<uint32_t>(b.size()));
  return b;
}

TEST(HostImage, BmpIsFlippedAndSwappedToRgb) {
  // Bottom row (stored first): blue, green; top row: red, white. BGR order, 2 pad bytes per row.
  const auto bmp = make_bmp(2, 2, 24,
                            {255, 0, 0, 0, 255, 0, 0, 0,  //
                             0, 0, 255, 255, 255, 255, 0, 0});
  const Image img = decode_bmp(bmp);
  EXPECT_EQ(img.width, 2);
  EXPECT_EQ(img.height, 2);
  EXPECT_EQ(img.channels, 3);
  EXPECT_EQ(img.pixels, (std::vector<uint8_t>{255, 0, 0, 255, 255, 255, 0, 0, 255, 0, 255, 0}));
}

TEST(HostImage, BadBmpsAreErrors) {
  auto bmp = make_bmp(2, 2, 24, {1, 2, 3});
  EXPECT_THROW(decode_bmp(bmp), Error);  // truncated pixel data
  bmp = make_bmp(2, 2, 16, std::vector<uint8_t>(16));
  EXPECT_THROW(decode_bmp(bmp), Error);  // 16 bpp
  EXPECT_THROW(decode_image(std::vector<uint8_t>{1, 2, 3, 4}), Error);
  EXPECT_THROW(decode_image({}), Error);
}

// stb reads a PNM header's numbers into an int unbounded: a number of 10 or more digits (found by
// image_fuzz: "P6" then 11 digits) is refused before stb parses it, with the field named; one of 9
// digits, past a comment, still reaches stb's own checks.
TEST(HostImage, PnmHeaderNumbersTooLongAreErrors) {
  auto bytes = [](const std::string& s) { return std::vector<uint8_t>(s.begin(), s.end()); };
  auto message = [&](const std::string& s) {
    try {
      decode_image(bytes(s));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("P6\n33333333666 2 255\n").find("width has 11 digits"), std::string::npos);
  EXPECT_NE(message("P5 2\n# 12345678901\n 99999999999 255\n").find("height has 11 digits"),
            std::string::npos);
  EXPECT_NE(message("P6 2 2 4294967296\n").find("maximum value has 10 digits"), std::string::npos);
  // 9 digits: not ours to refuse; stb's pixel limit does.
  EXPECT_EQ(message("P5 999999999 1 255\n").find("digits"), std::string::npos);
  const Image ok = decode_image(bytes("P5\n# c 12345678901\n2 1\n255\n\x07\x09"));
  EXPECT_EQ(ok.width, 2);
  EXPECT_EQ(ok.pixels, (std::vector<uint8_t>{7, 9}));
}

TEST(HostImage, GooglesRgb6x4) {
  TINYCORAL_REQUIRE_TESTDATA(data);
  const Image img = read_image(data / "images" / "rgb6X4.bmp");
  ASSERT_EQ(img.height, 6);
  ASSERT_EQ(img.width, 4);
  ASSERT_EQ(img.channels, 3);
  const std::vector<std::vector<uint8_t>> top = {
      {255, 0, 255}, {255, 0, 255}, {0, 255, 0}, {0, 255, 0}};
  const std::vector<std::vector<uint8_t>> bottom = {
      {0, 0, 0}, {0, 0, 0}, {255, 255, 255}, {255, 255, 255}};
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 4; ++x) {
      const auto& want = (y < 3 ? top : bottom)[static_cast<size_t>(x)];
      for (int c = 0; c < 3; ++c)
        EXPECT_EQ(img.pixels[static_cast<size_t>((y * 4 + x) * 3 + c)],
                  want[static_cast<size_t>(c)])
            << y << "," << x;
    }
}

TEST(HostImage, BilinearModesAndNearest) {
  // 1x2 grey image (0, 100) widened to 4: legacy fx = x * 0.5 -> 0, 50, 100, 100;
  // half-pixel fx = (x + .5) * .5 - .5 -> -.25 (clamped weights: 0*1.25 + 100*(-.25) -> -25 -> 0),
  // .25 -> 25, .75 -> 75, 1.25 -> 100.
  Image img{2, 1, 1, {0, 100}};
  EXPECT_EQ(resize_image(img, 4, 1, ResizeMode::kBilinearLegacy).pixels,
            (std::vector<uint8_t>{0, 50, 100, 100}));
  EXPECT_EQ(resize_image(img, 4, 1, ResizeMode::kBilinear).pixels,
            (std::vector<uint8_t>{0, 25, 75, 100}));
  EXPECT_EQ(resize_image(img, 4, 1, ResizeMode::kNearest).pixels,
            (std::vector<uint8_t>{0, 0, 100, 100}));
  EXPECT_THROW(resize_image(img, 4, 1, ResizeMode::kNone), Error);
  EXPECT_EQ(resize_image(img, 2, 1, ResizeMode::kNone).pixels, img.pixels);
  // Truncation, not rounding: (0, 3) at 1/3 -> 1.0 exactly? legacy 3 wide -> fx = x * 2/3.
  Image two{2, 1, 1, {0, 3}};
  EXPECT_EQ(resize_image(two, 3, 1, ResizeMode::kBilinearLegacy).pixels,
            (std::vector<uint8_t>{0, 2, 3}));
}

TEST(HostImage, NormalizationMatchesGooglesEffectiveConstants) {
  // google_expectations.md 1.5: scale 1.4810551404953003, mean -55.169782280921936.
  const Normalization n = parse_normalization("1.4810551404953003,-55.169782280921936");
  Image img{9, 1, 1, {0, 1, 2, 64, 127, 128, 200, 254, 255}};
  const auto bytes =
      image_to_input(img, {1, 1, 9, 1}, container::TensorType::kUInt8, ResizeMode::kNone, n);
  EXPECT_EQ(bytes, (std::vector<uint8_t>{37, 37, 38, 80, 123, 123, 172, 208, 209}));
  EXPECT_THROW(parse_normalization("1"), Error);
  EXPECT_THROW(parse_normalization("0,1"), Error);
  EXPECT_THROW(parse_normalization("a,b"), Error);
  // int8 tensors receive v ^ 0x80; RGB -> grey is (R + G + B) / 3.
  Image rgb{1, 1, 3, {10, 20, 31}};
  EXPECT_EQ(image_to_input(rgb, {1, 1, 1}, container::TensorType::kInt8, ResizeMode::kNone, {}),
            (std::vector<uint8_t>{20 ^ 0x80}));
}

TEST(HostLabels, BothGoogleFormats) {
  const Labels indexed = Labels::parse("0  background\n1 tench, Tinca tinca\n5: five\n");
  EXPECT_EQ(indexed.at(0), "background");
  EXPECT_EQ(indexed.at(1), "tench, Tinca tinca");
  EXPECT_EQ(indexed.at(5), "five");
  EXPECT_EQ(indexed.at(2), "");
  const Labels plain = Labels::parse("person\nbicycle\n\ncar\r\n");
  EXPECT_EQ(plain.at(0), "person");
  EXPECT_EQ(plain.at(1), "bicycle");
  EXPECT_EQ(plain.at(3), "car");
  EXPECT_EQ(plain.size(), 3u);
}

}  // namespace
}  // namespace tinycoral::host
