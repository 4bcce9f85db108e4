// The interface between the host interpreter and its operator kernels. The interpreter gives each
// operator an OpContext (tensor views, options, rounding mode, scratch space); a kernel factory
// validates the operator once at load time and returns a Kernel whose eval() runs it, many times,
// without allocating.
//
// HOW TO ADD AN OPERATOR (one file + one line):
//   1. Write src/host/ops/<name>.cpp defining, in namespace tinycoral::host,
//        void register_<name>(Registry& registry) {
//          registry.add_builtin(container::BuiltinOp::kFoo, &make_foo);   // or add_custom("Name",
//          ...)
//        }
//      where make_foo(const OpContext&) checks types/shapes/options (throw Error with a clear
//      message when the operator is malformed), precomputes what it can, and returns
//      make_kernel([state](OpContext& ctx) { ... })  -- or a subclass of Kernel.
//      Return nullptr when the operator is valid TFLite but not a case this factory handles (e.g. a
//      float-only factory seeing uint8): the registry then tries the next factory for that code,
//      and refuses the model if none accepts. So a float CONV_2D can live in its own file beside
//      the quantized one.
//   2. Add one line X(<name>) to TINYCORAL_HOST_OPS in src/host/registry.cpp.
//   Re-run cmake configure (sources are globbed). Helpers: host/rounding.h (requantization in both
//   modes), host/quant_util.h (activation ranges, effective scales).
//
// During the factory call, constant tensors (weights, biases) have data; activations do not yet
// (data == nullptr). During eval every tensor has data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/error.h"
#include "container/tflite_model.h"

namespace tinycoral::host {

// How quantized kernels requantize (docs/host.md): kTflite = TFLite's reference integer arithmetic
// (bit-exact with the CPU TFLite), kEdgeTpu = the Edge TPU's float32 output stage.
enum class Rounding { kTflite, kEdgeTpu };
const char* rounding_name(Rounding rounding);

// One tensor as a kernel sees it. Cheap to copy; points into the model and the interpreter's arena.
struct TensorView {
  int index = -1;                             // tensor index in the subgraph; -1 = absent input
  const container::Tensor* tensor = nullptr;  // name, shape, type, quantization
  uint8_t* data = nullptr;                    // nullptr for activations during the factory call
  size_t bytes = 0;                           // element_count * element size
  bool constant = false;                      // backed by a model buffer (read-only)

  bool present() const { return tensor != nullptr; }
  container::TensorType type() const { return tensor->type; }
  const std::vector<int32_t>& shape() const { return tensor->shape; }
  int rank() const { return static_cast<int>(tensor->shape.size()); }
  // Dimension i; negative i counts from the end (-1 = last).
  int32_t dim(int i) const;
  int64_t elements() const;
  const container::Quantization& quant() const { return tensor->quantization; }
  bool quantized() const { return !tensor->quantization.scale.empty(); }
  // Per-tensor scale / zero point (the first entry; 1 and 0 when the tensor is not quantized).
  float scale() const;
  int32_t zero_point() const;
  bool per_channel() const { return tensor->quantization.scale.size() > 1; }
  const std::string& name() const { return tensor->name; }

  template <typename T>
  const T* as() const {
    return reinterpret_cast<const T*>(data);
  }
  template <typename T>
  T* mutable_as() const {
    return reinterpret_cast<T*>(data);
  }
};

// Everything an operator needs, built once per operator by the interpreter.
class OpContext {
 public:
  const container::Operator* op = nullptr;
  const container::OperatorCode* code = nullptr;
  std::string op_name;             // "CONV_2D", or the custom code for customs
  int op_index = -1;               // position in the subgraph's execution order
  std::vector<TensorView> inputs;  // one per op input; absent optional inputs have index -1
  std::vector<TensorView> outputs;
  Rounding rounding = Rounding::kTflite;
  std::span<uint8_t> scratch;  // the kernel's scratch_bytes, valid during eval only

  size_t num_inputs() const { return inputs.size(); }
  size_t num_outputs() const { return outputs.size(); }
  bool has_input(size_t i) const { return i < inputs.size() && inputs[i].present(); }
  // Input i; throws Error naming the operator when it is absent.
  const TensorView& input(size_t i) const;
  const TensorView& output(size_t i) const;

  const container::BuiltinOptions& options() const { return op->options; }
  // The options struct T; throws Error when the operator carries other (or no) options. Kernels
  // whose options are optional in the schema use options_or<T>() which returns defaults when
  // absent.
  template <typename T>
  const T& options_as() const {
    if (const T* o = std::get_if<T>(&op->options)) return *o;
    fail(op_name, ": missing or unexpected builtin options");
  }
  template <typename T>
  T options_or() const {
    if (const T* o = std::get_if<T>(&op->options)) return *o;
    return T{};
  }
  std::span<const uint8_t> custom_options() const { return op->custom_options; }

  // Check helpers that throw Error("<op_name>: <what>").
  void require(bool condition, const std::string& what) const {
    if (!condition) fail(op_name, ": ", what);
  }
  void require_inputs(size_t min, size_t max) const;
  void require_outputs(size_t count) const;
};

// A prepared operator. eval() must not allocate; per-call temporary memory is ctx.scratch.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual void eval(OpContext& ctx) = 0;
  size_t scratch_bytes = 0;  // set by the factory; the interpreter plans it into its arena
};

// Validates an operator and returns its kernel; nullptr = "not mine, try the next factory".
using KernelFactory = std::function<std::unique_ptr<Kernel>(const OpContext& ctx)>;

// A Kernel from a lambda (capture the precomputed state by value).
template <typename F>
class LambdaKernel final : public Kernel {
 public:
  explicit LambdaKernel(F f, size_t scratch) : f_(std::move(f)) { scratch_bytes = scratch; }
  void eval(OpContext& ctx) override { f_(ctx); }

 private:
  F f_;
};
template <typename F>
std::unique_ptr<Kernel> make_kernel(F f, size_t scratch = 0) {
  return std::make_unique<LambdaKernel<F>>(std::move(f), scratch);
}

}  // namespace tinycoral::host
