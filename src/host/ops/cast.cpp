// CAST: converts each element to the output's type as TFLite's kernel does, a plain C++
// conversion that ignores quantization: float -> integer truncates toward zero, integer ->
// narrower integer wraps (two's complement), anything -> bool is `!= 0`, bool -> number is 0 or 1.
// A float outside the target's range (or NaN) is undefined behaviour in TFLite's C++ and so differs
// between its builds; here it saturates (NaN -> 0), which is at least the same everywhere.
#include <cmath>
#include <cstring>
#include <limits>

#include "host/op_util.h"
#include "host/registry.h"

namespace tinycoral::host {

namespace {

using container::TensorType;

template <typename To, typename From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    return v != From{0};
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(v)) return To{0};
    // Bounds as From: integer limits rounded to the float type, compared before converting.
    constexpr From lo = static_cast<From>(std::numeric_limits<To>::min());
    constexpr From hi = static_cast<From>(std::numeric_limits<To>::max());
    if (v <= lo) return std::numeric_limits<To>::min();
    if (v >= hi) return std::numeric_limits<To>::max();
    return static_cast<To>(v);
  } else {
    return static_cast<To>(v);
  }
}

template <typename To, typename From>
void cast_all(const TensorView& in, const TensorView& out) {
  const From* src = in.as<From>();
  uint8_t* dst = out.data;
  const int64_t n = in.elements();
  for (int64_t i = 0; i < n; ++i) {
    const To v = convert<To>(src[i]);
    std::memcpy(dst + i * sizeof(To), &v, sizeof(To));
  }
}

using CastFn = void (*)(const TensorView&, const TensorView&);

// Calls f(From{}) for the element types CAST handles; false for any other type.
template <typename F>
bool with_type(TensorType t, F&& f) {
  switch (t) {
    case TensorType::kFloat32:
      f(float{});
      return true;
    case TensorType::kFloat64:
      f(double{});
      return true;
    case TensorType::kInt32:
      f(int32_t{});
      return true;
    case TensorType::kInt64:
      f(int64_t{});
      return true;
    case TensorType::kInt16:
      f(int16_t{});
      return true;
    case TensorType::kInt8:
      f(int8_t{});
      return true;
    case TensorType::kUInt8:
      f(uint8_t{});
      return true;
    case TensorType::kBool:
      f(bool{});
      return true;
    default:
      return false;
  }
}

std::unique_ptr<Kernel> make_cast(const OpContext& ctx) {
  ctx.require_inputs(1, 1);
  ctx.require_outputs(1);
  const TensorView& in = ctx.input(0);
  const TensorView& out = ctx.output(0);
  ctx.require(in.elements() == out.elements(),
              cat("input has ", in.elements(), " elements, output ", out.elements()));
  CastFn fn = nullptr;
  const bool known = with_type(in.type(), [&](auto from) {
    with_type(out.type(), [&](auto to) { fn = &cast_all<decltype(to), decltype(from)>; });
  });
  ctx.require(known && fn != nullptr,
              cat("cannot cast ", container::tensor_type_name(in.type()), " to ",
                  container::tensor_type_name(out.type()),
                  " (float32/64, int64/32/16/8, uint8 and bool are supported)"));
  return make_kernel([fn](OpContext& c) { fn(c.input(0), c.outputs[0]); });
}

}  // namespace

void register_cast(Registry& registry) {
  registry.add_builtin(container::BuiltinOp::kCast, make_cast);
}

}  // namespace tinycoral::host
