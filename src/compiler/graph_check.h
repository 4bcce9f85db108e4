// Refusing malformed models: every operator the compiler may map (convolutions, FULLY_CONNECTED,
// pools, ADD/SUB/MUL, CONCATENATION, RESHAPE, SOFTMAX, the activations, QUANTIZE) is checked
// against itself when the graph is imported: its output shape against the shape its inputs,
// filter and options imply (for RESHAPE and the element-wise operators, whose output TFLite gives
// the input's dimensions, the element count), its bias and per-channel quantization against its
// channels, its quantized tensors' scales and zero points. A contradiction is an Error (exit 2)
// naming the operator, so no generator ever sees a model TFLite itself would refuse or misread.
// What TFLite runs is accepted: grouped CONV_2D, a DEPTHWISE_CONV_2D whose options' depth
// multiplier disagrees with its filter (TFLite derives it from the filter), broadcasting ADD/MUL.
#pragma once

#include "compiler/graph.h"

namespace tinycoral::compiler {

// Throws Error "operator N (NAME): <the contradiction>" for the first malformed operator.
void check_operators(const Graph& graph);

}  // namespace tinycoral::compiler
