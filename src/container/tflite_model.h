// A TFLite model as plain C++ data: what the reader produces, the interpreter and compiler consume,
// and the writer serializes. Only the parts of the schema tinycoral needs are kept; everything is
// owned (no pointers into the file), so a Model outlives the bytes it was read from. Every struct
// compares by value (operator==), which is what the read/write round-trip tests check.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace tinycoral::container {

// TFLite TensorType values (schema enum).
enum class TensorType : int8_t {
  kFloat32 = 0,
  kFloat16 = 1,
  kInt32 = 2,
  kUInt8 = 3,
  kInt64 = 4,
  kString = 5,
  kBool = 6,
  kInt16 = 7,
  kComplex64 = 8,
  kInt8 = 9,
  kFloat64 = 10,
};
const char* tensor_type_name(TensorType type);
size_t tensor_type_size(TensorType type);  // bytes per element; 0 for kString

struct Quantization {
  std::vector<float> scale;         // one per tensor, or one per channel of quantized_dimension
  std::vector<int64_t> zero_point;  // same length as scale
  std::vector<float> min, max;      // optional calibration ranges
  int32_t quantized_dimension = 0;
  bool empty() const { return scale.empty(); }
  bool operator==(const Quantization&) const = default;
};

struct Tensor {
  std::string name;
  std::vector<int32_t> shape;
  std::vector<int32_t> shape_signature;  // -1 for dynamic dimensions; empty if absent
  TensorType type = TensorType::kFloat32;
  uint32_t buffer = 0;  // index into Model::buffers; buffer 0 is always the empty sentinel
  Quantization quantization;
  bool is_variable = false;
  int64_t element_count() const;
  bool operator==(const Tensor&) const = default;
};

struct Buffer {
  std::vector<uint8_t> data;
  bool operator==(const Buffer&) const = default;
};

// TFLite BuiltinOperator values used by tinycoral (schema enum; the full list is in the schema).
enum class BuiltinOp : int32_t {
  kAdd = 0,
  kAveragePool2D = 1,
  kConcatenation = 2,
  kConv2D = 3,
  kDepthwiseConv2D = 4,
  kDequantize = 6,
  kFullyConnected = 9,
  kL2Normalization = 11,
  kLogistic = 14,
  kMaxPool2D = 17,
  kMul = 18,
  kRelu = 19,
  kRelu6 = 21,
  kReshape = 22,
  kResizeBilinear = 23,
  kSoftmax = 25,
  kTanh = 28,
  kCustom = 32,
  kPad = 34,
  kMean = 40,
  kSub = 41,
  kSqueeze = 43,
  kUnidirectionalSequenceLstm = 44,
  kStridedSlice = 45,
  kSplit = 49,
  kCast = 53,
  kArgMax = 56,
  kTile = 69,
  kResizeNearestNeighbor = 97,
  kQuantize = 114,
};
const char* builtin_op_name(int32_t code);  // "CONV_2D", ...; "BUILTIN_<n>" when unknown

struct OperatorCode {
  int32_t builtin_code = 0;  // max(deprecated_builtin_code, builtin_code) as TFLite resolves it
  std::string custom_code;   // for kCustom, e.g. "edgetpu-custom-op"
  int32_t version = 1;
  bool operator==(const OperatorCode&) const = default;
};

enum class Padding : int8_t { kSame = 0, kValid = 1 };
enum class Activation : int8_t { kNone = 0, kRelu = 1, kReluN1To1 = 2, kRelu6 = 3, kTanh = 4 };

