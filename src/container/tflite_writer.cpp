// Model -> TFLite flatbuffer. Fields are written in the schema's slot order (schema/tflite.fbs);
// defaults are omitted as any flatbuffers writer would, so read_tflite(write_tflite(m)) == m.
#include "container/tflite_writer.h"

#include "common/error.h"
#include "container/flatbuffer_util.h"
#include "container/schema/tflite_generated.h"

namespace tinycoral::container {
namespace {

using detail::vec_or_null;
using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;
using Tag = tflite::BuiltinOptions;

tflite::ActivationFunctionType fb(Activation a) {
  return static_cast<tflite::ActivationFunctionType>(a);
}
tflite::Padding fb(Padding p) { return static_cast<tflite::Padding>(p); }
tflite::TensorType fb(TensorType t) { return static_cast<tflite::TensorType>(t); }

// The operator's options table for its union tag. A tag whose options struct we do not model is
// written as an empty table (which is exactly what those tables hold for the operators we meet).
Offset<void> write_options(FlatBufferBuilder& b, const Operator& op) {
  const auto tag = static_cast<Tag>(op.builtin_options_type);
  if (op.builtin_options_type == 0) {
    if (!std::holds_alternative<std::monostate>(op.options))
      fail("operator has builtin options but builtin_options_type 0");
    return 0;
  }
  auto mismatch = [&]() -> Offset<void> {
    fail("operator options do not match builtin_options_type ", int{op.builtin_options_type});
  };
  return std::visit(
      [&](const auto& o) -> Offset<void> {
        using O = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<O, std::monostate>) {
          const auto start = b.StartTable();
          return Offset<void>(b.EndTable(start));
        } else if constexpr (std::is_same_v<O, Conv2DOptions>) {
          if (tag != Tag::Conv2DOptions) return mismatch();
          return tflite::CreateConv2DOptions(b, fb(o.padding), o.stride_w, o.stride_h,
                                             fb(o.activation), o.dilation_w, o.dilation_h)
              .Union();
        } else if constexpr (std::is_same_v<O, DepthwiseConv2DOptions>) {
          if (tag != Tag::DepthwiseConv2DOptions) return mismatch();
          return tflite::CreateDepthwiseConv2DOptions(b, fb(o.padding), o.stride_w, o.stride_h,
                                                      o.depth_multiplier, fb(o.activation),
                                                      o.dilation_w, o.dilation_h)
              .Union();
        } else if constexpr (std::is_same_v<O, FullyConnectedOptions>) {
          if (tag != Tag::FullyConnectedOptions) return mismatch();
          return tflite::CreateFullyConnectedOptions(b, fb(o.activation), o.weights_format,
                                                     o.keep_num_dims, o.asymmetric_quantize_inputs)
              .Union();
        } else if constexpr (std::is_same_v<O, Pool2DOptions>) {
          if (tag != Tag::Pool2DOptions) return mismatch();
          return tflite::CreatePool2DOptions(b, fb(o.padding), o.stride_w, o.stride_h, o.filter_w,
                                             o.filter_h, fb(o.activation))
              .Union();
        } else if constexpr (std::is_same_v<O, ActivationOptions>) {
          if (tag == Tag::AddOptions) return tflite::CreateAddOptions(b, fb(o.activation)).Union();
          if (tag == Tag::SubOptions) return tflite::CreateSubOptions(b, fb(o.activation)).Union();
          if (tag == Tag::MulOptions) return tflite::CreateMulOptions(b, fb(o.activation)).Union();
          return mismatch();
        } else if constexpr (std::is_same_v<O, ConcatenationOptions>) {
          if (tag != Tag::ConcatenationOptions) return mismatch();
          return tflite::CreateConcatenationOptions(b, o.axis, fb(o.activation)).Union();
        } else if constexpr (std::is_same_v<O, SplitOptions>) {
          if (tag != Tag::SplitOptions) return mismatch();
          return tflite::CreateSplitOptions(b, o.num_splits).Union();
        } else if constexpr (std::is_same_v<O, ReshapeOptions>) {
          if (tag != Tag::ReshapeOptions) return mismatch();
          return tflite::CreateReshapeOptions(b, vec_or_null(b, o.new_shape)).Union();
        } else if constexpr (std::is_same_v<O, SoftmaxOptions>) {
          if (tag != Tag::SoftmaxOptions) return mismatch();
          return tflite::CreateSoftmaxOptions(b, o.beta).Union();
        } else if constexpr (std::is_same_v<O, ResizeOptions>) {
          if (tag == Tag::ResizeBilinearOptions)
            return tflite::CreateResizeBilinearOptions(b, o.align_corners, o.half_pixel_centers)
                .Union();
          if (tag == Tag::ResizeNearestNeighborOptions)
            return tflite::CreateResizeNearestNeighborOptions(b, o.align_corners,
                                                              o.half_pixel_centers)
                .Union();
          return mismatch();
        } else if constexpr (std::is_same_v<O, ArgMaxOptions>) {
          if (tag != Tag::ArgMaxOptions) return mismatch();
          return tflite::CreateArgMaxOptions(b, fb(o.output_type)).Union();
        } else if constexpr (std::is_same_v<O, ReducerOptions>) {
          if (tag != Tag::ReducerOptions) return mismatch();
          return tflite::CreateReducerOptions(b, o.keep_dims).Union();
        } else if constexpr (std::is_same_v<O, SqueezeOptions>) {
          if (tag != Tag::SqueezeOptions) return mismatch();
          return tflite::CreateSqueezeOptions(b, vec_or_null(b, o.squeeze_dims)).Union();
        } else if constexpr (std::is_same_v<O, StridedSliceOptions>) {
          if (tag != Tag::StridedSliceOptions) return mismatch();
          return tflite::CreateStridedSliceOptions(b, o.begin_mask, o.end_mask, o.ellipsis_mask,
                                                   o.new_axis_mask, o.shrink_axis_mask)
              .Union();
        } else {
          static_assert(std::is_same_v<O, SequenceLstmOptions>);
          if (tag != Tag::UnidirectionalSequenceLSTMOptions) return mismatch();
          return tflite::CreateUnidirectionalSequenceLSTMOptions(b, fb(o.activation), o.cell_clip,
                                                                 o.proj_clip, o.time_major,
                                                                 o.asymmetric_quantize_inputs)
              .Union();
        }
      },
      op.options);
}

Offset<tflite::QuantizationParameters> write_quantization(FlatBufferBuilder& b,
                                                          const Quantization& q) {
  if (q.scale.empty() && q.zero_point.empty() && q.min.empty() && q.max.empty() &&
      q.quantized_dimension == 0)
    return 0;
  const auto min = vec_or_null(b, q.min);
  const auto max = vec_or_null(b, q.max);
  const auto scale = vec_or_null(b, q.scale);
  const auto zero_point = vec_or_null(b, q.zero_point);
  return tflite::CreateQuantizationParameters(b, min, max, scale, zero_point,
                                              q.quantized_dimension);
}

Offset<tflite::Tensor> write_tensor(FlatBufferBuilder& b, const Tensor& t) {
  // TFLite always writes the shape vector (an empty one means a scalar).
  const auto shape = b.CreateVector(t.shape);
  const auto name = b.CreateString(t.name);
  const auto quantization = write_quantization(b, t.quantization);
  const auto signature = vec_or_null(b, t.shape_signature);
  return tflite::CreateTensor(b, shape, fb(t.type), t.buffer, name, quantization, t.is_variable,
                              signature);
}

Offset<tflite::Operator> write_operator(FlatBufferBuilder& b, const Operator& op) {
  const auto inputs = b.CreateVector(op.inputs);
  const auto outputs = b.CreateVector(op.outputs);
  const auto options = write_options(b, op);
  const auto custom = vec_or_null(b, op.custom_options);
  const auto intermediates = vec_or_null(b, op.intermediates);
  return tflite::CreateOperator(b, op.opcode_index, inputs, outputs,
                                static_cast<Tag>(op.builtin_options_type), options, custom, 0,
                                intermediates);
}

Offset<tflite::SubGraph> write_subgraph(FlatBufferBuilder& b, const Subgraph& g) {
  std::vector<Offset<tflite::Tensor>> tensors;
  for (const Tensor& t : g.tensors) tensors.push_back(write_tensor(b, t));
  std::vector<Offset<tflite::Operator>> operators;
  for (size_t i = 0; i < g.operators.size(); ++i)
    operators.push_back(
        with_context(cat("operator ", i), [&] { return write_operator(b, g.operators[i]); }));
  const auto tensors_v = b.CreateVector(tensors);
  const auto inputs = b.CreateVector(g.inputs);
  const auto outputs = b.CreateVector(g.outputs);
  const auto operators_v = b.CreateVector(operators);
  const auto name = g.name.empty() ? 0 : b.CreateString(g.name);
  return tflite::CreateSubGraph(b, tensors_v, inputs, outputs, operators_v, name);
}

}  // namespace

