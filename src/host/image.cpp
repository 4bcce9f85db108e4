// Image decoding, resizing and normalization (image.h).
#include "host/image.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "common/file.h"
#include "common/limits.h"
#include "host/stb_decode.h"

namespace tinycoral::host {

namespace {

uint32_t le16(std::span<const uint8_t> b, size_t at) {
  return uint32_t{b[at]} | uint32_t{b[at + 1]} << 8;
}
uint32_t le32(std::span<const uint8_t> b, size_t at) { return le16(b, at) | le16(b, at + 2) << 16; }

constexpr int64_t kMaxPixels = limits::kMaxImagePixels;

// The RGB colours of an 8-bit BMP's colour table, or empty when it is the identity grey ramp (or
// absent): then the indices are the grey levels, as Google's reader takes them.
std::vector<uint8_t> bmp_palette(std::span<const uint8_t> bytes, uint32_t header_end,
                                 uint32_t offset) {
  const uint32_t used = le32(bytes, 46);
  const uint32_t room = (offset - header_end) / 4;
  const uint32_t entries = std::min(used == 0 || used > 256 ? 256u : used, room);
  std::vector<uint8_t> rgb(256 * 3, 0);
  bool grey_ramp = true;
  for (uint32_t i = 0; i < entries; ++i) {
    const uint8_t* e = bytes.data() + header_end + 4 * i;  // B, G, R, reserved
    rgb[3 * i] = e[2], rgb[3 * i + 1] = e[1], rgb[3 * i + 2] = e[0];
    grey_ramp = grey_ramp && e[0] == i && e[1] == i && e[2] == i;
  }
  if (entries == 0 || grey_ramp) return {};
  return rgb;
}

}  // namespace

Image decode_bmp(std::span<const uint8_t> bytes) {
  if (bytes.size() < 34 || bytes[0] != 'B' || bytes[1] != 'M')
    fail("not a BMP file (too short or no 'BM')");
  const uint32_t offset = le32(bytes, 10);
  const auto width = static_cast<int32_t>(le32(bytes, 18));
  const auto height = static_cast<int32_t>(le32(bytes, 22));
  const uint32_t bpp = le16(bytes, 28);
  const uint32_t compression = le32(bytes, 30);
  if (compression != 0)
    fail("BMP: compression ", compression, " is not supported (only uncompressed)");
  if (bpp != 8 && bpp != 24 && bpp != 32)
    fail("BMP: ", bpp, " bits per pixel is not supported (8, 24, 32)");
  if (width <= 0 || height == 0 || height == std::numeric_limits<int32_t>::min())
    fail("BMP: bad size ", width, "x", height);
  const int64_t h = std::abs(int64_t{height});
  if (int64_t{width} * h > kMaxPixels)
    fail("BMP: ", width, "x", h, " pixels, more than the limit of ", kMaxPixels);
  const uint32_t header_size = le32(bytes, 14);
  if (header_size < 40 || header_size > bytes.size() - 14)
    fail("BMP: info header of ", header_size, " bytes (40 or more, within the file)");
  const uint32_t header_end = 14 + header_size;
  if (offset > bytes.size())
    fail("BMP: pixel data offset ", offset, " is past the end of the file");
  if (offset < header_end)
    fail("BMP: pixel data offset ", offset, " points into the headers (they end at byte ",
         header_end, ")");
  const std::vector<uint8_t> palette =
      bpp == 8 ? bmp_palette(bytes, header_end, offset) : std::vector<uint8_t>{};
  Image img;
  img.width = width;
  img.height = static_cast<int>(h);
  img.channels = static_cast<int>(bpp / 8);
  const size_t row_bytes = static_cast<size_t>(width) * static_cast<size_t>(img.channels);
  const size_t stride = (row_bytes + 3) & ~size_t{3};
  if (offset > bytes.size() || (bytes.size() - offset) / stride < static_cast<size_t>(h))
    fail("BMP: pixel data truncated (", bytes.size(), " bytes, needs ", offset, " + ", h,
         " rows of ", stride, ")");
  img.pixels.resize(row_bytes * static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) {
    const int64_t src_row = height > 0 ? h - 1 - y : y;
    const uint8_t* src = bytes.data() + offset + static_cast<size_t>(src_row) * stride;
    uint8_t* dst = img.pixels.data() + static_cast<size_t>(y) * row_bytes;
    std::memcpy(dst, src, row_bytes);
    if (img.channels >= 3)
      for (size_t x = 0; x < row_bytes; x += static_cast<size_t>(img.channels))
        std::swap(dst[x], dst[x + 2]);
  }
  if (!palette.empty()) {  // a colour table that is not grey: its colours, as RGB
    std::vector<uint8_t> rgb(img.pixels.size() * 3);
    for (size_t i = 0; i < img.pixels.size(); ++i)
      std::memcpy(&rgb[3 * i], &palette[3 * size_t{img.pixels[i]}], 3);
    img.pixels = std::move(rgb);
    img.channels = 3;
  }
  return img;
}

Image decode_image(std::span<const uint8_t> bytes) {
  if (bytes.size() >= 2 && bytes[0] == 'B' && bytes[1] == 'M') return decode_bmp(bytes);
  StbImage s = stb_decode(bytes);
  Image img;
  img.width = s.width;
  img.height = s.height;
  img.channels = s.channels;
  img.pixels = std::move(s.pixels);
  if (img.channels == 2) {  // grey + alpha: keep the grey
    std::vector<uint8_t> grey(static_cast<size_t>(img.width) * static_cast<size_t>(img.height));
    for (size_t i = 0; i < grey.size(); ++i) grey[i] = img.pixels[2 * i];
    img.pixels = std::move(grey);
    img.channels = 1;
  }
  return img;
}

Image read_image(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file(path, limits::kMaxImageFileBytes);
  return with_context(path.string(), [&] { return decode_image(bytes); });
}

ResizeMode parse_resize_mode(const std::string& name) {
  if (name == "bilinear") return ResizeMode::kBilinear;
  if (name == "bilinear-legacy") return ResizeMode::kBilinearLegacy;
  if (name == "nearest") return ResizeMode::kNearest;
  if (name == "none") return ResizeMode::kNone;
  fail("unknown resize mode '", name, "' (bilinear, bilinear-legacy, nearest, none)");
}

const char* resize_mode_name(ResizeMode mode) {
  switch (mode) {
    case ResizeMode::kBilinear:
      return "bilinear";
    case ResizeMode::kBilinearLegacy:
      return "bilinear-legacy";
    case ResizeMode::kNearest:
      return "nearest";
    default:
      return "none";
  }
}

Image convert_channels(const Image& image, int channels) {
  if (image.channels == channels) return image;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.channels = channels;
  const size_t n = static_cast<size_t>(image.width) * static_cast<size_t>(image.height);
  out.pixels.resize(n * static_cast<size_t>(channels));
  const auto ic = static_cast<size_t>(image.channels);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = image.pixels.data() + i * ic;
    uint8_t* q = out.pixels.data() + i * static_cast<size_t>(channels);
    if (channels == 1 && ic >= 3) {
      q[0] = static_cast<uint8_t>((int{p[0]} + int{p[1]} + int{p[2]}) / 3);
    } else if (ic == 1) {
      for (int c = 0; c < channels; ++c) q[c] = p[0];
    } else if (channels == 3 && ic == 4) {
      q[0] = p[0], q[1] = p[1], q[2] = p[2];
    } else {
      fail("cannot convert a ", ic, "-channel image to ", channels, " channels");
    }
  }
  return out;
}

