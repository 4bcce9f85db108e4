// Out-of-line helpers of the kernel interface (kernel.h).
#include "host/kernel.h"

namespace tinycoral::host {

const char* rounding_name(Rounding rounding) {
  return rounding == Rounding::kTflite ? "tflite" : "edgetpu";
}

int32_t TensorView::dim(int i) const {
  const int r = rank();
  const int k = i < 0 ? r + i : i;
  if (k < 0 || k >= r) fail("tensor '", name(), "': no dimension ", i, " (rank ", r, ")");
  return tensor->shape[static_cast<size_t>(k)];
}

int64_t TensorView::elements() const {
  int64_t n = 1;
  for (int32_t d : tensor->shape) n *= d;
  return n;
}

float TensorView::scale() const {
  return tensor->quantization.scale.empty() ? 1.0f : tensor->quantization.scale[0];
}

int32_t TensorView::zero_point() const {
  return tensor->quantization.zero_point.empty()
             ? 0
             : static_cast<int32_t>(tensor->quantization.zero_point[0]);
}

const TensorView& OpContext::input(size_t i) const {
  if (!has_input(i)) fail(op_name, ": input ", i, " is missing");
  return inputs[i];
}

const TensorView& OpContext::output(size_t i) const {
  if (i >= outputs.size()) fail(op_name, ": output ", i, " is missing");
  return outputs[i];
}

void OpContext::require_inputs(size_t min, size_t max) const {
  if (inputs.size() < min || inputs.size() > max) {
    if (min == max) fail(op_name, ": expects ", min, " inputs, has ", inputs.size());
    fail(op_name, ": expects ", min, " to ", max, " inputs, has ", inputs.size());
  }
}

void OpContext::require_outputs(size_t count) const {
  if (outputs.size() != count) fail(op_name, ": expects ", count, " outputs, has ", outputs.size());
}

}  // namespace tinycoral::host
