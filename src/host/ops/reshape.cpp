// RESHAPE and SQUEEZE: the bytes are unchanged, only the shape differs (the model's output shape is
// authoritative; the element counts must agree). Any element type.
#include <cstring>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

std::unique_ptr<Kernel> make_copy(const OpContext& ctx) {
  ctx.require(ctx.num_inputs() >= 1, "expects an input");
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(in.elements() == out.elements(),
              cat("input has ", in.elements(), " elements, output ", out.elements()));
  if (in.quantized() && out.quantized())
    ctx.require(in.scale() == out.scale() && in.zero_point() == out.zero_point(),
                "input and output quantization differ");
  return make_kernel([](OpContext& c) {
    const TensorView& i = c.input(0);
    if (i.data != c.outputs[0].data && i.bytes > 0)
      std::memmove(c.outputs[0].data, i.data, i.bytes);
  });
}

// SQUEEZE removes dimensions of size 1: each listed one must exist (-rank..rank-1) and be 1.
std::unique_ptr<Kernel> make_squeeze(const OpContext& ctx) {
  ctx.require(ctx.num_inputs() >= 1, "expects an input");
  const TensorView& in = ctx.input(0);
  const int rank = in.rank();
  for (int32_t d : ctx.options_or<container::SqueezeOptions>().squeeze_dims) {
    ctx.require(d >= -rank && d < rank,
                cat("squeeze dimension ", d, " is out of range for rank ", rank));
    const int dim = in.dim(d < 0 ? d + rank : d);
    ctx.require(dim == 1, cat("squeeze dimension ", d, " has size ", dim, ", not 1"));
  }
  return make_copy(ctx);
}

}  // namespace

void register_reshape(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kReshape, make_copy);
  registry.add_builtin(container::BuiltinOp::kSqueeze, make_squeeze);
}

}  // namespace tinycoral::host
