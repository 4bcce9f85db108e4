// DarwiNN executables and DWN1 packages as plain C++ data (the fields of libedgetpu's
// executable.fbs that matter; see docs/container.md). Produced by the package reader, consumed by
// the runtime, the simulator and the inspector, written back by the compiler.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tinycoral::container {

enum class BufferKind : int16_t { kOutput = 0, kInput = 1, kParameter = 2, kScratch = 3 };
enum class Half : int16_t { kLower32 = 0, kUpper32 = 1 };

struct Meta {
  BufferKind desc = BufferKind::kOutput;
  int32_t batch = 0;
  std::string name;  // layer name for inputs/outputs
  Half position = Half::kLower32;
  bool operator==(const Meta&) const = default;
};

// A relocation: the low or high half of a buffer's device address goes into the bitstream at bit
// offset_bit (a 32-bit little-endian bit-field insert).
struct FieldOffset {
  Meta meta;
  int32_t offset_bit = 0;
  bool operator==(const FieldOffset&) const = default;
};

struct Bitstream {
  std::vector<uint8_t> data;  // a multiple of 16 bytes
  std::vector<FieldOffset> field_offsets;
  bool operator==(const Bitstream&) const = default;
};

enum class HintKind : uint8_t { kNone = 0, kDma = 1, kInstruction = 2, kInterrupt = 3, kFence = 4 };
enum class Direction : int16_t { kInfeed = 0, kOutfeed = 1 };

struct DmaHint {
  HintKind kind = HintKind::kNone;
  Direction direction = Direction::kInfeed;
  Meta meta;                    // kDma: which buffer
  int32_t offset_in_bytes = 0;  // kDma
  int32_t size_in_bytes = 0;    // kDma
  int32_t chunk_index = 0;      // kInstruction
  int16_t interrupt_type = 0;   // kInterrupt: event tag 4 + interrupt_type
  bool operator==(const DmaHint&) const = default;
};

struct DmaHints {
  std::vector<DmaHint> hints;
  bool fully_deterministic = false;
  bool operator==(const DmaHints&) const = default;
};

enum class DataType : int16_t {
  kFixedPoint8 = 0,
  kFixedPoint16 = 1,
  kSignedFixedPoint32 = 2,
  kBfloat = 3,
  kHalf = 4,
  kSingle = 5,
  kSignedFixedPoint8 = 8,
  kSignedFixedPoint16 = 9,
};
size_t data_type_size(DataType type);
bool data_type_is_signed_fixed(DataType type);  // the host flips the MSB of these (driver.md 5.4)

struct OutputLayout {
  std::vector<int32_t> y_coordinate_to_linear_tile_id_map;
  std::vector<int32_t> x_coordinate_to_linear_tile_id_map;
  std::vector<int32_t> linearized_tile_byte_offset;
  std::vector<int32_t> x_coordinate_to_local_byte_offset;
  std::vector<int32_t> y_coordinate_to_local_y_offset;
  std::vector<int32_t> x_coordinate_to_local_y_row_size;
  bool operator==(const OutputLayout&) const = default;
};

struct Range {
  int32_t start = 0, end = 0;  // inclusive
  bool operator==(const Range&) const = default;
};

struct Layer {
  std::string name;
  int32_t size_bytes = 0;  // padded bytes per batch element per execution
  int32_t y_dim = 0, x_dim = 0, z_dim = 0;
  int32_t zero_point = 0;
  float dequantization_factor = 0.0f;
  DataType data_type = DataType::kFixedPoint8;
  bool is_output = false;  // any_layer is OutputLayer (else InputLayer)
  std::optional<OutputLayout> output_layout;
  int32_t execution_count_per_inference = 1;
  bool cache_on_dram = false;
  std::vector<Range> shape;
  bool operator==(const Layer&) const = default;
};

enum class ExecutableType : int16_t { kStandAlone = 0, kParameterCaching = 1, kExecutionOnly = 2 };
const char* executable_type_name(ExecutableType type);

struct Executable {
  int32_t version = 0;
  std::string name;
  int32_t batch_size = 1;
  int32_t scratch_size_bytes = 0;
  std::vector<Bitstream> bitstreams;
  std::vector<uint8_t> parameters;
  DmaHints dma_hints;
  std::vector<Layer> input_layers, output_layers;
  std::string chip;
  int64_t estimated_cycles = 0;
  int32_t used_narrow_memory_bytes_per_tile = 0;
  ExecutableType type = ExecutableType::kStandAlone;
  uint64_t parameter_caching_token = 0;
  bool use_tpu_dram_for_parameters = false;
  bool operator==(const Executable&) const = default;
};

struct Package {
  int32_t min_runtime_version = 0;
  std::vector<uint8_t> signature;
  int32_t keypair_version = 0;
  std::string compiler_version;
  int32_t virtual_chip_id = 0;
  std::string model_identifier;
  std::vector<Executable> executables;  // from serialized_multi_executable, in file order
  bool operator==(const Package&) const = default;
};

// The edgetpu-custom-op options (a FlexBuffers map; driver.md 5.1).
struct EdgeTpuCustomOp {
  int64_t version = 0;
  std::string chip_name;              // key "2", deprecated
  int64_t execution_preference = -1;  // key "5"
  std::vector<int64_t> chip_ids;      // key "6"
  std::vector<Package> packages;      // key "4", then the entries of key "7"
  bool operator==(const EdgeTpuCustomOp&) const = default;
};

}  // namespace tinycoral::container
