// Small helpers shared by the container readers and writers (internal to src/container/): copying
// flatbuffer vectors into owned std::vectors, and giving nested buffers an aligned home before they
// are read (flatbuffers reads scalars in place, so a misaligned nested buffer would be UB).
#pragma once

#include <flatbuffers/flatbuffers.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace tinycoral::container::detail {

// The bytes at a 16-byte aligned address: the caller's when they already are, else a copy (a
// std::vector's storage comes from operator new, which aligns to at least 16 bytes).
class AlignedBytes {
 public:
  explicit AlignedBytes(std::span<const uint8_t> bytes) : view_(bytes) {
    if (reinterpret_cast<uintptr_t>(bytes.data()) % 16 != 0) {
      copy_.assign(bytes.begin(), bytes.end());
      view_ = copy_;
    }
  }
  AlignedBytes(const AlignedBytes&) = delete;  // view_ may point into copy_
  AlignedBytes& operator=(const AlignedBytes&) = delete;
  const uint8_t* data() const { return view_.data(); }
  size_t size() const { return view_.size(); }
  std::span<const uint8_t> span() const { return view_; }

 private:
  std::span<const uint8_t> view_;
  std::vector<uint8_t> copy_;
};

template <typename Out, typename In>
std::vector<Out> to_vector(const flatbuffers::Vector<In>* v) {
  std::vector<Out> out;
  if (v == nullptr) return out;
  out.reserve(v->size());
  if constexpr (std::is_arithmetic_v<In>) {
    // The verifier only checks a vector's 4-byte length for alignment, so the elements of a
    // malformed file's [long] may sit on a 4-byte boundary: copy them out byte-wise.
    const auto* bytes = reinterpret_cast<const uint8_t*>(v->data());
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i) {
      In value;
      std::memcpy(&value, bytes + size_t{i} * sizeof(In), sizeof(In));
      out.push_back(static_cast<Out>(flatbuffers::EndianScalar(value)));
    }
  } else {
    for (flatbuffers::uoffset_t i = 0; i < v->size(); ++i)
      out.push_back(static_cast<Out>(v->Get(i)));
  }
  return out;
}

inline std::vector<uint8_t> to_bytes(const flatbuffers::Vector<uint8_t>* v) {
  if (v == nullptr) return {};
  return std::vector<uint8_t>(v->data(), v->data() + v->size());
}

inline std::string to_string(const flatbuffers::String* s) {
  return s == nullptr ? std::string() : std::string(s->data(), s->size());
}

// A vector field's offset, or none (0) for an empty vector: absent fields cost no bytes.
template <typename T>
flatbuffers::Offset<flatbuffers::Vector<T>> vec_or_null(flatbuffers::FlatBufferBuilder& b,
                                                        const std::vector<T>& v) {
  return v.empty() ? 0 : b.CreateVector(v);
}

// True when `bytes` carries the 4-character file identifier at bytes 4..7.
inline bool has_identifier(std::span<const uint8_t> bytes, const char* id) {
  return bytes.size() >= 8 && flatbuffers::BufferHasIdentifier(bytes.data(), id);
}

}  // namespace tinycoral::container::detail
