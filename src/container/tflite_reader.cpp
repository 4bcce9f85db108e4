// TFLite flatbuffer -> Model. Verifies the whole buffer first, then copies every field we keep and
// checks the indices that link the tables (opcode, tensor and buffer indices), so consumers can
// index without re-checking. Slot layout: schema/tflite.fbs; facts: docs/container.md.
#include "container/tflite_reader.h"

#include "common/error.h"
#include "common/file.h"
#include "container/flatbuffer_util.h"
#include "container/schema/tflite_generated.h"

namespace tinycoral::container {
namespace {

using detail::to_string;
using detail::to_vector;

Activation activation_of(tflite::ActivationFunctionType a) {
  const auto v = static_cast<int8_t>(a);
  if (v < 0 || v > static_cast<int8_t>(Activation::kTanh))
    fail("unsupported fused activation ", int{v});
  return static_cast<Activation>(v);
}

Padding padding_of(tflite::Padding p) {
  const auto v = static_cast<int8_t>(p);
  if (v != 0 && v != 1) fail("unknown padding ", int{v});
  return static_cast<Padding>(v);
}

TensorType tensor_type_of(tflite::TensorType t) {
  const auto v = static_cast<int8_t>(t);
  if (v < 0 || v > static_cast<int8_t>(TensorType::kFloat64))
    fail("unsupported tensor type ", int{v});
  return static_cast<TensorType>(v);
}

// Copies the options table named by the operator's union tag into the matching options struct.
// Tags we do not model leave std::monostate (the tag is kept for writing back).
BuiltinOptions read_options(const tflite::Operator& op) {
  using T = tflite::BuiltinOptions;
  switch (op.builtin_options_type()) {
    case T::Conv2DOptions: {
      const auto* o = op.builtin_options_as_Conv2DOptions();
      if (!o) break;
      return Conv2DOptions{padding_of(o->padding()),
                           o->stride_w(),
                           o->stride_h(),
                           o->dilation_w_factor(),
                           o->dilation_h_factor(),
                           activation_of(o->fused_activation_function())};
    }
    case T::DepthwiseConv2DOptions: {
      const auto* o = op.builtin_options_as_DepthwiseConv2DOptions();
      if (!o) break;
      return DepthwiseConv2DOptions{padding_of(o->padding()),
                                    o->stride_w(),
                                    o->stride_h(),
                                    o->depth_multiplier(),
                                    o->dilation_w_factor(),
                                    o->dilation_h_factor(),
                                    activation_of(o->fused_activation_function())};
    }
    case T::FullyConnectedOptions: {
      const auto* o = op.builtin_options_as_FullyConnectedOptions();
      if (!o) break;
      return FullyConnectedOptions{activation_of(o->fused_activation_function()),
                                   o->weights_format(), o->keep_num_dims(),
                                   o->asymmetric_quantize_inputs()};
    }
    case T::Pool2DOptions: {
      const auto* o = op.builtin_options_as_Pool2DOptions();
      if (!o) break;
      return Pool2DOptions{padding_of(o->padding()),
                           o->stride_w(),
                           o->stride_h(),
                           o->filter_width(),
                           o->filter_height(),
                           activation_of(o->fused_activation_function())};
    }
    case T::AddOptions: {
      const auto* o = op.builtin_options_as_AddOptions();
      if (!o) break;
      return ActivationOptions{activation_of(o->fused_activation_function())};
    }
    case T::SubOptions: {
      const auto* o = op.builtin_options_as_SubOptions();
      if (!o) break;
      return ActivationOptions{activation_of(o->fused_activation_function())};
    }
    case T::MulOptions: {
      const auto* o = op.builtin_options_as_MulOptions();
      if (!o) break;
      return ActivationOptions{activation_of(o->fused_activation_function())};
    }
    case T::ConcatenationOptions: {
      const auto* o = op.builtin_options_as_ConcatenationOptions();
      if (!o) break;
      return ConcatenationOptions{o->axis(), activation_of(o->fused_activation_function())};
    }
    case T::SplitOptions: {
      const auto* o = op.builtin_options_as_SplitOptions();
      if (!o) break;
      return SplitOptions{o->num_splits()};
    }
    case T::ReshapeOptions: {
      const auto* o = op.builtin_options_as_ReshapeOptions();
      if (!o) break;
      return ReshapeOptions{to_vector<int32_t>(o->new_shape())};
    }
    case T::SoftmaxOptions: {
      const auto* o = op.builtin_options_as_SoftmaxOptions();
      if (!o) break;
      return SoftmaxOptions{o->beta()};
    }
    case T::ResizeBilinearOptions: {
      const auto* o = op.builtin_options_as_ResizeBilinearOptions();
      if (!o) break;
      return ResizeOptions{o->align_corners(), o->half_pixel_centers()};
    }
    case T::ResizeNearestNeighborOptions: {
      const auto* o = op.builtin_options_as_ResizeNearestNeighborOptions();
      if (!o) break;
      return ResizeOptions{o->align_corners(), o->half_pixel_centers()};
    }
    case T::ArgMaxOptions: {
      const auto* o = op.builtin_options_as_ArgMaxOptions();
      if (!o) break;
      return ArgMaxOptions{tensor_type_of(o->output_type())};
    }
    case T::ReducerOptions: {
      const auto* o = op.builtin_options_as_ReducerOptions();
      if (!o) break;
      return ReducerOptions{o->keep_dims()};
    }
    case T::SqueezeOptions: {
      const auto* o = op.builtin_options_as_SqueezeOptions();
      if (!o) break;
      return SqueezeOptions{to_vector<int32_t>(o->squeeze_dims())};
    }
    case T::StridedSliceOptions: {
      const auto* o = op.builtin_options_as_StridedSliceOptions();
      if (!o) break;
      return StridedSliceOptions{o->begin_mask(), o->end_mask(), o->ellipsis_mask(),
                                 o->new_axis_mask(), o->shrink_axis_mask()};
    }
    case T::UnidirectionalSequenceLSTMOptions: {
      const auto* o = op.builtin_options_as_UnidirectionalSequenceLSTMOptions();
      if (!o) break;
      return SequenceLstmOptions{activation_of(o->fused_activation_function()), o->cell_clip(),
                                 o->proj_clip(), o->time_major(), o->asymmetric_quantize_inputs()};
    }
    default:
      break;
  }
  return std::monostate{};
}

Quantization read_quantization(const tflite::QuantizationParameters* q) {
  Quantization out;
  if (q == nullptr) return out;
  out.scale = to_vector<float>(q->scale());
  out.zero_point = to_vector<int64_t>(q->zero_point());
  out.min = to_vector<float>(q->min());
  out.max = to_vector<float>(q->max());
  out.quantized_dimension = q->quantized_dimension();
  return out;
}

Tensor read_tensor(const tflite::Tensor& t) {
  Tensor out;
  out.name = to_string(t.name());
  out.shape = to_vector<int32_t>(t.shape());
  out.shape_signature = to_vector<int32_t>(t.shape_signature());
  out.type = tensor_type_of(t.type());
  out.buffer = t.buffer();
  out.quantization = read_quantization(t.quantization());
  out.is_variable = t.is_variable();
  for (int32_t d : out.shape)
    if (d < 0) fail("negative dimension ", d, " in its shape");
  const Quantization& q = out.quantization;
  if (!q.zero_point.empty() && q.zero_point.size() != q.scale.size())
    fail("quantization has ", q.scale.size(), " scales but ", q.zero_point.size(), " zero points");
  if (q.scale.size() > 1) {
    if (q.quantized_dimension < 0 || static_cast<size_t>(q.quantized_dimension) >= out.shape.size())
      fail("quantized_dimension ", q.quantized_dimension, " is outside its ", out.shape.size(),
           "-d shape");
    if (static_cast<int64_t>(q.scale.size()) != out.shape[q.quantized_dimension])
      fail("per-channel quantization has ", q.scale.size(), " scales for dimension ",
           q.quantized_dimension, " of size ", out.shape[q.quantized_dimension]);
  }
  return out;
}

void check_tensor_indices(const std::vector<int32_t>& indices, size_t tensor_count,
                          bool allow_absent, const char* what) {
  for (int32_t i : indices) {
    if (allow_absent && i == -1) continue;
    if (i < 0 || static_cast<size_t>(i) >= tensor_count)
      fail(what, " refers to tensor ", i, " but there are ", tensor_count, " tensors");
  }
}

Subgraph read_subgraph(const tflite::SubGraph& g, size_t opcode_count, size_t buffer_count) {
  Subgraph out;
  out.name = to_string(g.name());
  if (g.tensors() != nullptr) {
    out.tensors.reserve(g.tensors()->size());
    for (flatbuffers::uoffset_t i = 0; i < g.tensors()->size(); ++i) {
      with_context(cat("tensor ", i), [&] {
        out.tensors.push_back(read_tensor(*g.tensors()->Get(i)));
        const uint32_t b = out.tensors.back().buffer;
        if (b != 0 && b >= buffer_count)
          fail("refers to buffer ", b, " but there are ", buffer_count, " buffers");
      });
    }
  }
  out.inputs = to_vector<int32_t>(g.inputs());
  out.outputs = to_vector<int32_t>(g.outputs());
  check_tensor_indices(out.inputs, out.tensors.size(), false, "an input");
  check_tensor_indices(out.outputs, out.tensors.size(), false, "an output");
  if (g.operators() != nullptr) {
    out.operators.reserve(g.operators()->size());
    for (flatbuffers::uoffset_t i = 0; i < g.operators()->size(); ++i) {
      with_context(cat("operator ", i), [&] {
        const tflite::Operator& op = *g.operators()->Get(i);
        Operator o;
        o.opcode_index = op.opcode_index();
        if (o.opcode_index >= opcode_count)
          fail("opcode_index ", o.opcode_index, " but there are ", opcode_count, " operator codes");
        o.inputs = to_vector<int32_t>(op.inputs());
        o.outputs = to_vector<int32_t>(op.outputs());
        o.intermediates = to_vector<int32_t>(op.intermediates());
        check_tensor_indices(o.inputs, out.tensors.size(), true, "an input");
        check_tensor_indices(o.outputs, out.tensors.size(), false, "an output");
        check_tensor_indices(o.intermediates, out.tensors.size(), false, "an intermediate");
        o.builtin_options_type = static_cast<uint8_t>(op.builtin_options_type());
        o.options = read_options(op);
        if (op.custom_options() != nullptr) {
          if (op.custom_options_format() != 0)
            fail("custom_options_format ", int{op.custom_options_format()},
                 " (only 0 = FlexBuffers exists)");
          o.custom_options = detail::to_bytes(op.custom_options());
        }
        out.operators.push_back(std::move(o));
      });
    }
  }
  return out;
}

Model read_verified(const tflite::Model& m) {
  Model out;
  out.version = m.version();
  out.description = to_string(m.description());
  if (m.buffers() != nullptr) {
    out.buffers.reserve(m.buffers()->size());
    for (const tflite::Buffer* b : *m.buffers())
      out.buffers.push_back(Buffer{detail::to_bytes(b->data())});
  }
  if (m.operator_codes() != nullptr) {
    for (flatbuffers::uoffset_t i = 0; i < m.operator_codes()->size(); ++i) {
      const tflite::OperatorCode& c = *m.operator_codes()->Get(i);
      OperatorCode code;
      // Files written before the int32 field existed only have the int8 one; newer writers set
      // both, with the int8 one saturated at 127 (PLACEHOLDER_FOR_GREATER_OP_CODES).
      code.builtin_code = std::max<int32_t>(c.deprecated_builtin_code(), c.builtin_code());
      code.custom_code = to_string(c.custom_code());
      code.version = c.version();
      if (code.builtin_code < 0)
        fail("operator code ", i, ": negative builtin code ", code.builtin_code);
      out.operator_codes.push_back(std::move(code));
    }
  }
  if (m.subgraphs() == nullptr || m.subgraphs()->size() == 0) fail("the model has no subgraph");
  for (flatbuffers::uoffset_t i = 0; i < m.subgraphs()->size(); ++i) {
    with_context(cat("subgraph ", i), [&] {
      out.subgraphs.push_back(
          read_subgraph(*m.subgraphs()->Get(i), out.operator_codes.size(), out.buffers.size()));
    });
  }
  return out;
}

}  // namespace

Model read_tflite(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) fail("not a TFLite model: only ", bytes.size(), " bytes");
  if (!detail::has_identifier(bytes, tflite::ModelIdentifier()))
    fail("not a TFLite model: identifier is not \"TFL3\"");
  if (bytes.size() >= FLATBUFFERS_MAX_BUFFER_SIZE) fail("TFLite model larger than 2 GiB");
  const detail::AlignedBytes copy(bytes);
  flatbuffers::Verifier verifier(copy.data(), copy.size());
  if (!tflite::VerifyModelBuffer(verifier))
    fail(
        "TFLite model is malformed (flatbuffer verification failed: an offset or size points "
        "outside the file)");
  return read_verified(*tflite::GetModel(copy.data()));
}

Model read_tflite_file(const std::filesystem::path& path) {
  const std::vector<uint8_t> bytes = read_file(path);  // its errors name the file already
  return with_context(path.string(), [&] { return read_tflite(bytes); });
}

}  // namespace tinycoral::container
