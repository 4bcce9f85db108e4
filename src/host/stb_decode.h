// A narrow wrapper over stb_image so only one file sees stb (and its warnings).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace tinycoral::host {

struct StbImage {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Decodes PNG, JPEG and PPM/PGM (the decoders compiled in) with the file's own channel count.
// Throws Error with stb's reason when the bytes are not a readable image.
StbImage stb_decode(std::span<const uint8_t> bytes);

}  // namespace tinycoral::host