namespace {

// TFLite's float ResizeBilinear (generic path), section 1.2, then truncation to uint8.
Image resize_bilinear(const Image& in, int ow, int oh, bool half_pixel) {
  Image out;
  out.width = ow;
  out.height = oh;
  out.channels = in.channels;
  const auto ch = static_cast<size_t>(in.channels);
  out.pixels.resize(static_cast<size_t>(ow) * static_cast<size_t>(oh) * ch);
  const float sy = static_cast<float>(in.height) / static_cast<float>(oh);
  const float sx = static_cast<float>(in.width) / static_cast<float>(ow);
  auto source = [&](int i, float s) {
    return half_pixel ? (static_cast<float>(i) + 0.5f) * s - 0.5f : static_cast<float>(i) * s;
  };
  for (int y = 0; y < oh; ++y) {
    const float fy = source(y, sy);
    const int y0 = std::max(static_cast<int>(std::floor(fy)), 0);
    const int y1 = std::min(static_cast<int>(std::ceil(fy)), in.height - 1);
    const float dy = fy - static_cast<float>(y0);
    for (int x = 0; x < ow; ++x) {
      const float fx = source(x, sx);
      const int x0 = std::max(static_cast<int>(std::floor(fx)), 0);
      const int x1 = std::min(static_cast<int>(std::ceil(fx)), in.width - 1);
      const float dx = fx - static_cast<float>(x0);
      const float w00 = (1.0f - dy) * (1.0f - dx), w01 = (1.0f - dy) * dx;
      const float w10 = dy * (1.0f - dx), w11 = dy * dx;
      auto px = [&](int yy, int xx) {
        return in.pixels.data() +
               (static_cast<size_t>(yy) * static_cast<size_t>(in.width) + static_cast<size_t>(xx)) *
                   ch;
      };
      const uint8_t *p00 = px(y0, x0), *p01 = px(y0, x1), *p10 = px(y1, x0), *p11 = px(y1, x1);
      uint8_t* o = out.pixels.data() +
                   (static_cast<size_t>(y) * static_cast<size_t>(ow) + static_cast<size_t>(x)) * ch;
      for (size_t c = 0; c < ch; ++c) {
        float acc = 0.0f;
        acc = acc + static_cast<float>(p00[c]) * w00;
        acc = acc + static_cast<float>(p01[c]) * w01;
        acc = acc + static_cast<float>(p10[c]) * w10;
        acc = acc + static_cast<float>(p11[c]) * w11;
        // Plain float -> uint8 conversion; values stay in [0, 255] (the clamp only guards UB).
        o[c] = static_cast<uint8_t>(static_cast<int>(std::clamp(acc, 0.0f, 255.0f)));
      }
    }
  }
  return out;
}

// Pillow NEAREST: source index floor(p_k), p_0 = s / 2, p_{k+1} = p_k + s in double (section 1.6).
std::vector<int> pillow_nearest_index(int in, int out) {
  std::vector<int> idx(static_cast<size_t>(out));
  const double s = static_cast<double>(in) / static_cast<double>(out);
  double p = s / 2;
  for (int k = 0; k < out; ++k, p += s)
    idx[static_cast<size_t>(k)] = std::min(static_cast<int>(std::floor(p)), in - 1);
  return idx;
}

Image resize_nearest(const Image& in, int ow, int oh) {
  Image out;
  out.width = ow;
  out.height = oh;
  out.channels = in.channels;
  const auto ch = static_cast<size_t>(in.channels);
  out.pixels.resize(static_cast<size_t>(ow) * static_cast<size_t>(oh) * ch);
  const auto ys = pillow_nearest_index(in.height, oh);
  const auto xs = pillow_nearest_index(in.width, ow);
  for (int y = 0; y < oh; ++y)
    for (int x = 0; x < ow; ++x)
      std::memcpy(
          out.pixels.data() +
              (static_cast<size_t>(y) * static_cast<size_t>(ow) + static_cast<size_t>(x)) * ch,
          in.pixels.data() +
              (static_cast<size_t>(ys[static_cast<size_t>(y)]) * static_cast<size_t>(in.width) +
               static_cast<size_t>(xs[static_cast<size_t>(x)])) *
                  ch,
          ch);
  return out;
}

}  // namespace