std::vector<uint8_t> write_tflite(const Model& model) {
  FlatBufferBuilder b(1 << 16);
  // Buffers first: big constant data ends up at the end of the file, as TFLite's own writer does.
  std::vector<Offset<tflite::Buffer>> buffers;
  for (const Buffer& buffer : model.buffers) {
    Offset<flatbuffers::Vector<uint8_t>> data = 0;
    if (!buffer.data.empty()) {
      b.ForceVectorAlignment(buffer.data.size(), sizeof(uint8_t), 16);
      data = b.CreateVector(buffer.data);
    }
    buffers.push_back(tflite::CreateBuffer(b, data));
  }
  std::vector<Offset<tflite::OperatorCode>> codes;
  for (const OperatorCode& c : model.operator_codes) {
    const auto custom = c.custom_code.empty() ? 0 : b.CreateString(c.custom_code);
    // The int8 field saturates at 127 (PLACEHOLDER_FOR_GREATER_OP_CODES) for newer operators.
    const auto deprecated = static_cast<int8_t>(std::min(c.builtin_code, 127));
    codes.push_back(tflite::CreateOperatorCode(b, deprecated, custom, c.version, c.builtin_code));
  }
  std::vector<Offset<tflite::SubGraph>> subgraphs;
  for (size_t i = 0; i < model.subgraphs.size(); ++i)
    subgraphs.push_back(
        with_context(cat("subgraph ", i), [&] { return write_subgraph(b, model.subgraphs[i]); }));
  const auto codes_v = b.CreateVector(codes);
  const auto subgraphs_v = b.CreateVector(subgraphs);
  const auto description = model.description.empty() ? 0 : b.CreateString(model.description);
  const auto buffers_v = b.CreateVector(buffers);
  b.Finish(tflite::CreateModel(b, model.version, codes_v, subgraphs_v, description, buffers_v),
           tflite::ModelIdentifier());
  return std::vector<uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

}  // namespace tinycoral::container
