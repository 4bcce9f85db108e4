// Output shapes of custom operators whose models leave them unspecified. TFLite lets a custom op
// size its outputs at prepare time; Google's PoseNet models declare the PosenetDecoderOp outputs
// with shape [] and rely on that. resolve_custom_output_shapes() fills them in from the operator's
// options, as the op would, so the interpreter can plan memory statically. Call it on a model
// before building the Interpreter (idempotent; leaves every other tensor alone).
#pragma once

#include "container/tflite_model.h"

namespace tinycoral::host {

// Returns the number of tensors whose shape was set. Throws Error for malformed custom options.
int resolve_custom_output_shapes(container::Model& model);

}  // namespace tinycoral::host
