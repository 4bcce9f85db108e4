// The on-tile SOFTMAX code generator with the FULLY_CONNECTED layers that weigh its probabilities
// and their CONCATENATION (softmax_layer.h): edgetpu_compiler 16.0's program for libredgetpu's
// bright spot trackers, rebuilt from N (the positions) and the quantization (docs/compiler.md
// "SOFTMAX" has the rules, which fields are fitted on one oracle, and the evidence).
//
// Geometry: T = N / 64 tiles hold 64 positions each. The host streams the image over the ring;
// the tiles send their pieces to tile 0, which finds the maximum (docs/chip_ops.md 6.1) and sends
// it back; every tile computes its 16-bit exponentials (6.2) and sends them to tile 0, which sums
// them and forms the reciprocal, sent back again; every tile turns its exponentials into
// probabilities and sends them to tile 0, which runs each FULLY_CONNECTED (one output) over them
// with resident weights and joins the outputs with an identity FULLY_CONNECTED (the concat).
#pragma once

#include <optional>
#include <string>

#include "compiler/conv_layer.h"
#include "compiler/softmax_layer.h"
#include "container/executable.h"

namespace tinycoral::compiler {

struct SoftmaxPrograms {
  container::Executable execution;  // EXECUTION_ONLY, name "model"
  container::Executable caching;    // PARAMETER_CACHING, name "Unknown", holds the parameters
};

// Why this layer is outside what the generator reproduces, or "" when it is covered.
std::string softmax_fc_unsupported(const SoftmaxFcLayer& layer);

// The parameter stream: per FULLY_CONNECTED (concat order) N/4 units of 64 bytes, unit u holding
// weights 4u..4u+3 + 128 in column 0 and the zero point 128 in columns 1-3; then the concat's
// aux unit (its zero bias) and one identity unit per input (int32 1 in column i).
std::vector<uint8_t> softmax_fc_parameters(const SoftmaxFcLayer& layer);

// Both executables; throws Error if softmax_fc_unsupported() is not empty.
SoftmaxPrograms generate_softmax_fc(const SoftmaxFcLayer& layer);

// A CONV_2D chain and the SOFTMAX part that reads its output in one program (libredgetpu's colour
// filters: QUANTIZE -> 1x1 CONV_2D -> RESHAPE -> SOFTMAX -> FULLY_CONNECTED x, y -> CONCATENATION):
// the chain's program (conv_codegen.h, emit_conv_head) hands its bands over the ring into the
// tiles' input pieces where each piece is one ring packet inside one band (64x64), else leaves its
// output in the host's scratch buffer, which this generator's program reads back as its input;
// one caching program loads both parameter sets. Not edgetpu_compiler's program (docs/compiler.md
// "color_*_64x64"). Nothing, with the reason in `why`, when either part is not covered.
std::optional<SoftmaxPrograms> generate_conv_softmax(const ConvChain& chain,
                                                     const SoftmaxFcLayer& layer, std::string& why);

}  // namespace tinycoral::compiler
