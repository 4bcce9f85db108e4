/* The tinycoral C API: run TFLite models on a Coral USB Accelerator, on the virtual Edge TPU
 * (a bit-exact simulator of the chip) or on the CPU, from C or any language with a C FFI.
 *
 * Every function that can fail returns a tinycoral_status (TINYCORAL_OK = 0); the message of the
 * last failure on the calling thread is tinycoral_last_error(). Objects are opaque and freed with
 * their _close/_destroy function (which accept NULL). Not thread-safe per object.
 *
 *   tinycoral_interpreter* model;
 *   if (tinycoral_interpreter_create("model_edgetpu.tflite", "sim", &model) != TINYCORAL_OK)
 *     fprintf(stderr, "%s\n", tinycoral_last_error());
 */
#ifndef TINYCORAL_TINYCORAL_H
#define TINYCORAL_TINYCORAL_H

#include <stddef.h>
#include <stdint.h>

#include "tinycoral/export.h"
#include "tinycoral/version.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum tinycoral_status {
  TINYCORAL_OK = 0,
  TINYCORAL_INVALID_ARGUMENT = 1, /* a NULL pointer, an index out of range, a wrong size */
  TINYCORAL_ERROR = 2,            /* what tinycoral::Error reports: bad model, device failure */
  TINYCORAL_OUT_OF_MEMORY = 3,
  TINYCORAL_INTERNAL = 4 /* a bug in tinycoral: please report it with the message */
} tinycoral_status;

typedef enum tinycoral_type {
  TINYCORAL_OTHER = 0,
  TINYCORAL_FLOAT32 = 1,
  TINYCORAL_UINT8 = 2,
  TINYCORAL_INT8 = 3,
  TINYCORAL_INT16 = 4,
  TINYCORAL_INT32 = 5,
  TINYCORAL_INT64 = 6,
  TINYCORAL_BOOL = 7
} tinycoral_type;

typedef enum tinycoral_device_kind {
  TINYCORAL_DEVICE_USB = 0,
  TINYCORAL_DEVICE_VIRTUAL = 1,
  TINYCORAL_DEVICE_CPU = 2
} tinycoral_device_kind;

#define TINYCORAL_MAX_RANK 8

typedef struct tinycoral_device_info {
  tinycoral_device_kind kind;
  char name[32];         /* what tinycoral_device_open takes: "usb:0", "sim", "cpu" */
  char description[128]; /* e.g. "port 2-1.3, ready" */
} tinycoral_device_info;

typedef struct tinycoral_tensor_info {
  const char* name; /* valid while the interpreter lives */
  tinycoral_type type;
  int rank;
  int32_t shape[TINYCORAL_MAX_RANK];
  size_t bytes;
  float scale; /* 0 when not quantized: real = scale * (stored - zero_point) */
  int32_t zero_point;
} tinycoral_tensor_info;

typedef struct tinycoral_device tinycoral_device;
typedef struct tinycoral_interpreter tinycoral_interpreter;

/* The library's version, e.g. "0.1.0". */
TINYCORAL_API const char* tinycoral_version(void);
/* The message of the last failure on this thread ("" when none). */
TINYCORAL_API const char* tinycoral_last_error(void);

/* Fills up to `capacity` entries of `devices` (sticks, then "sim" and "cpu") and sets *count to
 * how many exist (may exceed capacity). */
TINYCORAL_API tinycoral_status tinycoral_list_devices(tinycoral_device_info* devices,
                                                      size_t capacity, size_t* count);

/* Opens "auto", "usb", "usb:N", "sim" or "cpu". */
TINYCORAL_API tinycoral_status tinycoral_device_open(const char* name, tinycoral_device** device);
/* What was opened: "usb:N", "sim" or "cpu" (valid while the device lives). */
TINYCORAL_API const char* tinycoral_device_name(const tinycoral_device* device);
TINYCORAL_API void tinycoral_device_close(tinycoral_device* device);

/* Loads the model at `model_path` on the device named `device` ("auto" opens an Edge TPU only when
 * the model has an Edge TPU part). */
TINYCORAL_API tinycoral_status tinycoral_interpreter_create(const char* model_path,
                                                            const char* device,
                                                            tinycoral_interpreter** interpreter);
/* The same on an open device (the interpreter keeps it open). */
TINYCORAL_API tinycoral_status tinycoral_interpreter_create_on(const char* model_path,
                                                               tinycoral_device* device,
                                                               tinycoral_interpreter** interpreter);
TINYCORAL_API void tinycoral_interpreter_destroy(tinycoral_interpreter* interpreter);

TINYCORAL_API size_t tinycoral_interpreter_input_count(const tinycoral_interpreter* interpreter);
TINYCORAL_API size_t tinycoral_interpreter_output_count(const tinycoral_interpreter* interpreter);
TINYCORAL_API tinycoral_status tinycoral_interpreter_input_info(
    const tinycoral_interpreter* interpreter, size_t index, tinycoral_tensor_info* info);
TINYCORAL_API tinycoral_status tinycoral_interpreter_output_info(
    const tinycoral_interpreter* interpreter, size_t index, tinycoral_tensor_info* info);

/* Copies `size` bytes (exactly the input's size) into input `index`. */
TINYCORAL_API tinycoral_status tinycoral_interpreter_set_input(tinycoral_interpreter* interpreter,
                                                               size_t index, const void* data,
                                                               size_t size);
/* Reads a BMP, PNG or JPEG into image input `index` (resized, channels converted). */
TINYCORAL_API tinycoral_status tinycoral_interpreter_set_input_image(
    tinycoral_interpreter* interpreter, size_t index, const char* image_path);

/* Runs the model once; may be repeated. */
TINYCORAL_API tinycoral_status tinycoral_interpreter_invoke(tinycoral_interpreter* interpreter);

/* Output `index`'s raw bytes (valid until the next invoke). */
TINYCORAL_API tinycoral_status tinycoral_interpreter_output(
    const tinycoral_interpreter* interpreter, size_t index, const void** data, size_t* size);
/* Output `index` as real numbers (dequantized) into `values`, which holds `count` floats: exactly
 * the output's element count. */
TINYCORAL_API tinycoral_status tinycoral_interpreter_output_values(
    const tinycoral_interpreter* interpreter, size_t index, float* values, size_t count);

#ifdef __cplusplus
}
#endif

#endif /* TINYCORAL_TINYCORAL_H */
