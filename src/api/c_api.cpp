// The C API (include/tinycoral/tinycoral.h): each function runs the C++ API inside guard(), which
// turns exceptions into status codes and keeps the message for tinycoral_last_error().
#include <algorithm>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "tinycoral/classify.h"
#include "tinycoral/error.h"
#include "tinycoral/interpreter.h"
#include "tinycoral/tinycoral.h"

struct tinycoral_device {
  tinycoral::Device device;
};

struct tinycoral_interpreter {
  tinycoral::Interpreter interpreter;
  std::vector<tinycoral::TensorInfo> inputs, outputs;  // names stay valid for tensor_info
};

namespace {

thread_local std::string last_error;

tinycoral_status failed(tinycoral_status status, const char* message) {
  last_error = message;
  return status;
}

template <typename F>
tinycoral_status guard(F&& body) {
  try {
    body();
    return TINYCORAL_OK;
  } catch (const tinycoral::Error& e) {
    return failed(TINYCORAL_ERROR, e.what());
  } catch (const std::bad_alloc&) {
    return failed(TINYCORAL_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception& e) {
    return failed(TINYCORAL_INTERNAL, e.what());
  } catch (...) {
    return failed(TINYCORAL_INTERNAL, "unknown exception");
  }
}

#define TINYCORAL_REQUIRE(condition, what) \
  if (!(condition)) return failed(TINYCORAL_INVALID_ARGUMENT, what)

void copy_text(char* out, size_t size, const std::string& text) {
  const size_t n = std::min(size - 1, text.size());
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

void fill(const tinycoral::TensorInfo& t, tinycoral_tensor_info* info) {
  info->name = t.name.c_str();
  info->type = static_cast<tinycoral_type>(t.type);
  info->rank = static_cast<int>(t.shape.size());
  for (int d = 0; d < TINYCORAL_MAX_RANK; ++d)
    info->shape[d] = d < info->rank ? t.shape[static_cast<size_t>(d)] : 0;
  info->bytes = t.bytes;
  info->scale = t.quantization.scale;
  info->zero_point = t.quantization.zero_point;
}

tinycoral_status create(tinycoral_interpreter** out, auto make) {
  TINYCORAL_REQUIRE(out != nullptr, "interpreter is NULL");
  *out = nullptr;
  return guard([&] {
    auto* it = new tinycoral_interpreter{make(), {}, {}};
    for (size_t i = 0; i < it->interpreter.num_inputs(); ++i)
      it->inputs.push_back(it->interpreter.input(i));
    for (size_t i = 0; i < it->interpreter.num_outputs(); ++i)
      it->outputs.push_back(it->interpreter.output(i));
    *out = it;
  });
}

}  // namespace

// The enum values of the C API are those of tinycoral::DataType.
static_assert(static_cast<int>(tinycoral::DataType::kBool) == TINYCORAL_BOOL);
static_assert(static_cast<int>(tinycoral::DataType::kFloat32) == TINYCORAL_FLOAT32);
static_assert(static_cast<int>(tinycoral::DeviceKind::kCpu) == TINYCORAL_DEVICE_CPU);

extern "C" {

const char* tinycoral_version(void) { return tinycoral::version(); }
const char* tinycoral_last_error(void) { return last_error.c_str(); }

tinycoral_status tinycoral_list_devices(tinycoral_device_info* devices, size_t capacity,
                                        size_t* count) {
  TINYCORAL_REQUIRE(count != nullptr, "count is NULL");
  TINYCORAL_REQUIRE(devices != nullptr || capacity == 0, "devices is NULL");
  return guard([&] {
    const auto list = tinycoral::list_devices();
    *count = list.size();
    for (size_t i = 0; i < list.size() && i < capacity; ++i) {
      devices[i].kind = static_cast<tinycoral_device_kind>(list[i].kind);
      copy_text(devices[i].name, sizeof devices[i].name, list[i].name);
      copy_text(devices[i].description, sizeof devices[i].description, list[i].description);
    }
  });
}

tinycoral_status tinycoral_device_open(const char* name, tinycoral_device** device) {
  TINYCORAL_REQUIRE(name != nullptr && device != nullptr, "name or device is NULL");
  *device = nullptr;
  return guard([&] { *device = new tinycoral_device{tinycoral::Device::open(name)}; });
}

const char* tinycoral_device_name(const tinycoral_device* device) {
  return device ? device->device.name().c_str() : "";
}

void tinycoral_device_close(tinycoral_device* device) { delete device; }

tinycoral_status tinycoral_interpreter_create(const char* model_path, const char* device,
                                              tinycoral_interpreter** interpreter) {
  TINYCORAL_REQUIRE(model_path != nullptr && device != nullptr, "model_path or device is NULL");
  return create(interpreter,
                [&] { return tinycoral::Interpreter(model_path, std::string(device)); });
}

tinycoral_status tinycoral_interpreter_create_on(const char* model_path, tinycoral_device* device,
                                                 tinycoral_interpreter** interpreter) {
  TINYCORAL_REQUIRE(model_path != nullptr && device != nullptr, "model_path or device is NULL");
  return create(interpreter, [&] { return tinycoral::Interpreter(model_path, device->device); });
}

void tinycoral_interpreter_destroy(tinycoral_interpreter* interpreter) { delete interpreter; }

size_t tinycoral_interpreter_input_count(const tinycoral_interpreter* interpreter) {
  return interpreter ? interpreter->inputs.size() : 0;
}

size_t tinycoral_interpreter_output_count(const tinycoral_interpreter* interpreter) {
  return interpreter ? interpreter->outputs.size() : 0;
}

tinycoral_status tinycoral_interpreter_input_info(const tinycoral_interpreter* interpreter,
                                                  size_t index, tinycoral_tensor_info* info) {
  TINYCORAL_REQUIRE(interpreter != nullptr && info != nullptr, "interpreter or info is NULL");
  TINYCORAL_REQUIRE(index < interpreter->inputs.size(), "input index out of range");
  fill(interpreter->inputs[index], info);
  return TINYCORAL_OK;
}

tinycoral_status tinycoral_interpreter_output_info(const tinycoral_interpreter* interpreter,
                                                   size_t index, tinycoral_tensor_info* info) {
  TINYCORAL_REQUIRE(interpreter != nullptr && info != nullptr, "interpreter or info is NULL");
  TINYCORAL_REQUIRE(index < interpreter->outputs.size(), "output index out of range");
  fill(interpreter->outputs[index], info);
  return TINYCORAL_OK;
}

tinycoral_status tinycoral_interpreter_set_input(tinycoral_interpreter* interpreter, size_t index,
                                                 const void* data, size_t size) {
  TINYCORAL_REQUIRE(interpreter != nullptr && data != nullptr, "interpreter or data is NULL");
  TINYCORAL_REQUIRE(index < interpreter->inputs.size(), "input index out of range");
  TINYCORAL_REQUIRE(size == interpreter->inputs[index].bytes, "wrong input size");
  return guard([&] {
    interpreter->interpreter.set_input(
        index, std::span<const uint8_t>(static_cast<const uint8_t*>(data), size));
  });
}

tinycoral_status tinycoral_interpreter_set_input_image(tinycoral_interpreter* interpreter,
                                                       size_t index, const char* image_path) {
  TINYCORAL_REQUIRE(interpreter != nullptr && image_path != nullptr,
                    "interpreter or image_path is NULL");
  TINYCORAL_REQUIRE(index < interpreter->inputs.size(), "input index out of range");
  return guard([&] { tinycoral::set_input_image(interpreter->interpreter, index, image_path); });
}

tinycoral_status tinycoral_interpreter_invoke(tinycoral_interpreter* interpreter) {
  TINYCORAL_REQUIRE(interpreter != nullptr, "interpreter is NULL");
  return guard([&] { interpreter->interpreter.invoke(); });
}

tinycoral_status tinycoral_interpreter_output(const tinycoral_interpreter* interpreter,
                                              size_t index, const void** data, size_t* size) {
  TINYCORAL_REQUIRE(interpreter != nullptr && data != nullptr && size != nullptr,
                    "interpreter, data or size is NULL");
  TINYCORAL_REQUIRE(index < interpreter->outputs.size(), "output index out of range");
  const auto bytes = interpreter->interpreter.output_data(index);
  *data = bytes.data();
  *size = bytes.size();
  return TINYCORAL_OK;
}

tinycoral_status tinycoral_interpreter_output_values(const tinycoral_interpreter* interpreter,
                                                     size_t index, float* values, size_t count) {
  TINYCORAL_REQUIRE(interpreter != nullptr && values != nullptr, "interpreter or values is NULL");
  TINYCORAL_REQUIRE(index < interpreter->outputs.size(), "output index out of range");
  size_t elements = 1;
  for (int32_t d : interpreter->outputs[index].shape) elements *= static_cast<size_t>(d);
  TINYCORAL_REQUIRE(count == elements, "count is not the output's element count");
  return guard([&] {
    const std::vector<float> v = interpreter->interpreter.output_values(index);
    std::copy(v.begin(), v.end(), values);
  });
}

}  // extern "C"