Image resize_image(const Image& image, int width, int height, ResizeMode mode) {
  if (width <= 0 || height <= 0) fail("resize target ", width, "x", height, " is not positive");
  if (image.width == width && image.height == height) return image;
  if (int64_t{width} * height > kMaxPixels) fail("resize target too large");
  switch (mode) {
    case ResizeMode::kBilinear:
      return resize_bilinear(image, width, height, true);
    case ResizeMode::kBilinearLegacy:
      return resize_bilinear(image, width, height, false);
    case ResizeMode::kNearest:
      return resize_nearest(image, width, height);
    default:
      fail("image is ", image.width, "x", image.height, " but the model takes ", width, "x", height,
           " (and --resize none was given)");
  }
}

Normalization parse_normalization(const std::string& text) {
  const auto comma = text.find(',');
  if (comma == std::string::npos) fail("--normalize expects SCALE,MEAN, got '", text, "'");
  Normalization n;
  try {
    size_t used = 0;
    const std::string a = text.substr(0, comma), b = text.substr(comma + 1);
    n.scale = std::stof(a, &used);
    if (used != a.size()) throw std::invalid_argument(a);
    n.mean = std::stof(b, &used);
    if (used != b.size()) throw std::invalid_argument(b);
  } catch (const std::exception&) {
    fail("--normalize expects two numbers SCALE,MEAN, got '", text, "'");
  }
  if (!(n.scale != 0.0f) || !std::isfinite(n.scale) || !std::isfinite(n.mean))
    fail("--normalize: SCALE must be finite and non-zero, MEAN finite");
  return n;
}

std::vector<uint8_t> image_to_input(const Image& image, const std::vector<int32_t>& shape,
                                    container::TensorType type, ResizeMode mode,
                                    const Normalization& norm) {
  if (type != container::TensorType::kUInt8 && type != container::TensorType::kInt8)
    fail("image input needs a uint8 or int8 input tensor, the model's is ",
         container::tensor_type_name(type));
  int h = 0, w = 0, c = 0;
  if (shape.size() == 4 && shape[0] == 1) {
    h = shape[1], w = shape[2], c = shape[3];
  } else if (shape.size() == 3 && shape[0] == 1) {
    h = shape[1], w = shape[2], c = 1;
  } else {
    std::string dims;
    for (int32_t d : shape) dims += (dims.empty() ? "" : "x") + std::to_string(d);
    fail("the model's input shape [", dims, "] is not an image ([1, H, W, C] or [1, H, W])");
  }
  if (c != 1 && c != 3 && c != 4)
    fail("the model's input has ", c, " channels (1, 3 or 4 expected)");
  const Image resized = resize_image(convert_channels(image, c), w, h, mode);
  std::vector<uint8_t> out = resized.pixels;
  if (!norm.identity())
    for (uint8_t& v : out) {
      const float f = (static_cast<float>(v) - norm.mean) / norm.scale;
      v = static_cast<uint8_t>(static_cast<int>(std::clamp(f, 0.0f, 255.0f)));
    }
  if (type == container::TensorType::kInt8)
    for (uint8_t& v : out) v ^= 0x80;
  return out;
}

}  // namespace tinycoral::host