// Builtin options, one struct per options table the supported operators use.
struct Conv2DOptions {
  Padding padding = Padding::kSame;
  int32_t stride_w = 1, stride_h = 1, dilation_w = 1, dilation_h = 1;
  Activation activation = Activation::kNone;
  bool operator==(const Conv2DOptions&) const = default;
};
struct DepthwiseConv2DOptions {
  Padding padding = Padding::kSame;
  int32_t stride_w = 1, stride_h = 1, depth_multiplier = 1, dilation_w = 1, dilation_h = 1;
  Activation activation = Activation::kNone;
  bool operator==(const DepthwiseConv2DOptions&) const = default;
};
struct FullyConnectedOptions {
  Activation activation = Activation::kNone;
  int8_t weights_format = 0;
  bool keep_num_dims = false;
  bool asymmetric_quantize_inputs = false;
  bool operator==(const FullyConnectedOptions&) const = default;
};
struct Pool2DOptions {
  Padding padding = Padding::kSame;
  int32_t stride_w = 1, stride_h = 1, filter_w = 1, filter_h = 1;
  Activation activation = Activation::kNone;
  bool operator==(const Pool2DOptions&) const = default;
};
struct ActivationOptions {  // Add, Sub, Mul
  Activation activation = Activation::kNone;
  bool operator==(const ActivationOptions&) const = default;
};
struct ConcatenationOptions {
  int32_t axis = 0;
  Activation activation = Activation::kNone;
  bool operator==(const ConcatenationOptions&) const = default;
};
struct SplitOptions {
  int32_t num_splits = 0;
  bool operator==(const SplitOptions&) const = default;
};
struct ReshapeOptions {
  std::vector<int32_t> new_shape;
  bool operator==(const ReshapeOptions&) const = default;
};
struct SoftmaxOptions {
  float beta = 1.0f;
  bool operator==(const SoftmaxOptions&) const = default;
};
struct ResizeOptions {  // ResizeBilinear and ResizeNearestNeighbor
  bool align_corners = false;
  bool half_pixel_centers = false;
  bool operator==(const ResizeOptions&) const = default;
};
struct ArgMaxOptions {
  TensorType output_type = TensorType::kInt64;
  bool operator==(const ArgMaxOptions&) const = default;
};
struct ReducerOptions {  // Mean
  bool keep_dims = false;
  bool operator==(const ReducerOptions&) const = default;
};
struct SqueezeOptions {
  std::vector<int32_t> squeeze_dims;
  bool operator==(const SqueezeOptions&) const = default;
};
struct StridedSliceOptions {
  int32_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0, shrink_axis_mask = 0;
  bool operator==(const StridedSliceOptions&) const = default;
};
struct SequenceLstmOptions {  // UnidirectionalSequenceLSTM
  Activation activation = Activation::kTanh;
  float cell_clip = 0.0f, proj_clip = 0.0f;
  bool time_major = false;
  bool asymmetric_quantize_inputs = false;
  bool operator==(const SequenceLstmOptions&) const = default;
};

using BuiltinOptions =
    std::variant<std::monostate, Conv2DOptions, DepthwiseConv2DOptions, FullyConnectedOptions,
                 Pool2DOptions, ActivationOptions, ConcatenationOptions, SplitOptions,
                 ReshapeOptions, SoftmaxOptions, ResizeOptions, ArgMaxOptions, ReducerOptions,
                 SqueezeOptions, StridedSliceOptions, SequenceLstmOptions>;

struct Operator {
  uint32_t opcode_index = 0;
  std::vector<int32_t> inputs;  // tensor indices; -1 = optional input absent
  std::vector<int32_t> outputs;
  std::vector<int32_t> intermediates;
  uint8_t builtin_options_type = 0;  // the schema's BuiltinOptions union tag, kept for writing back
  BuiltinOptions options;
  std::vector<uint8_t>
      custom_options;  // FlexBuffers for edgetpu-custom-op and the other custom ops
  bool operator==(const Operator&) const = default;
};

struct Subgraph {
  std::string name;
  std::vector<Tensor> tensors;
  std::vector<int32_t> inputs, outputs;
  std::vector<Operator> operators;  // in execution order
  bool operator==(const Subgraph&) const = default;
};

struct Model {
  uint32_t version = 3;
  std::string description;
  std::vector<OperatorCode> operator_codes;
  std::vector<Subgraph> subgraphs;  // subgraph 0 is the main graph
  std::vector<Buffer> buffers;

  const OperatorCode& code_of(const Operator& op) const {
    return operator_codes.at(op.opcode_index);
  }
  bool operator==(const Model&) const = default;
};

}  // namespace tinycoral::container
