// The DEPTHWISE_CONV_2D code generator (with an optional AVERAGE_POOL_2D or MAX_POOL_2D after
// it): edgetpu_compiler 16.0's two programs for the gabor family of layers (one input channel,
// depth multiplier C, SAME, stride 1 or 2), built from the layer's shapes (docs/compiler.md
// "DEPTHWISE_CONV_2D" has the rules, which fields are fitted on the one oracle, and the evidence).
//
// Geometry: the image is cut into a 4 x 4 grid of blocks of H/4 x W/4 pixels, block (r, c) on tile
// 4r + c. The host streams the image over the ring, one row of tiles at a time; each tile copies
// its block into a (H/4 + k - 1) x (W/4 + k - 1) word grid (one pixel per word), the mesh fills the
// k/2-wide halo from the neighbours (the input zero point at the image border), tile 0 broadcasts
// the per-tap weight rows (and the aux packets: multipliers, biases, zero points) over the ring,
// and every tile runs one op over its block's output positions. The pool, if any, is a second op
// on the same tile; the outputs go back through the scalar core.
#pragma once

#include <string>

#include "compiler/depthwise_layer.h"
#include "container/executable.h"

namespace tinycoral::compiler {

struct DepthwisePrograms {
  container::Executable execution;  // EXECUTION_ONLY, name "model"
  container::Executable caching;    // PARAMETER_CACHING, name "Unknown", holds the parameters
};

// Why this layer is outside what the generator reproduces, or "" when it is covered.
std::string depthwise_unsupported(const DepthwiseLayer& layer);

// The parameter stream (tile 0's, broadcast to every tile): 64-byte packets of the float32
// multipliers (only when the channels' scales differ), the int32 biases (only when non-zero) and
// the weight zero points (int32 128 per channel), then one 64-byte packet per tap, tap-major,
// channel c in bytes 4c..4c+3 as (w + 128, 128, 128, 128).
std::vector<uint8_t> depthwise_parameters(const DepthwiseLayer& layer);

// Both executables; throws Error if depthwise_unsupported() is not empty.
DepthwisePrograms generate_depthwise(const DepthwiseLayer& layer);

}  // namespace tinycoral::compiler
