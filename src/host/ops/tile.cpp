// TILE: repeats the input `multiples[d]` times along each dimension d, so out[i] = in[i mod
// in_shape] per dimension (TFLite's reference). Any element type; the bytes are copied, so a
// quantized output must share the input's quantization. The multiples (int32 or int64) must be a
// constant of the model: the interpreter plans every shape before running.
#include <cstring>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

using container::TensorType;

struct TileShape {
  std::vector<int64_t> in, multiples;
  size_t element_bytes = 0;
};

// Writes the tiling of the input block at dimension `d` (starting at `src`) to `dst`; returns the
// number of bytes written. Inner dimensions first, then whole copies of the finished block.
size_t tile_dimension(const TileShape& s, size_t d, const uint8_t* src, uint8_t* dst) {
  size_t inner_in = s.element_bytes;  // bytes of one input slice below dimension d
  for (size_t k = d + 1; k < s.in.size(); ++k) inner_in *= static_cast<size_t>(s.in[k]);
  size_t block = 0;
  if (d + 1 == s.in.size()) {
    block = static_cast<size_t>(s.in[d]) * s.element_bytes;
    std::memcpy(dst, src, block);
  } else {
    for (int64_t i = 0; i < s.in[d]; ++i)
      block += tile_dimension(s, d + 1, src + static_cast<size_t>(i) * inner_in, dst + block);
  }
  for (int64_t m = 1; m < s.multiples[d]; ++m) std::memcpy(dst + block * m, dst, block);
  return block * static_cast<size_t>(s.multiples[d]);
}

std::unique_ptr<Kernel> make_tile(const OpContext& ctx) {
  ctx.require_inputs(2, 2);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& mult = ctx.input(1);
  const TensorView& out = ctx.output(0);
  ctx.require(in.type() == out.type(), "input and output types differ");
  ctx.require(container::tensor_type_size(in.type()) > 0, "string tensors are not supported");
  ctx.require(mult.type() == TensorType::kInt32 || mult.type() == TensorType::kInt64,
              "multiples must be int32 or int64");
  ctx.require(mult.constant, "multiples must be a constant of the model");
  ctx.require(mult.rank() == 1 && mult.dim(0) == in.rank(),
              cat("multiples must hold one value per input dimension (", in.rank(), ")"));
  ctx.require(out.rank() == in.rank(), "output rank differs from the input's");
  if (in.quantized() && out.quantized())
    ctx.require(in.scale() == out.scale() && in.zero_point() == out.zero_point(),
                "input and output quantization differ");
  TileShape s;
  s.element_bytes = container::tensor_type_size(in.type());
  for (int d = 0; d < in.rank(); ++d) {
    const int64_t m =
        mult.type() == TensorType::kInt32 ? int64_t{mult.as<int32_t>()[d]} : mult.as<int64_t>()[d];
    ctx.require(m >= 0, cat("multiple ", d, " is negative (", m, ")"));
    ctx.require(int64_t{in.dim(d)} * m == out.dim(d),
                cat("output dimension ", d, " is ", out.dim(d), ", input ", in.dim(d), " x ", m,
                    " needs ", int64_t{in.dim(d)} * m));
    s.in.push_back(in.dim(d));
    s.multiples.push_back(m);
  }
  if (out.elements() == 0) return make_kernel([](OpContext&) {});
  if (in.rank() == 0)
    return make_kernel([bytes = s.element_bytes](OpContext& c) {
      std::memcpy(c.outputs[0].data, c.input(0).data, bytes);
    });
  return make_kernel(
      [s](OpContext& c) { tile_dimension(s, 0, c.input(0).data, c.outputs[0].data); });
}

}  // namespace

void register_tile(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kTile, make_tile);
}

}  // namespace tinycoral::host
