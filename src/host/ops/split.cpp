// SPLIT: input 0 is the axis (a constant int32 scalar), input 1 the tensor, cut into equal outputs.
#include <cstring>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

std::unique_ptr<Kernel> make_split(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  const TensorView& axis_t = ctx.input(0);
  const TensorView& in = ctx.input(1);
  ctx.require(
      axis_t.constant && axis_t.type() == container::TensorType::kInt32 && axis_t.elements() == 1,
      "the axis must be a constant int32 scalar");
  const int rank = in.rank();
  int axis = axis_t.as<int32_t>()[0];
  if (axis < 0) axis += rank;
  ctx.require(axis >= 0 && axis < rank, cat("axis out of range for rank ", rank));
  const size_t n = ctx.num_outputs();
  if (const auto* o = std::get_if<container::SplitOptions>(&ctx.options()))
    ctx.require(o->num_splits >= 1 && static_cast<size_t>(o->num_splits) == n,
                cat("num_splits is ", o->num_splits, " but the operator has ", n, " outputs"));
  ctx.require(n >= 1 && in.dim(axis) % static_cast<int32_t>(n) == 0,
              cat("dimension ", in.dim(axis), " does not split into ", n, " equal parts"));
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= in.dim(d);
  for (int d = axis + 1; d < rank; ++d) inner *= in.dim(d);
  const size_t elem = container::tensor_type_size(in.type());
  const size_t chunk = static_cast<size_t>(in.dim(axis) / static_cast<int32_t>(n) * inner) * elem;
  for (size_t i = 0; i < n; ++i) {
    const TensorView& out = ctx.output(i);
    ctx.require(out.type() == in.type(), "output type differs from the input");
    ctx.require(static_cast<size_t>(out.bytes) == chunk * static_cast<size_t>(outer),
                cat("output ", i, " has the wrong size"));
  }
  return make_kernel([outer, chunk](OpContext& c) {
    const uint8_t* src = c.input(1).data;
    for (int64_t o = 0; o < outer; ++o)
      for (auto& out : c.outputs) {
        std::memcpy(out.data + static_cast<size_t>(o) * chunk, src, chunk);
        src += chunk;
      }
  });
}

}  // namespace

void register_split(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kSplit, make_split);
}

}  // namespace tinycoral::host
