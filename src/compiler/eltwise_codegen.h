// The ADD and MUL code generator: one EXECUTION_ONLY program (no parameters) for an elementwise
// operation of two tensors of the same shape (eltwise_layer.h).
//
// Placement (our own): both operands, flattened, are split into equal runs of whole 256-byte ring
// packets over up to 16 tiles; each tile receives its run of each operand from the host, computes
// its run of the output and sends it back, so the output arrives in order. ADD is one op per run of
// up to 4096 words (the 16-bit ADD class of edgetpu_compiler 16.0, looming_64x64_3x3 word 499:
// w1 a + w2 b over 4 weight rows built by mesh fills); MUL is the two ops of isa.md 2.1.5 per run
// of 256 words (a product per element, then a pack), b streamed through a FIFO (looming words
// 273-329). docs/compiler.md "ADD and MUL".
#pragma once

#include <string>

#include "compiler/eltwise_layer.h"
#include "container/executable.h"

namespace tinycoral::compiler {

// Why the layer is outside what the generator covers, or "" when it is covered.
std::string eltwise_unsupported(const EltwiseLayer& layer);

// The EXECUTION_ONLY executable; throws Error if eltwise_unsupported() is not empty.
container::Executable generate_eltwise(const EltwiseLayer& layer);

}  // namespace tinycoral::compiler
