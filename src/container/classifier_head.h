// Appending a trained classifier to an embedding extractor: a FULLY_CONNECTED layer on the model's
// one output, a RESHAPE to [batch, classes] where that output is 4-D, and a SOFTMAX, all uint8,
// quantized as Google's retraining tools (edgetpu learn utils) quantize them so that their checks
// apply to the result. The extractor's own operators (an edgetpu-custom-op included) are kept;
// the new layers run on the CPU after them. See docs/container.md "Editing models".
#pragma once

#include <vector>

#include "container/tflite_model.h"

namespace tinycoral::container {

struct ClassifierHead {
  std::vector<float> weights;  // [classes][features], row-major (TFLite's FC weight layout)
  std::vector<float> biases;   // [classes]
  float logits_min = 0, logits_max = 0;  // the FC output's real range (widened to contain 0)
};

// uint8 (scale, zero point) for the real range [min, max] (which must contain 0), with the zero
// point nudged to an integer as TFLite's test utilities do. A point range [0, 0] is refused.
struct Uint8Params {
  float scale = 0;
  int32_t zero_point = 0;
};
Uint8Params uint8_params_for_range(float min, float max);

// The model with the head appended; its one output becomes the softmax's. Throws Error when the
// model has other than one subgraph and one uint8 quantized output, or the sizes disagree.
Model append_classifier_head(Model model, const ClassifierHead& head);

}  // namespace tinycoral::container
