// Running a TFLite model: a model compiled for the Edge TPU (*_edgetpu.tflite, its Edge TPU part
// runs on the device, the rest on the CPU) or a plain quantized or float TFLite model (on the CPU).
//
//   tinycoral::Interpreter model("mobilenet_v1_1.0_224_quant_edgetpu.tflite", "sim");
//   model.set_input(0, bytes);        // exactly model.input(0).bytes bytes
//   model.invoke();                   // as often as wanted, with or without new inputs
//   std::vector<float> scores = model.output_values(0);
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tinycoral/device.h"
#include "tinycoral/export.h"

namespace tinycoral {

enum class DataType { kOther, kFloat32, kUInt8, kInt8, kInt16, kInt32, kInt64, kBool };
TINYCORAL_API const char* data_type_name(DataType type);  // "float32", "uint8", ...

// A tensor's affine quantization: real = scale * (stored - zero_point). Per-tensor; a per-channel
// tensor reports its first channel's values. scale == 0: not quantized.
struct Quantization {
  float scale = 0.0f;
  int32_t zero_point = 0;
  bool quantized() const { return scale != 0.0f; }
};

struct TensorInfo {
  std::string name;
  DataType type = DataType::kOther;
  std::vector<int32_t> shape;
  size_t bytes = 0;  // element count times element size
  Quantization quantization;
};

// How the CPU computes quantized operators: TFLite's integer arithmetic (bit-exact with TFLite on
// a CPU) or the Edge TPU's float32 output stage.
enum class Rounding { kTflite, kEdgeTpu };

struct InterpreterOptions {
  Rounding rounding = Rounding::kTflite;
};

// One loaded model, ready to run. All validation and memory planning happen in the constructor;
// invoke() then runs without allocating. Not thread-safe: one thread at a time.
class TINYCORAL_API Interpreter {
 public:
  // Loads the model at `model_path` onto `device`. Throws Error naming the problem (a file that
  // is not TFLite, an operator nothing here can run, an Edge TPU model on "cpu").
  Interpreter(const std::string& model_path, const Device& device, InterpreterOptions options = {});
  // The same with the device named as Device::open takes it. "auto" opens an Edge TPU only when
  // the model has an Edge TPU part (a plain model runs on "cpu" without touching USB).
  explicit Interpreter(const std::string& model_path, const std::string& device = "auto",
                       InterpreterOptions options = {});
  // A model held in memory (the bytes are copied).
  Interpreter(std::span<const uint8_t> model, const Device& device,
              InterpreterOptions options = {});
  ~Interpreter();
  Interpreter(Interpreter&&) noexcept;
  Interpreter& operator=(Interpreter&&) noexcept;

  const Device& device() const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // Throw Error for an index out of range.
  const TensorInfo& input(size_t i) const;
  const TensorInfo& output(size_t i) const;

  // Copies `bytes` into input i; throws Error unless it is exactly input(i).bytes long.
  void set_input(size_t i, std::span<const uint8_t> bytes);
  // Input i's own memory, to fill in place (valid until the interpreter is moved or destroyed).
  std::span<uint8_t> input_data(size_t i);

  // Runs the model once on the current inputs. Throws Error when the device fails (a stick that
  // stalls is recovered and the inference retried once first).
  void invoke();

  // Output i's raw bytes after invoke() (valid until the next invoke()).
  std::span<const uint8_t> output_data(size_t i) const;
  // Output i as real numbers: dequantized with its quantization, floats as they are, integers
  // exactly.
  std::vector<float> output_values(size_t i) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tinycoral
