// Quantization helpers shared by the host kernels (quant_util.h).
#include "host/quant_util.h"

#include <cmath>

namespace tinycoral::host {

using container::Activation;
using container::TensorType;

QRange storage_range(TensorType type) {
  switch (type) {
    case TensorType::kUInt8:
      return {0, 255};
    case TensorType::kInt8:
      return {-128, 127};
    case TensorType::kInt16:
      return {-32768, 32767};
    case TensorType::kInt32:
      return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
    default:
      fail("quantized tensor of type ", container::tensor_type_name(type), " is not supported");
  }
}

QRange activation_range(Activation act, float scale, int32_t zero_point, TensorType type) {
  QRange r = storage_range(type);
  auto quantize = [&](float f) { return zero_point + static_cast<int32_t>(std::round(f / scale)); };
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      r.min = std::max(r.min, quantize(0.0f));
      break;
    case Activation::kRelu6:
      r.min = std::max(r.min, quantize(0.0f));
      r.max = std::min(r.max, quantize(6.0f));
      break;
    case Activation::kReluN1To1:
      r.min = std::max(r.min, quantize(-1.0f));
      r.max = std::min(r.max, quantize(1.0f));
      break;
    default:
      fail("fused activation ", static_cast<int>(act), " is not supported on a quantized output");
  }
  return r;
}

edgetpu::Clamps edgetpu_clamps(Activation act, float scale, int32_t zero_point, TensorType type) {
  const QRange s = storage_range(type);
  float lo = static_cast<float>(s.min - zero_point) * scale;
  float hi = static_cast<float>(s.max - zero_point) * scale;
  switch (act) {
    case Activation::kNone:
      break;
    case Activation::kRelu:
      lo = std::max(lo, 0.0f);
      break;
    case Activation::kRelu6:
      lo = std::max(lo, 0.0f);
      hi = std::min(hi, 6.0f);
      break;
    case Activation::kReluN1To1:
      lo = std::max(lo, -1.0f);
      hi = std::min(hi, 1.0f);
      break;
    default:
      fail("fused activation ", static_cast<int>(act), " is not supported on a quantized output");
  }
  const float inv = edgetpu::inverse(scale);
  return {lo * inv, hi * inv};
}

OutputStage make_output_stage(Rounding mode, const TensorView& output, Activation act) {
  OutputStage st;
  st.mode = mode;
  st.zero_point = output.zero_point();
  st.storage = storage_range(output.type());
  st.act = activation_range(act, output.scale(), st.zero_point, output.type());
  st.clamps = edgetpu_clamps(act, output.scale(), st.zero_point, output.type());
  return st;
}

std::vector<ChannelScale> mac_channel_scales(const OpContext& ctx, const TensorView& input,
                                             const TensorView& weights, const TensorView& output,
                                             int channels) {
  const auto& wq = weights.quant();
  ctx.require(!wq.scale.empty(), "weights '" + weights.name() + "' are not quantized");
  ctx.require(wq.scale.size() == 1 || wq.scale.size() == static_cast<size_t>(channels),
              cat("weights '", weights.name(), "' have ", wq.scale.size(), " scales for ", channels,
                  " output channels"));
  ctx.require(input.scale() > 0 && output.scale() > 0, "input/output scale must be positive");
  std::vector<ChannelScale> out(static_cast<size_t>(channels));
  for (int c = 0; c < channels; ++c) {
    const float ws = wq.scale.size() == 1 ? wq.scale[0] : wq.scale[static_cast<size_t>(c)];
    ctx.require(ws >= 0 && std::isfinite(ws), "weight scale must be finite and >= 0");
    out[static_cast<size_t>(c)].q =
        quantize_multiplier(tflite_product_scale(input.scale(), ws, output.scale()));
    out[static_cast<size_t>(c)].mult = edgetpu::product_scale(input.scale(), ws, output.scale());
  }
  return out;
}

}  // namespace tinycoral::host
