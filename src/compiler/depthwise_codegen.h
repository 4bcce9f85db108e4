// The DEPTHWISE_CONV_2D code generator (with an optional AVERAGE_POOL_2D after it):
// edgetpu_compiler 16.0's two programs for the gabor family of layers, built from the layer's
// shapes (docs/compiler.md "DEPTHWISE_CONV_2D" has the rules and the evidence).
//
// Geometry: the image is cut into a 4 x 4 grid of blocks of H/4 x W/4 pixels, block (r, c) on tile
// 4r + c. The host streams the image over the ring, 16 rows of tiles at a time; each tile copies
// its block into a (H/4 + k - 1) x (W/4 + k - 1) word grid (one pixel per word), the mesh fills the
// k/2-wide halo from the neighbours (zero padding at the image border), tile 0 broadcasts the
// per-tap weight rows over the ring, and every tile runs one op over its block's positions. The
// pool, if any, is a second op on the same tile; the outputs go back through the scalar core.
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

// The parameter stream (tile 0's, broadcast to every tile): a 64-byte row of the weight zero
// points (int32 128 per channel), then one 64-byte row per tap, tap-major, channel c in bytes
// 4c..4c+3 as (w + 128, 128, 128, 128).
std::vector<uint8_t> depthwise_parameters(const DepthwiseLayer& layer);

// Both executables; throws Error if depthwise_unsupported() is not empty.
DepthwisePrograms generate_depthwise(const DepthwiseLayer& layer);

}  // namespace tinycoral::compiler
