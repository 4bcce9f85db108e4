// Test and bench helper: what compile_model makes of a CPU twin - the result, its written
// *_edgetpu.tflite read back and the executables of its first custom op - the compiled model run
// through the runtime, and the CPU reference in the chip's rounding that both are compared with.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "chip/program.h"
#include "chip/sim_runner.h"
#include "compiler/compile.h"
#include "container/edgetpu_model.h"
#include "container/tflite_writer.h"
#include "host/interpreter.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"

namespace tinycoral::compiler::testing {

// An executable's ops in program order, as the simulator decodes them.
inline std::vector<chip::OpInstr> execution_ops(const container::Executable& executable) {
  std::vector<chip::OpInstr> ops;
  for (const auto& bs : executable.bitstreams) {
    const std::unique_ptr<chip::Program> program = chip::Program::decode(bs.data);
    for (const chip::ProgramItem& item : program->items)
      if (const auto* op = std::get_if<chip::OpInstr>(&item.decoded)) ops.push_back(*op);
  }
  return ops;
}

// The executables point into `model`, so a CompiledTwin is neither copied nor moved.
struct CompiledTwin {
  explicit CompiledTwin(const container::Model& twin)
      : CompiledTwin(container::write_tflite(twin)) {}
  explicit CompiledTwin(const std::vector<uint8_t>& tflite) : result(compile_model(tflite)) {
    if (result.edgetpu_subgraphs == 0) return;  // nothing written for the chip
    model = container::read_edgetpu_model(result.tflite);
    exes = chip::testing::executables_of(model);
  }
  CompiledTwin(const CompiledTwin&) = delete;
  CompiledTwin& operator=(const CompiledTwin&) = delete;

  // The execution program's ops in program order, as the simulator decodes them.
  std::vector<chip::OpInstr> execution_ops() const {
    return exes.execution == nullptr ? std::vector<chip::OpInstr>{}
                                     : testing::execution_ops(*exes.execution);
  }

  // The log's last row: why the compiler kept (part of) the twin on the CPU.
  std::string reason() const { return result.rows.empty() ? "" : result.rows.back().status; }

  // Loads the parameters into `chip` (when the program caches them).
  void cache_parameters(chip::VirtualEdgeTpu& chip) const {
    if (exes.caching) chip::testing::run_executable(chip, *exes.caching, {});
  }
  // One inference on `chip`: output layer `o`'s bytes, de-tiled (in the chip's uint8 domain).
  std::vector<uint8_t> infer(chip::VirtualEdgeTpu& chip, const chip::testing::Buffers& inputs,
                             size_t o = 0) const {
    const container::Layer& layer = exes.execution->output_layers.at(o);
    return chip::testing::detile(
        layer, chip::testing::run_executable(chip, *exes.execution, inputs).at(layer.name));
  }

  CompileResult result;
  container::EdgeTpuModel model;  // empty when every operator stayed on the CPU
  chip::testing::PackageExecutables exes;
};

// A compiled model as users run it: the host interpreter with the edgetpu-custom-op delegate on a
// virtual Edge TPU.
inline host::Interpreter virtual_edgetpu_interpreter(container::Model compiled) {
  host::InterpreterOptions options;
  runtime::add_edgetpu_delegate(options.delegates, runtime::open_virtual_edgetpu());
  return host::Interpreter(std::move(compiled), options);
}

// The CPU reference in `edgetpu` rounding.
inline host::Interpreter edgetpu_reference(const container::Model& twin) {
  host::InterpreterOptions options;
  options.rounding = host::Rounding::kEdgeTpu;
  return host::Interpreter(twin, options);
}

// `n` random bytes: an image for the twin's input.
inline std::vector<uint8_t> random_bytes(size_t n, std::mt19937& random) {
  std::vector<uint8_t> x(n);
  for (auto& b : x) b = static_cast<uint8_t>(random());
  return x;
}

// `cpu`'s output 0 for input `x`.
inline std::vector<uint8_t> reference_output(host::Interpreter& cpu, std::span<const uint8_t> x) {
  cpu.set_input(0, x);
  cpu.invoke();
  const auto out = cpu.output_bytes(0);
  return {out.begin(), out.end()};
}

}  // namespace tinycoral::compiler::testing
