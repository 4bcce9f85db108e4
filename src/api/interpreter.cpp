// The public Interpreter (include/tinycoral/interpreter.h): host::Interpreter with the Edge TPU
// delegate of its device, and the tensor descriptions the API promises.
#include "tinycoral/interpreter.h"

#include <algorithm>

#include "api/device_impl.h"
#include "common/error.h"
#include "common/file.h"
#include "container/tflite_reader.h"
#include "host/interpreter.h"
#include "host/scores.h"
#include "runtime/device_select.h"
#include "runtime/edgetpu_delegate.h"

namespace tinycoral {

namespace {

DataType data_type(container::TensorType t) {
  using container::TensorType;
  switch (t) {
    case TensorType::kFloat32:
      return DataType::kFloat32;
    case TensorType::kUInt8:
      return DataType::kUInt8;
    case TensorType::kInt8:
      return DataType::kInt8;
    case TensorType::kInt16:
      return DataType::kInt16;
    case TensorType::kInt32:
      return DataType::kInt32;
    case TensorType::kInt64:
      return DataType::kInt64;
    case TensorType::kBool:
      return DataType::kBool;
    default:
      return DataType::kOther;
  }
}

TensorInfo describe(const host::TensorView& v) {
  TensorInfo t;
  t.name = v.name();
  t.type = data_type(v.type());
  t.shape = v.shape();
  t.bytes = v.bytes;
  if (v.quantized()) t.quantization = {v.scale(), v.zero_point()};
  return t;
}

bool has_edgetpu_op(const container::Model& model) {
  return std::any_of(
      model.operator_codes.begin(), model.operator_codes.end(),
      [](const container::OperatorCode& c) { return c.custom_code == "edgetpu-custom-op"; });
}

}  // namespace

const char* data_type_name(DataType type) {
  switch (type) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt8:
      return "int8";
    case DataType::kInt16:
      return "int16";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kBool:
      return "bool";
    case DataType::kOther:
      break;
  }
  return "other";
}

struct Interpreter::Impl {
  Device device;
  host::Interpreter interp;
  std::vector<TensorInfo> inputs, outputs;

  Impl(Device d, container::Model model, const std::string& where, InterpreterOptions options)
      : device(std::move(d)), interp(load(device, std::move(model), where, options)) {
    for (size_t i = 0; i < interp.num_inputs(); ++i) inputs.push_back(describe(interp.input(i)));
    for (size_t i = 0; i < interp.num_outputs(); ++i) outputs.push_back(describe(interp.output(i)));
  }

  static host::Interpreter load(const Device& device, container::Model model,
                                const std::string& where, InterpreterOptions options) {
    host::InterpreterOptions o;
    o.rounding =
        options.rounding == Rounding::kEdgeTpu ? host::Rounding::kEdgeTpu : host::Rounding::kTflite;
    if (device.impl()->tpu) runtime::add_edgetpu_delegate(o.delegates, device.impl()->tpu);
    return with_context(where, [&] { return host::Interpreter(std::move(model), std::move(o)); });
  }
};

Interpreter::Interpreter(const std::string& model_path, const Device& device,
                         InterpreterOptions options)
    : impl_(std::make_unique<Impl>(device, container::read_tflite_file(model_path), model_path,
                                   options)) {}

Interpreter::Interpreter(const std::string& model_path, const std::string& device,
                         InterpreterOptions options) {
  runtime::parse_device(device);  // a wrong name is reported before the model is read
  container::Model model = container::read_tflite_file(model_path);
  // auto on a model with nothing for the Edge TPU: the CPU, without opening a device.
  const std::string name = device == "auto" && !has_edgetpu_op(model) ? "cpu" : device;
  impl_ = std::make_unique<Impl>(Device::open(name), std::move(model), model_path, options);
}

Interpreter::Interpreter(std::span<const uint8_t> model, const Device& device,
                         InterpreterOptions options)
    : impl_(std::make_unique<Impl>(device, container::read_tflite(model), "model", options)) {}

Interpreter::~Interpreter() = default;
Interpreter::Interpreter(Interpreter&&) noexcept = default;
Interpreter& Interpreter::operator=(Interpreter&&) noexcept = default;

const Device& Interpreter::device() const { return impl_->device; }
size_t Interpreter::num_inputs() const { return impl_->inputs.size(); }
size_t Interpreter::num_outputs() const { return impl_->outputs.size(); }

const TensorInfo& Interpreter::input(size_t i) const {
  if (i >= impl_->inputs.size())
    fail("the model has ", impl_->inputs.size(), " inputs, no input ", i);
  return impl_->inputs[i];
}

const TensorInfo& Interpreter::output(size_t i) const {
  if (i >= impl_->outputs.size())
    fail("the model has ", impl_->outputs.size(), " outputs, no output ", i);
  return impl_->outputs[i];
}

void Interpreter::set_input(size_t i, std::span<const uint8_t> bytes) {
  impl_->interp.set_input(i, bytes);
}

std::span<uint8_t> Interpreter::input_data(size_t i) {
  const host::TensorView v = impl_->interp.input(i);
  return {v.data, v.bytes};
}

void Interpreter::invoke() { impl_->interp.invoke(); }

std::span<const uint8_t> Interpreter::output_data(size_t i) const {
  output(i);  // range check with the API's message
  return impl_->interp.output_bytes(i);
}

std::vector<float> Interpreter::output_values(size_t i) const {
  output(i);  // range check with the API's message
  const std::vector<double> values = host::dequantized_values(impl_->interp.output(i));
  return {values.begin(), values.end()};
}

}  // namespace tinycoral
