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
#include <vector>

#include "compiler/eltwise_layer.h"
#include "compiler/emitter.h"
#include "container/executable.h"

namespace tinycoral::compiler {

// Why the layer is outside what the generator covers, or "" when it is covered.
std::string eltwise_unsupported(const EltwiseLayer& layer);

// The EXECUTION_ONLY executable; throws Error if eltwise_unsupported() is not empty.
container::Executable generate_eltwise(const EltwiseLayer& layer);

// The ADD op's pieces, shared with the CONV_2D chain's residual ADD (conv_ops.cpp):
// its 4 weight rows at wide unit `rows` (built through 16 narrow words at byte `scratch`; each
// weight half-word sits at two words 6 apart, filled one word per instruction as Google's
// looming program does, or, kPaired, both words of a value by one fill: 4 mesh moves, not 8)...
enum class AddRowFills { kOneWordEach, kPaired };
void emit_add_rows(Emitter& e, uint32_t tiles, int scratch, int rows, int32_t w1, int32_t w2,
                   AddRowFills fills = AddRowFills::kOneWordEach);
// ...and one op over the elements: input 0 at byte `a`, input 1 `b_minus_a` bytes on, output at
// byte `out`; `levels` innermost first (the first one: words, in stride 4 bytes, out stride 1).
struct AddOp {
  struct Level {
    int64_t count, in_stride, out_stride;  // in bytes, out in words
  };
  int a = 0, b_minus_a = 0, out = 0, rows = 0;
  std::vector<Level> levels;
};
void emit_add_op(Emitter& e, uint32_t tiles, const AddOp& op, float mult, float clamp_min,
                 float clamp_max, int32_t offset, int32_t out_zp);

// The MUL's pieces, shared with the CONV_2D chain's joined heads (conv_ops.cpp): the 4 x 4
// identity row the pack reads (wide unit kMulIdentityRow, built through 4 narrow words at byte
// `scratch`)...
constexpr int kMulIdentityRow = 0x2000;
void emit_identity_row(Emitter& e, uint32_t tiles, int scratch);
// ...and the two ops of one run of up to kMulRunWords words (isa.md 2.1.5): input 0 at byte `a`,
// input 1 at byte `b` (streamed one word per FIFO fill), the products (16 bytes a word) at byte
// `products`, the output at byte `out`; `levels` innermost first, the first one words (strides
// 4 bytes in, 1 word out), the others pixels and rows of an image.
constexpr int kMulRunWords = 256;
struct MulOp {
  struct Level {
    int64_t count, in_stride, out_stride;  // in bytes (a and b alike), out in words
  };
  int a = 0, b = 0, products = 0, out = 0;
  std::vector<Level> levels;
};
void emit_mul_op(Emitter& e, uint32_t tiles, const MulOp& op, int32_t a_zp, int32_t b_zp,
                 float mult, float clamp_min, float clamp_max, int32_t out_zp);

}  // namespace tinycoral::compiler
