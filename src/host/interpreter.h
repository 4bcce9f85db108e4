// The CPU reference interpreter: runs subgraph 0 of a TFLite model operator by operator with the
// kernels of the registry (src/host/ops/), in TFLite's integer arithmetic or the Edge TPU's
// (Rounding). All validation, kernel preparation and memory planning happen in the constructor;
// invoke() then runs without allocating, as many times as wanted.
//
// Delegation (how the runtime runs the chip part): pass InterpreterOptions::delegates, a Registry
// whose factories are tried BEFORE the standard ones. For example the runtime registers
//     delegates.add_custom("edgetpu-custom-op", [&](const OpContext& ctx) { ...; return kernel; });
// Its factory sees the operator at load time (custom_options = the DWN1 executables, the input and
// output tensor views with shapes and quantization) and returns a Kernel whose eval() sends
// ctx.input(i).data to the device and writes ctx.outputs[j].data. Without a delegate, a model
// containing edgetpu-custom-op is refused at load time like any other unsupported operator.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "container/tflite_model.h"
#include "host/kernel.h"
#include "host/registry.h"

namespace tinycoral::host {

struct InterpreterOptions {
  Rounding rounding = Rounding::kTflite;
  // Factories tried before the standard registry (may be empty). Copied by the interpreter.
  Registry delegates;
};

class Interpreter {
 public:
  // Validates the model (tensor/buffer indices, constant sizes, operator support, data flow) and
  // prepares every operator. Throws Error naming the first problem, e.g. an unsupported operator
  // "operator 12 (RESIZE_NEAREST_NEIGHBOR) is not supported".
  explicit Interpreter(container::Model model, InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  Interpreter& operator=(Interpreter&&) noexcept;

  const container::Model& model() const;
  Rounding rounding() const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  TensorView input(size_t i) const;  // throws for i out of range
  TensorView output(size_t i) const;
  // Copies `bytes` into input i; throws unless the size is exactly the tensor's byte size.
  void set_input(size_t i, std::span<const uint8_t> bytes);
  std::span<const uint8_t> output_bytes(size_t i) const;

  // Runs every operator once. Errors of delegated kernels propagate as Error.
  void invoke();

  // Zeroes the variable tensors (recurrent state) as at load time.
  void reset_variables();

  // Memory plan: bytes of the shared activation arena (tensors + scratch).
  size_t arena_bytes() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Whether `model` contains operators the standard registry does not know (names, one per distinct
// operator, e.g. "CUSTOM edgetpu-custom-op"); empty when the CPU can run it all.
std::vector<std::string> unsupported_operators(const container::Model& model,
                                               const Registry& registry = Registry::standard());

}  // namespace tinycoral::host
