// Little-endian bit-field access over byte arrays: bit b is bit (b % 8) of byte (b / 8). Edge TPU
// instructions, relocations and flatbuffer-free parsers all read fields this way.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>

namespace tinycoral {

// Reads `width` (1..64) bits starting at bit `lo`. The caller guarantees lo + width <= 8 *
// bytes.size().
inline uint64_t get_bits(std::span<const uint8_t> bytes, uint32_t lo, uint32_t width) {
  uint64_t value = 0;
  for (uint32_t i = 0; i < width;) {
    const uint32_t bit = lo + i;
    const uint32_t in_byte = bit & 7;
    const uint32_t take = (8 - in_byte) < (width - i) ? (8 - in_byte) : (width - i);
    const uint64_t chunk = (bytes[bit >> 3] >> in_byte) & ((1u << take) - 1);
    value |= chunk << i;
    i += take;
  }
  return value;
}

// Writes the low `width` (1..64) bits of `value` starting at bit `lo`; other bits are kept.
inline void set_bits(std::span<uint8_t> bytes, uint32_t lo, uint32_t width, uint64_t value) {
  for (uint32_t i = 0; i < width;) {
    const uint32_t bit = lo + i;
    const uint32_t in_byte = bit & 7;
    const uint32_t take = (8 - in_byte) < (width - i) ? (8 - in_byte) : (width - i);
    const uint8_t mask = static_cast<uint8_t>(((1u << take) - 1) << in_byte);
    const uint8_t chunk = static_cast<uint8_t>(((value >> i) & ((1u << take) - 1)) << in_byte);
    bytes[bit >> 3] = static_cast<uint8_t>((bytes[bit >> 3] & ~mask) | chunk);
    i += take;
  }
}

// Sign-extends the low `width` bits of `value`.
inline int64_t sign_extend(uint64_t value, uint32_t width) {
  if (width >= 64) return static_cast<int64_t>(value);
  const uint64_t sign = uint64_t{1} << (width - 1);
  value &= (uint64_t{1} << width) - 1;
  return static_cast<int64_t>((value ^ sign) - sign);
}

inline uint32_t load_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t load_le64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline void store_le32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void store_le64(uint8_t* p, uint64_t v) { std::memcpy(p, &v, 8); }

}  // namespace tinycoral
