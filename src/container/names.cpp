// Names and sizes of the enums in tflite_model.h and executable.h.
#include "common/error.h"
#include "container/executable.h"
#include "container/tflite_model.h"

namespace tinycoral::container {

const char* tensor_type_name(TensorType type) {
  switch (type) {
    case TensorType::kFloat32:
      return "float32";
    case TensorType::kFloat16:
      return "float16";
    case TensorType::kInt32:
      return "int32";
    case TensorType::kUInt8:
      return "uint8";
    case TensorType::kInt64:
      return "int64";
    case TensorType::kString:
      return "string";
    case TensorType::kBool:
      return "bool";
    case TensorType::kInt16:
      return "int16";
    case TensorType::kComplex64:
      return "complex64";
    case TensorType::kInt8:
      return "int8";
    case TensorType::kFloat64:
      return "float64";
  }
  return "unknown";
}

size_t tensor_type_size(TensorType type) {
  switch (type) {
    case TensorType::kFloat32:
      return 4;
    case TensorType::kFloat16:
      return 2;
    case TensorType::kInt32:
      return 4;
    case TensorType::kUInt8:
      return 1;
    case TensorType::kInt64:
      return 8;
    case TensorType::kString:
      return 0;
    case TensorType::kBool:
      return 1;
    case TensorType::kInt16:
      return 2;
    case TensorType::kComplex64:
      return 8;
    case TensorType::kInt8:
      return 1;
    case TensorType::kFloat64:
      return 8;
  }
  return 0;
}

int64_t Tensor::element_count() const {
  int64_t n = 1;
  for (int32_t d : shape) n *= d;
  return n;
}

const char* builtin_op_name(int32_t code) {
  switch (static_cast<BuiltinOp>(code)) {
    case BuiltinOp::kAdd:
      return "ADD";
    case BuiltinOp::kAveragePool2D:
      return "AVERAGE_POOL_2D";
    case BuiltinOp::kConcatenation:
      return "CONCATENATION";
    case BuiltinOp::kConv2D:
      return "CONV_2D";
    case BuiltinOp::kDepthwiseConv2D:
      return "DEPTHWISE_CONV_2D";
    case BuiltinOp::kDequantize:
      return "DEQUANTIZE";
    case BuiltinOp::kFullyConnected:
      return "FULLY_CONNECTED";
    case BuiltinOp::kL2Normalization:
      return "L2_NORMALIZATION";
    case BuiltinOp::kLogistic:
      return "LOGISTIC";
    case BuiltinOp::kMaxPool2D:
      return "MAX_POOL_2D";
    case BuiltinOp::kMul:
      return "MUL";
    case BuiltinOp::kRelu:
      return "RELU";
    case BuiltinOp::kRelu6:
      return "RELU6";
    case BuiltinOp::kReshape:
      return "RESHAPE";
    case BuiltinOp::kResizeBilinear:
      return "RESIZE_BILINEAR";
    case BuiltinOp::kSoftmax:
      return "SOFTMAX";
    case BuiltinOp::kTanh:
      return "TANH";
    case BuiltinOp::kCustom:
      return "CUSTOM";
    case BuiltinOp::kPad:
      return "PAD";
    case BuiltinOp::kMean:
      return "MEAN";
    case BuiltinOp::kSub:
      return "SUB";
    case BuiltinOp::kSqueeze:
      return "SQUEEZE";
    case BuiltinOp::kUnidirectionalSequenceLstm:
      return "UNIDIRECTIONAL_SEQUENCE_LSTM";
    case BuiltinOp::kStridedSlice:
      return "STRIDED_SLICE";
    case BuiltinOp::kSplit:
      return "SPLIT";
    case BuiltinOp::kCast:
      return "CAST";
    case BuiltinOp::kArgMax:
      return "ARG_MAX";
    case BuiltinOp::kTile:
      return "TILE";
    case BuiltinOp::kResizeNearestNeighbor:
      return "RESIZE_NEAREST_NEIGHBOR";
    case BuiltinOp::kQuantize:
      return "QUANTIZE";
  }
  thread_local std::string unknown;
  unknown = cat("BUILTIN_", code);
  return unknown.c_str();
}

size_t data_type_size(DataType type) {
  switch (type) {
    case DataType::kFixedPoint8:
    case DataType::kSignedFixedPoint8:
      return 1;
    case DataType::kFixedPoint16:
    case DataType::kSignedFixedPoint16:
      return 2;
    case DataType::kBfloat:
    case DataType::kHalf:
      return 2;
    case DataType::kSignedFixedPoint32:
    case DataType::kSingle:
      return 4;
  }
  return 1;
}

bool data_type_is_signed_fixed(DataType type) {
  return type == DataType::kSignedFixedPoint8 || type == DataType::kSignedFixedPoint16;
}

const char* executable_type_name(ExecutableType type) {
  switch (type) {
    case ExecutableType::kStandAlone:
      return "STAND_ALONE";
    case ExecutableType::kParameterCaching:
      return "PARAMETER_CACHING";
    case ExecutableType::kExecutionOnly:
      return "EXECUTION_ONLY";
  }
  return "UNKNOWN";
}

}  // namespace tinycoral::container
