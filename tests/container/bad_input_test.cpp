// Malformed files give a clear tinycoral::Error, never a crash: truncations, wrong magic, offsets
// out of range, random bytes (on our own synthetic files), and a bounded set of mutations of every
// real test-data model made at run time (nothing derived from Google's files is committed).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/bits.h"
#include "common/error.h"
#include "common/file.h"
#include "container/edgetpu_custom_op.h"
#include "container/edgetpu_model.h"
#include "container/package.h"
#include "container/tflite_reader.h"
#include "container/tflite_writer.h"
#include "support/error_of.h"
#include "support/testdata.h"
#include "synthetic.h"
#include "testdata_models.h"

namespace tinycoral::container {
namespace {

// Parses with every reader that applies; returns false only if something other than an Error (or
// bad_alloc, which the CLI reports too) escaped.
void expect_parses_or_throws_error(std::span<const uint8_t> bytes) {
  try {
    (void)read_edgetpu_model(bytes);
  } catch (const Error&) {
  }
  try {
    (void)read_package(bytes);
  } catch (const Error&) {
  }
}

using testing::error_of;

TEST(BadInput, TruncatedModelIsAnError) {
  const std::vector<uint8_t> bytes = write_edgetpu_model(testing::synthetic_edgetpu_model());
  for (size_t n :
       {size_t{0}, size_t{3}, size_t{7}, size_t{8}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(n);
    const std::span<const uint8_t> prefix(bytes.data(), n);
    EXPECT_FALSE(error_of([&] { read_edgetpu_model(prefix); }).empty());
  }
}

// Found by tflite_fuzz under UBSan: a quantization zero_point vector ([long]) whose elements sit on
// a 4-byte boundary passes flatbuffers' verifier (it checks only the length word's alignment). The
// reader must copy such elements out, not load them in place; the file is a mutation of our own
// synthetic seed.
TEST(BadInput, MisalignedInt64VectorIsReadWithoutUndefinedBehaviour) {
  const auto bytes =
      read_file(testing::source_dir() / "tests/data/container/misaligned_int64_vector.tflite");
  const Model model = read_tflite(bytes);
  ASSERT_FALSE(model.subgraphs.empty());
  EXPECT_FALSE(error_of([&] { read_edgetpu_model(bytes); }).empty());
}

TEST(BadInput, WrongMagicIsNamed) {
  std::vector<uint8_t> bytes = write_tflite(testing::synthetic_model());
  bytes[4] = 'X';
  const std::string message = error_of([&] { read_tflite(bytes); });
  EXPECT_NE(message.find("TFL3"), std::string::npos) << message;
}

TEST(BadInput, OffsetOutOfRangeIsAnError) {
  std::vector<uint8_t> bytes = write_tflite(testing::synthetic_model());
  // The root offset (bytes 0..3) pointing past the end.
  store_le32(bytes.data(), static_cast<uint32_t>(bytes.size() + 64));
  EXPECT_NE(error_of([&] { read_tflite(bytes); }).find("malformed"), std::string::npos);
  std::vector<uint8_t> package = write_package(testing::synthetic_package());
  store_le32(package.data(), 0xfffffff0u);
  EXPECT_FALSE(error_of([&] { read_package(package); }).empty());
}

TEST(BadInput, RandomBytesAreErrors) {
  std::mt19937 rng(1234);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> bytes(rng() % 512);
    for (auto& b : bytes) b = static_cast<uint8_t>(rng());
    if (bytes.size() >= 8 && i % 2 == 0) std::memcpy(bytes.data() + 4, "TFL3", 4);
    EXPECT_FALSE(error_of([&] { read_edgetpu_model(bytes); }).empty());
    EXPECT_FALSE(error_of([&] { read_package(bytes); }).empty());
    EXPECT_FALSE(error_of([&] { read_edgetpu_custom_op(bytes); }).empty());
  }
}

TEST(BadInput, FileErrorsNameTheFile) {
  const std::string message = error_of([] { read_edgetpu_model_file("/nonexistent/x.tflite"); });
  EXPECT_NE(message.find("/nonexistent/x.tflite"), std::string::npos) << message;
}

// Mutations of our own synthetic file: every truncation point class and many byte flips.
TEST(Mutations, SyntheticFileMutationsParseOrThrowError) {
  const std::vector<uint8_t> original = write_edgetpu_model(testing::synthetic_edgetpu_model());
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> bytes = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    if (i % 5 == 0) bytes.resize(rng() % bytes.size());
    expect_parses_or_throws_error(bytes);
  }
}

// Mutations of the real files, made at run time: truncations and byte flips, with the flips aimed
// at the flatbuffer structure near the start and at the nested package (a bounded count per file).
TEST(Mutations, RealFileMutationsParseOrThrowError) {
  TINYCORAL_REQUIRE_TESTDATA(dir);
  std::mt19937 rng(7);
  int files = 0;
  for (const auto& path : testing::tflite_files(dir)) {
    if (std::filesystem::file_size(path) > 1'200'000) continue;  // keep the test fast
    SCOPED_TRACE(path.string());
    const std::vector<uint8_t> original = read_file(path);
    ++files;
    for (int i = 0; i < 20; ++i) {
      std::vector<uint8_t> bytes = original;
      if (i < 5) {
        bytes.resize(rng() % bytes.size());
      } else {
        const size_t window = i % 2 ? std::min<size_t>(bytes.size(), 4096) : bytes.size();
        for (int f = 0; f < 1 + i % 3; ++f)
          bytes[rng() % window] ^= static_cast<uint8_t>(1u << (rng() % 8));
      }
      expect_parses_or_throws_error(bytes);
    }
    // The custom op's options alone, mutated: exercises the FlexBuffers and package readers.
    const EdgeTpuModel m = read_edgetpu_model(original);
    for (const auto& op : m.edgetpu_ops) {
      const auto& options = m.model.subgraphs[op.subgraph].operators[op.op_index].custom_options;
      for (int i = 0; i < 20; ++i) {
        std::vector<uint8_t> bytes = options;
        const size_t tail = std::min<size_t>(bytes.size(), 256);
        if (i % 3 == 0)
          bytes[bytes.size() - 1 - rng() % tail] ^= static_cast<uint8_t>(1 + rng() % 255);
        else
          bytes[rng() % bytes.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
        try {
          (void)read_edgetpu_custom_op(bytes);
        } catch (const Error&) {
        }
      }
    }
  }
  EXPECT_GT(files, 5);
}

}  // namespace
}  // namespace tinycoral::container
